package logging

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"unicode/utf8"
)

// MaxValueBytes is the most of one string a log line holds: outside data (a
// payload, an error quoting Prime's answer, an eventAction) is logged up to
// it and no further, so that one webhook cannot make megabytes of log.
const MaxValueBytes = 8 << 10

// Bound is s fit for a log line: every byte that is not UTF-8 written as
// \xNN (so nothing after a bad byte is lost, as a handler that stops there
// would lose it), and the whole cut at MaxValueBytes on a character
// boundary, saying how much was left out. Every logger New makes bounds
// every string and error it writes with it; call it only for text that
// reaches a log some other way.
func Bound(s string) string {
	if fits(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), MaxValueBytes) + 40)
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+size]
		if r == utf8.RuneError && size == 1 {
			piece = fmt.Sprintf(`\x%02x`, s[i])
		}
		if b.Len()+len(piece) > MaxValueBytes {
			break
		}
		b.WriteString(piece)
		i += size
	}
	if i < len(s) {
		fmt.Fprintf(&b, "…(cut: %d of %d bytes not logged)", len(s)-i, len(s))
	}
	return b.String()
}

// bound is the handlers' ReplaceAttr: every string and error value bounded.
func bound(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); !fits(s) {
			a.Value = slog.StringValue(Bound(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			if s := err.Error(); !fits(s) {
				a.Value = slog.StringValue(Bound(s))
			}
		}
	}
	return a
}

// fits reports whether s goes in a log line as it is: valid UTF-8, at most
// MaxValueBytes.
func fits(s string) bool { return len(s) <= MaxValueBytes && utf8.ValidString(s) }

// Payload is how a stored payload is logged: in full (to MaxValueBytes) the
// first time, on its row's first fault; after that as its size and a hash,
// which say whether it is the same payload without writing it again at
// every attempt.
func Payload(payload string, first bool) slog.Attr {
	if first {
		return slog.String("payload", payload)
	}
	sum := sha256.Sum256([]byte(payload))
	return slog.Group("payload", "bytes", len(payload), "sha256", hex.EncodeToString(sum[:]))
}
