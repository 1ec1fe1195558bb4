package store

import (
	"context"
	"time"
)

// Appointment is a row of primeAppointments (§5.2): a Prime appointment's
// main attributes as columns and its raw attributes JSON. OptimoRoute's
// appointment queue compares version with the order it made (§5.2: mirroring
// the appointment is what queues it). GUIDs are lower-case canonical text;
// zero times and empty strings are NULL.
type Appointment struct {
	AppointmentID     string
	JobID             string
	AppointmentTypeID string
	StartDate         time.Time
	EndDate           time.Time
	Status            string
	Version           int64
	AssignedID        string
	Description       string
	Notes             string
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row; SaveAppointment sets it.
	SyncedUTC time.Time
}

// Appointments is the appointment mirror, primeAppointments.
type Appointments interface {
	// SaveAppointment inserts the appointment or updates the row with its
	// id, keeping Prime's version. A row whose stored version is newer than
	// the appointment's is left as it is: a late writer never rolls the
	// mirror back. It reports whether it wrote the row.
	SaveAppointment(ctx context.Context, a Appointment) (saved bool, err error)
	// GetAppointment returns a mirrored appointment; found is false when
	// primeAppointments has no row for it.
	GetAppointment(ctx context.Context, appointmentID string) (a Appointment, found bool, err error)
}
