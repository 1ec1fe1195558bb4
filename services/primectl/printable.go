package primectl

import (
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s made safe for an operator's terminal: every character that
// could move the cursor, start an escape sequence, end a line or reorder
// what follows is written as a Go escape instead — C0 and C1 controls
// (\n, \r, \t, \x1b, \x00, \u0085 …), DEL, Unicode format characters (the
// bidirectional overrides U+202A–U+202E and U+2066–U+2069, zero-width
// characters) and the line and paragraph separators — and a byte that is
// not UTF-8 as \xNN. Stored rows hold what outsiders sent (an eventAction,
// a payload, an error that quotes Prime): every field primectl prints goes
// through Printable (or printableLines, for a block of lines primectl
// itself formatted), so stored data can never drive the terminal or forge a
// line of output.
func Printable(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || unsafeRune(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case unsafeRune(r) && r < utf8.RuneSelf:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// printableLines is Printable for each line of a block primectl formatted
// itself (indented JSON), keeping its line breaks.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Printable(l)
	}
	return strings.Join(lines, "\n")
}

// writeRow writes one line of a table: the fields, each Printable, between
// tabs.
func writeRow(w io.Writer, fields ...string) {
	for i, f := range fields {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, Printable(f))
	}
	io.WriteString(w, "\n")
}
