package primectl_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

// hostile is text an outsider can get into a row: a line break and a forged
// row, an OSC escape that sets the terminal's title, a screen clear, NUL, a
// C1 control (NEL), a right-to-left override and a byte that is not UTF-8.
const hostile = "evil\r\n9999  2026-11-30 09:00:00  change-job-status  -  0  processed  Processed\x1b]0;pwned\x07\x1b[2J\x00\u0085\u202e\xff"

// terminalSafe fails the test if out holds anything but printable text and
// the line breaks primectl writes itself.
func terminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: not UTF-8: %q", what, out)
		return
	}
	for _, r := range out {
		if r != '\n' && (unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)) {
			t.Errorf("%s: prints %U: %q", what, r, out)
			return
		}
	}
}

// A row whose fields hold control characters cannot drive the terminal or
// forge a row: list and show print every field escaped.
func TestHostileRowIsPrintedEscaped(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	ctx := context.Background()
	id, err := w.store.InsertWebhookLog(ctx, store.NewWebhookLogRow{
		ReceivedUTC: time.Date(2026, 11, 30, 15, 0, 0, 0, time.UTC),
		EventAction: hostile,
		Payload:     "not json " + hostile,
		Headers:     `{"X-Evil":["` + strings.ReplaceAll(hostile[:10], "\r\n", `\r\n`) + "\u0085\u202e" + `"]}`,
		RemoteIP:    hostile,
	})
	is.NoErr(err) // stored as sent
	_, err = w.store.IncrementWebhookLogAttempt(ctx, id, "", "Prime said: "+hostile)
	is.NoErr(err) // with an error quoting it

	out, _, err := w.run("", "list", "--state", "all")
	is.NoErr(err) // lists
	terminalSafe(t, "list", out)
	is.Equal(strings.Count(out, "\n"), 1+5+1)          // a heading, the five rows and the count: no forged row
	is.True(strings.Contains(out, `evil\r\n9999`))     // the action, escaped
	is.True(strings.Contains(out, `\x1b]0;pwned\x07`)) // the title escape, written out
	is.True(!strings.Contains(out, "\x1b"))            // and never sent

	out, _, err = w.run("", "show", strconv.FormatInt(id, 10))
	is.NoErr(err) // shows
	terminalSafe(t, "show", out)
	is.True(strings.Contains(out, `\x00\u0085\u202e\xff`)) // NUL, NEL, the override and the bad byte, each written out
	is.True(strings.Contains(out, `Prime said: evil\r\n`)) // the error too
}

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"change-job-status", "change-job-status"},
		{"Ünïcödé and ✓ stay", "Ünïcödé and ✓ stay"},
		{"a\tb\r\nc", `a\tb\r\nc`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"nel\u0085csi\u009b", `nel\u0085csi\u009b`},
		{"\u202eevil\u2066\u200b\u2028", `\u202eevil\u2066\u200b\u2028`},
		{"bad\xff\xfebytes", `bad\xff\xfebytes`},
		{"cut \xe2\x9c", `cut \xe2\x9c`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			is := is.New(t)
			is.Equal(primectl.Printable(tc.in), tc.want) // escaped
		})
	}
}
