package mssql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// The archive's methods call 080_archive.sql's procedures as they are
// declared, every one of them; the delete names each table the archive
// holds, which the procedure's branches take.
func TestArchiveCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	before := time.Now().Add(-365 * 24 * time.Hour)
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.CountArchivable(ctx, before)
	try(err)
	_, err = s.ListArchivableWebhookLog(ctx, before, 0, 500)
	try(err)
	_, err = s.ListArchivableSMS(ctx, before, 10, 0)
	try(err)
	_, err = s.ListArchivableTriageInvites(ctx, before, 10, store.MaxArchiveBatch+1)
	try(err)
	_, err = s.ListArchivableEmailReceipts(ctx, before, 10, 100)
	try(err)
	for _, table := range store.ArchiveTables() {
		_, err = s.DeleteArchived(ctx, table, before, []int64{1, 2, 3})
		try(err)
	}
	_, err = s.RestoreWebhookLog(ctx, []store.WebhookLogRow{{ID: 7, ReceivedUTC: before, EventAction: "change-job-status",
		JobID: "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10", Payload: "{}", Headers: "{}", IsAuthenticated: true,
		ProcessedUTC: before, ProcessStatus: "Processed", PublishedUTC: before, ReplayCount: 1}})
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}
	is.Equal(checkCalls(t, rec, scriptModules(t, "080_archive.sql"), fits, nil), 7) // the script's procedures, each called
}

// Nothing reaches the database for a call that can do nothing, or one
// larger than a batch may be.
func TestArchiveRefusesWhatNoBatchHolds(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	n, err := s.DeleteArchived(ctx, store.ArchiveSMS, time.Now(), nil)
	is.NoErr(err)
	is.Equal(n, 0) // no ids, nothing deleted
	_, err = s.DeleteArchived(ctx, store.ArchiveSMS, time.Now(), make([]int64, store.MaxArchiveBatch+1))
	is.True(err != nil && !errors.Is(err, errRecorded)) // more than a batch is refused here
	_, err = s.RestoreWebhookLog(ctx, make([]store.WebhookLogRow, store.MaxArchiveBatch+1))
	is.True(err != nil && !errors.Is(err, errRecorded))
	_, err = s.RestoreWebhookLog(ctx, []store.WebhookLogRow{{ID: 1, JobID: "259047", Payload: "{}"}})
	is.True(err != nil && !errors.Is(err, errRecorded)) // a jobId that is not a GUID
	is.Equal(len(rec.take()), 0)                        // none of it reached the database
}

// The archive's methods, driven over the wire with TestEveryCallIsWellFormedOnTheWire's others.
func init() {
	for name, drive := range map[string]wireDrive{
		"CountArchivable": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.CountArchivable(ctx, wireTime)
			return err
		},
		"ListArchivableWebhookLog": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListArchivableWebhookLog(ctx, wireTime, opt(full, int64(7)), opt(full, 10))
			return err
		},
		"ListArchivableSMS": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListArchivableSMS(ctx, wireTime, opt(full, int64(7)), opt(full, 10))
			return err
		},
		"ListArchivableTriageInvites": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListArchivableTriageInvites(ctx, wireTime, opt(full, int64(7)), opt(full, 10))
			return err
		},
		"ListArchivableEmailReceipts": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListArchivableEmailReceipts(ctx, wireTime, opt(full, int64(7)), opt(full, 10))
			return err
		},
		"DeleteArchived": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.DeleteArchived(ctx, store.ArchiveWebhookLog, wireTime, []int64{1, 2})
			return err
		},
		"RestoreWebhookLog": func(ctx context.Context, s *Store, full bool) error {
			row := filled(full, store.WebhookLogRow{ID: 1, ReceivedUTC: wireTime, Payload: "{}"}, map[string]any{"JobID": wireJob})
			_, err := s.RestoreWebhookLog(ctx, []store.WebhookLogRow{row})
			return err
		},
	} {
		wireDrives[name] = drive
	}
}
