package optimocreate_test

import (
	"testing"
	"time"

	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	"github.com/matryer/is"
)

// mel is a wall-clock time in Melbourne (not one of a repeated hour).
func mel(month time.Month, d, h, m, s int) time.Time {
	return time.Date(2026, month, d, h, m, s, 0, melbourne)
}

// §8.1: M–F 15:00–16:59 every 15 minutes; M–F 08:00–14:59 every 30; M–F
// 17:00–07:59 and the weekend hourly; in the account's zone, through the
// daylight-saving changes. 2026-03-04 is a Wednesday, 03-06 a Friday.
func TestNextRun(t *testing.T) {
	adelaide, err := time.LoadLocation("Australia/Adelaide")
	if err != nil {
		t.Fatal(err)
	}
	utc := func(s string) time.Time {
		u, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	tests := []struct {
		name      string
		at        time.Time
		zone      *time.Location
		want      time.Time
		sweepBand bool
	}{
		{"night: hourly", mel(3, 4, 7, 10, 0), melbourne, mel(3, 4, 8, 0, 0), false},
		{"the last second before 08:00", mel(3, 4, 7, 59, 59), melbourne, mel(3, 4, 8, 0, 0), false},
		{"at a run: the next one", mel(3, 4, 8, 0, 0), melbourne, mel(3, 4, 8, 30, 0), false},
		{"day: every 30 minutes", mel(3, 4, 8, 10, 0), melbourne, mel(3, 4, 8, 30, 0), false},
		{"the day's last half hour", mel(3, 4, 14, 45, 0), melbourne, mel(3, 4, 15, 0, 0), false},
		{"the band opens", mel(3, 4, 15, 0, 0), melbourne, mel(3, 4, 15, 15, 0), true},
		{"band: every 15 minutes", mel(3, 4, 15, 5, 0), melbourne, mel(3, 4, 15, 15, 0), true},
		{"the band's last quarter", mel(3, 4, 16, 45, 0), melbourne, mel(3, 4, 17, 0, 0), true},
		{"the band's last second", mel(3, 4, 16, 59, 59), melbourne, mel(3, 4, 17, 0, 0), true},
		{"evening: hourly", mel(3, 4, 17, 0, 0), melbourne, mel(3, 4, 18, 0, 0), false},
		{"over midnight", mel(3, 4, 23, 30, 0), melbourne, mel(3, 5, 0, 0, 0), false},
		{"Friday's band", mel(3, 6, 16, 50, 0), melbourne, mel(3, 6, 17, 0, 0), true},
		{"into Saturday", mel(3, 6, 23, 10, 0), melbourne, mel(3, 7, 0, 0, 0), false},
		{"Saturday afternoon: hourly, no band", mel(3, 7, 15, 10, 0), melbourne, mel(3, 7, 16, 0, 0), false},
		{"Saturday morning: hourly", mel(3, 7, 8, 10, 0), melbourne, mel(3, 7, 9, 0, 0), false},
		{"Sunday into Monday", mel(3, 8, 23, 59, 0), melbourne, mel(3, 9, 0, 0, 0), false},
		{"Monday's night", mel(3, 9, 0, 30, 0), melbourne, mel(3, 9, 1, 0, 0), false},
		// 2026-04-05 03:00 AEDT goes back to 02:00 AEST: the hour 02 comes twice.
		{"clocks go back: 02:30 AEDT", utc("2026-04-04T15:30:00Z"), melbourne, utc("2026-04-04T16:00:00Z"), false}, // 02:00 AEST
		{"clocks go back: 02:30 AEST", utc("2026-04-04T16:30:00Z"), melbourne, utc("2026-04-04T17:00:00Z"), false}, // 03:00 AEST
		// 2026-10-04 02:00 AEST goes forward to 03:00 AEDT: there is no 02.
		{"clocks go forward: 01:30 AEST", utc("2026-10-03T15:30:00Z"), melbourne, utc("2026-10-03T16:00:00Z"), false}, // 03:00 AEDT
		{"a zone half an hour off UTC", time.Date(2026, 3, 4, 15, 5, 0, 0, adelaide), adelaide, time.Date(2026, 3, 4, 15, 15, 0, 0, adelaide), true},
		{"the zone decides, not UTC", mel(3, 4, 15, 5, 0), adelaide, mel(3, 4, 15, 30, 0), false}, // 14:35 in Adelaide
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := is.New(t)
			got := optimocreate.NextRun(tt.at, tt.zone)
			if !got.Equal(tt.want) {
				t.Logf("next run after %s: %s, want %s", tt.at.In(tt.zone), got.In(tt.zone), tt.want.In(tt.zone))
			}
			is.True(got.Equal(tt.want))                                      // the next run
			is.Equal(optimocreate.InSweepBand(tt.at, tt.zone), tt.sweepBand) // whether a run then sweeps first
		})
	}
}
