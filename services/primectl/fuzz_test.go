package primectl

import (
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// FuzzFilter holds the row filters of list and replay to what they say:
// a state is one of the four names; a job is a GUID, kept in lower case;
// --since and --until are a duration before now (24h) or a UTC time in one
// of the layouts, read back exactly; anything else is refused, naming the
// flag; and filtered is true exactly when something narrows the rows.
func FuzzFilter(f *testing.F) {
	for _, seed := range [][5]string{
		{"capped", "", "", "", ""}, {"all", "create-estimate", "", "24h", ""}, {"", "", "0F8E3C1A-5B7D-4E2F-9A6C-1D3E5F7A9B01", "", ""},
		{"unprocessed", "", "", "2026-11-30", "2026-11-30 14:05:00"}, {"processed", "", "", "2026-11-30T14:05:00+10:00", "2026-11-30 14:05"},
		{"bogus", "", "", "", ""}, {"all", "", "not-a-guid", "", ""}, {"all", "", "", "-1h", "0s"}, {"all", "", "", "yesterday-ish", ""},
		{"all", "", "", " 90m ", "2026-11-30T14:05:00.123456789Z"}, {"all", "", "", "2562047h", ""}, {"all", "", "", "1h1h", ""},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3], seed[4])
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, state, action, job, since, until string) {
		ff := filterFlags{state: state, action: action, job: job, since: since, until: until}
		lf, filtered, err := ff.filter(now)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--") {
				t.Fatalf("an error that names no flag: %v", err)
			}
			return
		}
		switch state {
		case "", "all", "unprocessed", "capped", "processed":
		default:
			t.Fatalf("--state %q accepted", state)
		}
		if job != "" && (!isGUID(job) || lf.JobID != strings.ToLower(job)) {
			t.Fatalf("--job %q filtered as %q", job, lf.JobID)
		}
		for _, tt := range []struct {
			flag, text string
			got        time.Time
		}{{"--since", since, lf.From}, {"--until", until, lf.To}} {
			if tt.got.Location() != time.UTC {
				t.Fatalf("%s %q read in %s, not UTC", tt.flag, tt.text, tt.got.Location())
			}
			text := strings.TrimSpace(tt.text)
			if d, err := time.ParseDuration(text); err == nil && d > 0 {
				if !tt.got.Equal(now.Add(-d)) {
					t.Fatalf("%s %q read as %s, not %s before now", tt.flag, tt.text, tt.got, d)
				}
				continue
			}
			if (text == "") != tt.got.IsZero() {
				t.Fatalf("%s %q read as %s", tt.flag, tt.text, tt.got)
			}
		}
		narrowed := lf.State != store.AnyState || action != "" || job != "" || !lf.From.IsZero() || !lf.To.IsZero()
		if filtered != narrowed {
			t.Fatalf("filtered %v for %+v", filtered, ff)
		}
	})
}

// FuzzParseTime: a time --since or --until accepts is the instant its text
// names in one of the documented layouts, read as UTC (Go's own reading of
// the layout: "2026-11-30 9:05" is 09:05, as the kept crasher says); a
// positive duration counts back from now.
func FuzzParseTime(f *testing.F) {
	for _, seed := range []string{"2026-11-30", "2026-11-30 14:05:00", "2026-11-30T14:05:00", "2026-11-30 14:05",
		"2026-11-30T14:05:00+10:00", "2026-02-30", "24h", "0001-01-01", "9999-12-31 23:59:59", "2026-11-30 24:00"} {
		f.Add(seed)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseTime(s, now)
		if err != nil || got.IsZero() {
			return
		}
		if got.Location() != time.UTC {
			t.Fatalf("%q read in %s", s, got.Location())
		}
		text := strings.TrimSpace(s)
		if d, err := time.ParseDuration(text); err == nil && d > 0 {
			if !got.Equal(now.Add(-d)) {
				t.Fatalf("%q read as %s, not %s before now", s, got, d)
			}
			return
		}
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", time.DateOnly} {
			if want, err := time.ParseInLocation(layout, text, time.UTC); err == nil {
				if !want.Equal(got) {
					t.Fatalf("%q read as %s; the layout %q names %s", s, got, layout, want)
				}
				return
			}
		}
		t.Fatalf("%q read as %s, in none of the layouts", s, got)
	})
}
