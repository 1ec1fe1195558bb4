package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// The procedures behind the ClientWIPTriggers and TriageInvites methods
// (sql/mssql/011_job_triggers.sql).
const (
	procQueueClientWIPStatusChange = "dbo.spPrimeflowQueueClientWIPStatusChange"
	procListClientWIPTriggers      = "dbo.spPrimeflowListClientWIPTriggers"
	procQueueTriageInvite          = "dbo.spPrimeflowQueueTriageInvite"
	procListTriageInvites          = "dbo.spPrimeflowListTriageInvites"
)

// The procedures of the triage invite sender (sql/mssql/061_triage_invites.sql,
// which also redefines procQueueTriageInvite and procListTriageInvites).
const (
	procListTriageInviteQueue  = "dbo.spPrimeflowListTriageInviteQueue"
	procClaimTriageInvites     = "dbo.spPrimeflowClaimTriageInvites"
	procSetTriageInviteSent    = "dbo.spPrimeflowSetTriageInviteSent"
	procSetTriageInviteFailed  = "dbo.spPrimeflowSetTriageInviteFailed"
	procReleaseTriageInvite    = "dbo.spPrimeflowReleaseTriageInvite"
	procSetTriageInvitePayload = "dbo.spPrimeflowSetTriageInvitePayload"
	procGetTriageInvite        = "dbo.spPrimeflowGetTriageInvite"
	procNextTriageInviteDue    = "dbo.spPrimeflowNextTriageInviteDue"
	procCountTriageInvites     = "dbo.spPrimeflowCountTriageInvites"
	procOldestInviteWaiting    = "dbo.spPrimeflowOldestTriageInviteWaiting"
)

// QueueClientWIPStatusChange queues a StatusChange trigger unless the job
// has one from the same source (spPrimeflowQueueClientWIPStatusChange).
func (s *Store) QueueClientWIPStatusChange(ctx context.Context, jobID, source string) (bool, error) {
	id, err := parseGUID(jobID)
	if err != nil {
		return false, fmt.Errorf("mssql: queue client wip status change: %w", err)
	}
	if source == "" {
		return false, errors.New("mssql: queue client wip status change: no source")
	}
	var queued bool
	if err := s.q().QueryRowContext(ctx, procQueueClientWIPStatusChange,
		sql.Named("JobId", id), sql.Named("Source", source)).Scan(&queued); err != nil {
		return false, fmt.Errorf("mssql: queue client wip status change: %w", err)
	}
	return queued, nil
}

// ListClientWIPTriggers lists a job's triggers (spPrimeflowListClientWIPTriggers).
func (s *Store) ListClientWIPTriggers(ctx context.Context, jobID string) ([]store.ClientWIPTrigger, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list client wip triggers", procListClientWIPTriggers, func(sc sqlrows.Scanner) (store.ClientWIPTrigger, error) {
		var t store.ClientWIPTrigger
		err := sc.Scan(&t.ID, scanGUID{&t.JobID}, &t.TriggerType, &t.Source, scanTime{&t.QueuedUTC}, scanTime{&t.ProcessedUTC})
		return t, err
	}, sql.Named("JobId", id))
}

// QueueTriageInvite queues an invite when the mirrored status is the
// Initial-Contact-Made status and the job has no open invite, after closing
// one whose status the job has left (spPrimeflowQueueTriageInvite, 061).
func (s *Store) QueueTriageInvite(ctx context.Context, jobID, initialContactMadeStatusID string) (bool, error) {
	if initialContactMadeStatusID == "" {
		return false, nil
	}
	id, err := parseGUID(jobID)
	if err != nil {
		return false, fmt.Errorf("mssql: queue triage invite: %w", err)
	}
	status, err := parseGUID(initialContactMadeStatusID)
	if err != nil {
		return false, fmt.Errorf("mssql: queue triage invite: status: %w", err)
	}
	var queued bool
	if err := s.q().QueryRowContext(ctx, procQueueTriageInvite,
		sql.Named("JobId", id), sql.Named("InitialContactMadeStatusId", status)).Scan(&queued); err != nil {
		return false, fmt.Errorf("mssql: queue triage invite: %w", err)
	}
	return queued, nil
}

// ListTriageInvites lists a job's invites (spPrimeflowListTriageInvites).
func (s *Store) ListTriageInvites(ctx context.Context, jobID string) ([]store.TriageInvite, error) {
	id, ok := jobGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list triage invites", procListTriageInvites, scanInvite, sql.Named("JobId", id))
}
