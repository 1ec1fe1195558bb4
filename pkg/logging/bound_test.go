package logging_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/logging"
	"github.com/matryer/is"
)

func TestBound(t *testing.T) {
	nel := strings.Repeat("\u0085", 1<<19) // 1 MiB of a two-byte character
	for _, tc := range []struct {
		name, in string
		want     string // "" checks only the bound
	}{
		{"short and valid: as it is", `{"eventAction":"change-job-status"}`, `{"eventAction":"change-job-status"}`},
		{"bad bytes escaped, what follows kept", "before\xffafter\xc3", `before\xffafter\xc3`},
		{"long", nel, ""},
		{"long with bad bytes", strings.Repeat("a\xff", 1<<16), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got := logging.Bound(tc.in)
			if tc.want != "" {
				is.Equal(got, tc.want) // escaped, nothing lost
				return
			}
			is.True(utf8.ValidString(got))                                              // cut on a character boundary
			body, _, cut := strings.Cut(got, "…(cut: ")                                 // says it was cut
			is.True(cut)                                                                // said
			is.True(len(body) <= logging.MaxValueBytes)                                 // at the bound
			is.True(len(body) > logging.MaxValueBytes-4)                                // and not far below it
			is.True(strings.HasPrefix(tc.in, strings.ReplaceAll(body, `\xff`, "\xff"))) // the start of the value
		})
	}
}

// Every logger New makes bounds every string and error it writes, in both
// formats: a megabyte of outside data is a few KiB of log line.
func TestLoggersBoundWhatTheyWrite(t *testing.T) {
	huge := strings.Repeat("\u0085", 1<<19) + "\xff"
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			is := is.New(t)
			var out bytes.Buffer
			log, err := logging.New(&out, logging.Config{Format: format, Level: "info"})
			is.NoErr(err)
			log.With("action", huge).Error("payload fault", "payload", huge, "err", errors.New("prime said: "+huge), slog.Group("g", "inner", huge))
			is.True(out.Len() < 4*8*(logging.MaxValueBytes))  // four values of at most 8 KiB, escaped
			is.True(utf8.Valid(out.Bytes()))                  // and valid UTF-8
			is.Equal(strings.Count(out.String(), "cut: "), 4) // each value cut, saying so
		})
	}
}

// A payload is logged in full on its row's first fault; after that by its
// size and a hash.
func TestPayload(t *testing.T) {
	is := is.New(t)
	is.Equal(logging.Payload(`{"a":1}`, true).String(), `payload={"a":1}`)
	later := logging.Payload(`{"a":1}`, false).String()
	is.True(strings.Contains(later, "bytes=7"))                                                                 // its size
	is.True(strings.Contains(later, "sha256=015abd7f5cc57a2dd94b7590f04ad8084273905ee33ec5cebeae62276a97f862")) // its hash
	is.True(!strings.Contains(later, `"a"`))                                                                    // not the payload
}

// A struct with no LogValue of its own is logged as JSON in the text
// format, not as a Go value whose empty fields run into the next.
func TestStructsAreLoggedAsJSON(t *testing.T) {
	is := is.New(t)
	var b bytes.Buffer
	log, err := logging.New(&b, logging.Config{Format: "text", Level: "info"})
	is.NoErr(err)
	type reply struct {
		Listed       int    `json:"listed"`
		Error        string `json:"error"`
		RetryAfterMS int64  `json:"retryAfterMs"`
	}
	log.Info("sweep finished", "reply", reply{Listed: 3}, "err", errors.New("as text"), "n", 7)
	out := b.String()
	is.True(strings.Contains(out, `reply="{\"listed\":3,\"error\":\"\",\"retryAfterMs\":0}"`)) // JSON, each field named
	is.True(!strings.Contains(out, "Error: RetryAfterMS"))                                     // not a Go struct
	is.True(strings.Contains(out, `err="as text"`))                                            // errors as their text
	is.True(strings.Contains(out, "n=7"))                                                      // the rest as they were
}
