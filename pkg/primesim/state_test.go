package primesim_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

// A simulator started again from its state file serves what it served
// before and hands out no id, numeric reference or job number twice — not
// even after a Reset (bin/primeflow keeps it under DATA_DIR).
func TestStateFileKeepsRecordsAndNeverReusesIds(t *testing.T) {
	is := is.New(t)
	fx, err := primesim.DefaultFixture()
	is.NoErr(err)
	state := filepath.Join(t.TempDir(), "simulators", "prime.json")
	start := func() *primesim.Sim {
		sim, err := primesim.New(primesim.Options{Fixture: fx, StateFile: state})
		is.NoErr(err)
		return sim
	}

	first := start()
	job := first.NewJob()
	appt := first.NewAppointment(fixtureJob)
	fi, err := os.Stat(state)
	is.NoErr(err)
	is.Equal(fi.Mode().Perm(), os.FileMode(0o600)) // kept under the state file, the owner's only

	again := start() // a restart
	_, ok := again.Job(job.ID)
	is.True(ok) // the generated job is still served
	_, ok = again.Appointment(appt.ID)
	is.True(ok) // and the appointment
	_, ok = again.Appointment(fixtureAppt)
	is.True(ok) // and the fixture's
	next := again.NewAppointment(fixtureJob)
	is.True(next.ID != appt.ID) // a new appointment gets a new id
	job2 := again.NewJob()
	is.True(job2.ID != job.ID)               // a new job a new id
	is.True(job2.Ref > job.Ref)              // and the next numeric reference
	is.True(job2.JobNumber != job.JobNumber) // and job number

	is.NoErr(again.Reset())
	_, ok = again.Job(job.ID)
	is.True(!ok) // Reset goes back to the fixture
	after := again.NewAppointment(fixtureJob)
	is.True(after.ID != appt.ID && after.ID != next.ID) // but does not rewind the ids
	restarted := start()
	_, ok = restarted.Appointment(after.ID)
	is.True(ok) // and is kept too

	// Without a state file nothing is kept, and the same seed makes the
	// same ids: what tests rely on.
	plain, err := primesim.New(primesim.Options{Fixture: fx})
	is.NoErr(err)
	_, ok = plain.Job(job.ID)
	is.True(!ok)
}
