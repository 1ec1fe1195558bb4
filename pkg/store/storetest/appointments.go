package storetest

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// GUIDs of the child-mirror contract tests.
const (
	childJob     = "c0a80101-0000-4000-8000-000000000001"
	childJob2    = "c0a80101-0000-4000-8000-000000000002"
	childAppt    = "a1a1a1a1-0000-4000-8000-000000000001"
	childType    = "a2a2a2a2-0000-4000-8000-000000000001"
	childUser    = "a3a3a3a3-0000-4000-8000-000000000001"
	childAlloc   = "b1b1b1b1-0000-4000-8000-000000000001"
	childAlloc2  = "b1b1b1b1-0000-4000-8000-000000000002"
	childContact = "d1d1d1d1-0000-4000-8000-000000000001"
	childStatus  = "b2b2b2b2-0000-4000-8000-000000000001"
)

// at is a fixed time of the tests, whole milliseconds in UTC as both
// adapters store them.
func at(day, hour int) time.Time { return time.Date(2026, 10, day, hour, 30, 15, 250e6, time.UTC) }

// sameDecimal compares decimals as numbers: SQL Server keeps DECIMAL(19,4)
// ("2068.0000" for "2068.00").
func sameDecimal(a, b string) bool {
	if a == "" || b == "" {
		return a == b
	}
	x, okX := new(big.Rat).SetString(a)
	y, okY := new(big.Rat).SetString(b)
	return okX && okY && x.Cmp(y) == 0
}

func sampleAppointment(version int64, status string) store.Appointment {
	return store.Appointment{
		AppointmentID: strings.ToUpper(childAppt), JobID: strings.ToUpper(childJob),
		AppointmentTypeID: childType, StartDate: at(5, 22), EndDate: at(6, 0), Status: status,
		Version: version, AssignedID: childUser, Description: "Site inspection", Notes: "Dog on site",
		CreatedAt: at(1, 1), UpdatedAt: at(2, 3), Attributes: `{"status":"` + status + `","extra":[1]}`,
	}
}

func testAppointments(t *testing.T, open Opener) {
	ctx := context.Background()

	t.Run("save, read back, refresh", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, found, err := s.GetAppointment(ctx, childAppt)
		is.NoErr(err)
		is.True(!found) // nothing mirrored yet

		before := time.Now().Add(-time.Second)
		saved, err := s.SaveAppointment(ctx, sampleAppointment(2, "Scheduled"))
		is.NoErr(err)
		is.True(saved) // a new appointment is written
		got, found, err := s.GetAppointment(ctx, strings.ToUpper(childAppt))
		is.NoErr(err)
		is.True(found)                                     // found by its GUID in any case
		is.Equal(got.AppointmentID, childAppt)             // GUIDs stored lower-case
		is.Equal(got.JobID, childJob)                      // the job's too
		is.Equal(got.AppointmentTypeID, childType)         // every column kept
		is.Equal(got.StartDate, at(5, 22))                 // start
		is.Equal(got.EndDate, at(6, 0))                    // end
		is.Equal(got.Status, "Scheduled")                  // status
		is.Equal(got.Version, int64(2))                    // Prime's version kept
		is.Equal(got.AssignedID, childUser)                // assignee
		is.Equal(got.Description, "Site inspection")       // description
		is.Equal(got.Notes, "Dog on site")                 // notes
		is.Equal(got.CreatedAt, at(1, 1))                  // createdAt
		is.Equal(got.UpdatedAt, at(2, 3))                  // updatedAt
		is.True(strings.Contains(got.Attributes, "extra")) // raw attributes kept
		is.True(got.SyncedUTC.After(before))               // stamped when written

		saved, err = s.SaveAppointment(ctx, sampleAppointment(3, "Completed"))
		is.NoErr(err)
		is.True(saved) // a newer version is written
		got, _, err = s.GetAppointment(ctx, childAppt)
		is.NoErr(err)
		is.Equal(got.Status, "Completed") // refreshed
		is.Equal(got.Version, int64(3))   // with its version

		saved, err = s.SaveAppointment(ctx, sampleAppointment(3, "Completed"))
		is.NoErr(err)
		is.True(saved) // the same version again is written (a replay)

		saved, err = s.SaveAppointment(ctx, sampleAppointment(1, "Scheduled"))
		is.NoErr(err)
		is.True(!saved) // an older version is not
		got, _, err = s.GetAppointment(ctx, childAppt)
		is.NoErr(err)
		is.Equal(got.Status, "Completed") // the mirror never rolls back
		is.Equal(got.Version, int64(3))   // nor its version
	})

	t.Run("empty columns are NULL", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		_, err := s.SaveAppointment(ctx, store.Appointment{AppointmentID: childAppt})
		is.NoErr(err)
		got, found, err := s.GetAppointment(ctx, childAppt)
		is.NoErr(err)
		is.True(found)                  // saved with only its id
		is.Equal(got.JobID, "")         // no job
		is.True(got.StartDate.IsZero()) // no start
		is.Equal(got.Attributes, "")    // no attributes
	})

	t.Run("rolled back with its transaction", func(t *testing.T) {
		is := is.New(t)
		s := open(t)
		boom := errors.New("boom")
		err := s.InTx(ctx, func(tx store.Store) error {
			if _, err := tx.SaveAppointment(ctx, sampleAppointment(1, "Scheduled")); err != nil {
				return err
			}
			return boom
		})
		is.True(errors.Is(err, boom)) // the transaction failed
		_, found, err := s.GetAppointment(ctx, childAppt)
		is.NoErr(err)
		is.True(!found) // and took the appointment with it
	})
}
