package mssql

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// The resolutions' methods call 082_resolutions.sql's procedures as they
// are declared, every one of them; Resolve names each table a person
// resolves rows of, which the procedure's branches take.
func TestResolutionCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	for _, r := range []store.Resolution{
		{Table: store.ResolvableSMS, RowID: 7, Action: store.ResolveRequeue, By: "alice@ops-1"},
		{Table: store.ResolvableTriageInvite, RowID: 8, Action: store.ResolveDismiss, By: "alice@ops-1", Reason: "invited by phone",
			ResolvedUTC: time.Now()},
		{Table: store.ResolvableEmailReceipt, RowID: 9, Action: store.ResolveDismiss, By: "alice@ops-1", Reason: "junk"},
	} {
		_, err := s.Resolve(ctx, r)
		try(err)
	}
	_, err := s.ListResolutions(ctx, store.ResolvableSMS, []int64{7, 8})
	try(err)
	_, err = s.ListSMSQueue(ctx, store.InvitesFailed, 0)
	try(err)
	_, err = s.ListEmailReceipts(ctx, store.InvitesPending, 20)
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}
	is.Equal(checkCalls(t, rec, scriptModules(t, "082_resolutions.sql"), fits, nil), 4) // the script's procedures, each called
}

// Nothing reaches the database for a resolution no table takes, or a list
// of no rows.
func TestResolveRefusesWhatNoTableTakes(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	for _, r := range []store.Resolution{
		{Table: store.ResolvableSMS, RowID: 7, Action: store.ResolveDismiss, By: "alice"},                                    // no reason
		{Table: store.ResolvableEmailReceipt, RowID: 7, Action: store.ResolveRequeue, By: "alice"},                           // an email is moved back, not requeued
		{Table: "primeJobs", RowID: 7, Action: store.ResolveRequeue, By: "alice"},                                            // no such table
		{Table: store.ResolvableSMS, RowID: 0, Action: store.ResolveRequeue, By: "alice"},                                    // no row
		{Table: store.ResolvableSMS, RowID: 7, Action: store.ResolveRequeue},                                                 // no one
		{Table: store.ResolvableSMS, RowID: 7, Action: "Fixed", By: "alice"},                                                 // no such action
		{Table: store.ResolvableSMS, RowID: 7, Action: store.ResolveDismiss, By: "alice", Reason: string(make([]byte, 501))}, // too long to keep whole
	} {
		_, err := s.Resolve(ctx, r)
		is.True(err != nil && !errors.Is(err, errRecorded)) // refused here
	}
	recs, err := s.ListResolutions(ctx, store.ResolvableSMS, nil)
	is.NoErr(err)
	is.Equal(len(recs), 0)
	_, err = s.ListResolutions(ctx, store.ResolvableSMS, make([]int64, store.MaxArchiveBatch+1))
	is.True(err != nil && !errors.Is(err, errRecorded))
	is.Equal(len(rec.take()), 0) // none of it reached the database
}

// The resolutions' methods, driven over the wire with TestEveryCallIsWellFormedOnTheWire's others.
func init() {
	for name, drive := range map[string]wireDrive{
		"Resolve": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.Resolve(ctx, store.Resolution{Table: store.ResolvableSMS, RowID: 7, Action: store.ResolveRequeue,
				By: "alice@ops-1", Reason: opt(full, "the gateway is fixed"), ResolvedUTC: opt(full, wireTime)})
			return err
		},
		"ListResolutions": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListResolutions(ctx, store.ResolvableTriageInvite, []int64{7, 8})
			return err
		},
		"ListSMSQueue": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListSMSQueue(ctx, store.InvitesPending, opt(full, 10))
			return err
		},
		"ListEmailReceipts": func(ctx context.Context, s *Store, full bool) error {
			_, err := s.ListEmailReceipts(ctx, store.InvitesFailed, opt(full, 10))
			return err
		},
	} {
		wireDrives[name] = drive
	}
}
