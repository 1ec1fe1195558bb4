package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// SaveAppointment upserts an appointment unless the stored row is newer.
func (s *Store) SaveAppointment(ctx context.Context, a store.Appointment) (bool, error) {
	if a.AppointmentID == "" {
		return false, errors.New("sqlite: save appointment: no id")
	}
	res, err := s.w().ExecContext(ctx, `INSERT INTO primeAppointments
		(appointmentId, jobId, appointmentTypeId, startDate, endDate, status, version, assignedId,
		 description, notes, createdAt, updatedAt, attributes, syncedUTC)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (appointmentId) DO UPDATE SET
			jobId = excluded.jobId, appointmentTypeId = excluded.appointmentTypeId,
			startDate = excluded.startDate, endDate = excluded.endDate, status = excluded.status,
			version = excluded.version, assignedId = excluded.assignedId,
			description = excluded.description, notes = excluded.notes,
			createdAt = excluded.createdAt, updatedAt = excluded.updatedAt,
			attributes = excluded.attributes, syncedUTC = excluded.syncedUTC
		WHERE primeAppointments.version IS NULL OR excluded.version IS NULL
		   OR primeAppointments.version <= excluded.version`,
		mirrorGUID(a.AppointmentID), mirrorGUID(a.JobID), mirrorGUID(a.AppointmentTypeID), nullTime(a.StartDate), nullTime(a.EndDate),
		nullString(a.Status), a.Version, mirrorGUID(a.AssignedID), nullString(a.Description), nullString(a.Notes),
		nullTime(a.CreatedAt), nullTime(a.UpdatedAt), nullString(a.Attributes), formatTime(time.Now()))
	if err != nil {
		return false, fmt.Errorf("sqlite: save appointment: %w", err)
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// GetAppointment reads one appointment.
func (s *Store) GetAppointment(ctx context.Context, id string) (store.Appointment, bool, error) {
	return queryOne(ctx, s.r(), "get appointment", `SELECT appointmentId, jobId, appointmentTypeId, startDate, endDate, status,
		version, assignedId, description, notes, createdAt, updatedAt, attributes, syncedUTC
		FROM primeAppointments WHERE appointmentId = ?`, func(sc sqlrows.Scanner) (store.Appointment, error) {
		var a store.Appointment
		err := sc.Scan(&a.AppointmentID, scanString{&a.JobID}, scanString{&a.AppointmentTypeID}, scanTime{&a.StartDate},
			scanTime{&a.EndDate}, scanString{&a.Status}, scanNullInt64{&a.Version}, scanString{&a.AssignedID},
			scanString{&a.Description}, scanString{&a.Notes}, scanTime{&a.CreatedAt}, scanTime{&a.UpdatedAt},
			scanString{&a.Attributes}, scanTime{&a.SyncedUTC})
		return a, err
	}, mirrorGUID(id))
}

// mirrorGUID stores a GUID in its canonical lower-case text; "" is NULL.
func mirrorGUID(s string) any {
	if s == "" {
		return nil
	}
	return strings.ToLower(s)
}

// scanNullInt64 reads a nullable integer column; NULL is 0.
type scanNullInt64 struct{ n *int64 }

func (si scanNullInt64) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*si.n = 0
	case int64:
		*si.n = v
	default:
		return fmt.Errorf("sqlite: integer column holds %T", v)
	}
	return nil
}
