package store_test

import (
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

func TestIsOutsideBusinessHours(t *testing.T) {
	utc := func(y int, m time.Month, d, h, min int) time.Time { return time.Date(y, m, d, h, min, 0, 0, time.UTC) }
	mel, err := time.LoadLocation(store.BusinessZone)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		at      time.Time
		outside bool
	}{
		// Tuesday 2026-09-01, AEST (UTC+10).
		{"08:29 Tuesday, standard time", utc(2026, 8, 31, 22, 29), true},
		{"08:30 Tuesday opens", utc(2026, 8, 31, 22, 30), false},
		{"16:59 Tuesday", utc(2026, 9, 1, 6, 59), false},
		{"17:00 Tuesday closes", utc(2026, 9, 1, 7, 0), true},
		{"16:59:59.999 Tuesday", time.Date(2026, 9, 1, 6, 59, 59, 999e6, time.UTC), false},
		{"midnight Tuesday", utc(2026, 8, 31, 14, 0), true},
		// Weekends, whatever the hour.
		{"Saturday 10:00", utc(2026, 9, 5, 0, 0), true},
		{"Sunday 12:00", utc(2026, 9, 6, 2, 0), true},
		{"Friday 16:59", utc(2026, 9, 4, 6, 59), false},
		// The UTC date is not the Melbourne date.
		{"Sunday 23:00 UTC is Monday 09:00", utc(2026, 9, 6, 23, 0), false},
		{"Friday 23:00 UTC is Saturday 09:00", utc(2026, 9, 4, 23, 0), true},
		// Daylight saving starts on the first Sunday of October (2026-10-04,
		// 02:00 AEST → 03:00 AEDT, UTC+11): on the Monday after, 08:30 is
		// 21:30 UTC the day before; a fixed +10 would call it 07:30.
		{"Monday after DST starts, 08:29 AEDT", utc(2026, 10, 4, 21, 29), true},
		{"Monday after DST starts, 08:30 AEDT", utc(2026, 10, 4, 21, 30), false},
		{"Monday after DST starts, 16:59 AEDT", utc(2026, 10, 5, 5, 59), false},
		{"Monday after DST starts, 17:00 AEDT", utc(2026, 10, 5, 6, 0), true},
		{"01:30 AEST on the changeover Sunday, before the gap", utc(2026, 10, 3, 15, 30), true},
		{"02:30 on the changeover Sunday, an hour that does not exist", time.Date(2026, 10, 4, 2, 30, 0, 0, mel), true},
		{"03:30 AEDT on the changeover Sunday, after the gap", utc(2026, 10, 3, 16, 30), true},
		// Daylight saving ends on the first Sunday of April (2026-04-05,
		// 03:00 AEDT → 02:00 AEST): 02:30 happens twice, both on a Sunday.
		{"Friday before DST ends, 08:30 AEDT", utc(2026, 4, 2, 21, 30), false},
		{"Friday before DST ends, 17:00 AEDT", utc(2026, 4, 3, 6, 0), true},
		{"02:30 AEDT, the first of the repeated hour", utc(2026, 4, 4, 15, 30), true},
		{"02:30 AEST, the second of the repeated hour", utc(2026, 4, 4, 16, 30), true},
		{"02:30 as a Melbourne wall-clock time, ambiguous", time.Date(2026, 4, 5, 2, 30, 0, 0, mel), true},
		{"Monday after DST ends, 08:29 AEST", utc(2026, 4, 5, 22, 29), true},
		{"Monday after DST ends, 08:30 AEST", utc(2026, 4, 5, 22, 30), false},
		{"Monday after DST ends, 17:00 AEST", utc(2026, 4, 6, 7, 0), true},
		{"a time in another zone is the same instant", time.Date(2026, 9, 1, 10, 0, 0, 0, time.FixedZone("AEST", 10*3600)), false},
		{"no createdAt", time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(store.IsOutsideBusinessHours(tc.at), tc.outside) // the rule's verdict
		})
	}
}

func TestMakesafeSMSBody(t *testing.T) {
	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	for _, tc := range []struct {
		name                          string
		number, line1, suburb, st, pc string
		want                          string
	}{
		{"everything", "J014370", "12 Smith St", "Richmond", "VIC", "3121",
			"MAKE SAFE after hours: job J014370, 12 Smith St, Richmond, VIC, 3121. Please call the customer now."},
		{"parts missing or blank", " J014370 ", "", "Richmond", "  ", "3121",
			"MAKE SAFE after hours: job J014370, Richmond, 3121. Please call the customer now."},
		{"no job number", "", "", "", "", "",
			"MAKE SAFE after hours: job 0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10. Please call the customer now."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(store.MakesafeSMSBody(job, tc.number, tc.line1, tc.suburb, tc.st, tc.pc), tc.want) // the text
		})
	}
}
