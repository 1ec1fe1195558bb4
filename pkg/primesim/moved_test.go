package primesim_test

import (
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

// A fixture moved in time keeps everything but its timestamps, each moved
// by as much; Latest is the newest.
func TestFixtureMoved(t *testing.T) {
	is := is.New(t)
	fx, err := primesim.DefaultFixture()
	is.NoErr(err)
	latest, err := fx.Latest()
	is.NoErr(err)
	is.Equal(latest, time.Date(2025, 2, 11, 6, 30, 0, 0, time.UTC)) // the fixture's estimate, updated last
	moved, err := fx.Moved(100*24*time.Hour + 3*time.Hour)
	is.NoErr(err)
	movedLatest, err := moved.Latest()
	is.NoErr(err)
	is.Equal(movedLatest, latest.Add(100*24*time.Hour+3*time.Hour)) // moved by as much

	sim, err := primesim.New(primesim.Options{Fixture: moved})
	is.NoErr(err)
	job, ok := sim.Job(fixtureJob)
	is.True(ok)
	is.Equal(job.CreatedAt.Format(prime.TimeLayout), "2025-05-18 07:14:33") // 2025-02-07 04:14:33, 100 days and 3 hours on
	is.Equal(job.JobNumber, "J012345")                                      // the rest as it was
	is.Equal(job.Ref, int64(fixtureJobRef))
	appt, ok := sim.Appointment(fixtureAppt)
	is.True(ok)
	is.Equal(appt.StartDate.Format(prime.TimeLayout), "2025-05-22 02:00:00") // children too: 2025-02-10 23:00:00
	is.Equal(appt.Notes, "Dog on premises, call on arrival")
	orig, err := primesim.DefaultFixture()
	is.NoErr(err)
	is.Equal(fx, orig) // and the fixture it was moved from is unchanged
}
