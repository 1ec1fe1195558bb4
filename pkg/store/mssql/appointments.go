package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
)

// SaveAppointment upserts an appointment unless the stored row is newer
// (spPrimeflowSaveAppointment).
func (s *Store) SaveAppointment(ctx context.Context, a store.Appointment) (bool, error) {
	id, err := parseGUID(a.AppointmentID)
	if err != nil {
		return false, err
	}
	args, err := guidArgs("JobId", a.JobID, "AppointmentTypeId", a.AppointmentTypeID, "AssignedId", a.AssignedID)
	if err != nil {
		return false, err
	}
	args = append(args, sql.Named("AppointmentId", id),
		sql.Named("StartDate", sqlTime(a.StartDate)), sql.Named("EndDate", sqlTime(a.EndDate)),
		sql.Named("Status", sqlString(a.Status)), sql.Named("Version", a.Version),
		sql.Named("Description", sqlString(a.Description)), sql.Named("Notes", sqlString(a.Notes)),
		sql.Named("CreatedAt", sqlTime(a.CreatedAt)), sql.Named("UpdatedAt", sqlTime(a.UpdatedAt)),
		sql.Named("Attributes", sqlString(a.Attributes)))
	var saved bool
	err = s.q().QueryRowContext(ctx, procSaveAppointment, args...).Scan(&saved)
	if err != nil {
		return false, fmt.Errorf("mssql: save appointment: %w", err)
	}
	return saved, nil
}

// GetAppointment reads one appointment (spPrimeflowGetAppointment).
func (s *Store) GetAppointment(ctx context.Context, appointmentID string) (store.Appointment, bool, error) {
	id, ok := keyGUID(appointmentID)
	if !ok {
		return store.Appointment{}, false, nil
	}
	var a store.Appointment
	found, err := s.getOne(ctx, "get appointment", procGetAppointment, []any{
		scanGUID{&a.AppointmentID}, scanGUID{&a.JobID}, scanGUID{&a.AppointmentTypeID}, scanTime{&a.StartDate},
		scanTime{&a.EndDate}, scanString{&a.Status}, scanInt64{&a.Version}, scanGUID{&a.AssignedID},
		scanString{&a.Description}, scanString{&a.Notes}, scanTime{&a.CreatedAt}, scanTime{&a.UpdatedAt},
		scanString{&a.Attributes}, scanTime{&a.SyncedUTC},
	}, sql.Named("AppointmentId", id))
	if !found || err != nil {
		return store.Appointment{}, false, err
	}
	return a, true, nil
}
