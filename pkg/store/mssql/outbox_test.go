package mssql

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// The outbox and IdentifyGuid methods call their procedures with parameters
// that exist, of fitting types, leaving out none that is required, and every
// procedure of 003_outbox.sql and 004_identify.sql is called.
func TestOutboxAndIdentifyCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	const job = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.InsertOutbox(ctx, []store.OutboxMessage{
		{Subject: "prime.job.firstseen", MsgID: "firstseen:" + job, Data: []byte(`{}`)},
		{Subject: "makesafe.detect", MsgID: "m", Header: map[string]string{"Nats-Schedule": "@at 2026-11-30T00:00:00Z"}},
	})
	try(err)
	_, err = s.GetOutboxUnpublished(ctx, 0, time.Now(), 200)
	try(err)
	_, err = s.GetOutboxUnpublished(ctx, 7, time.Now(), 200)
	try(err)
	try(s.SetOutboxPublished(ctx, []int64{1, 2, 2}, time.Now()))
	_, err = s.PurgeOutbox(ctx, time.Now())
	try(err)
	_, err = s.IdentifyGuid(ctx, job, store.TableAppointments)
	try(err)
	_, err = s.IdentifyGuid(ctx, job, "")
	try(err)
	for _, err := range errs {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	is.Equal(checkCalls(t, rec, scriptModules(t, "003_outbox.sql", "004_identify.sql"), fits, nil), 5) // both scripts were found
}

// What InsertOutbox sends: the body as text, the headers as JSON and none as
// NULL, the subject and the Nats-Msg-Id as given.
func TestOutboxInsertArguments(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	var got []call
	// The recorder fails every statement, so each insert sends one message.
	for _, m := range []store.OutboxMessage{
		{Subject: "a", MsgID: "1", Data: []byte(`{"jobId":"x"}`)},
		{Subject: "b", MsgID: "2", Header: map[string]string{"Nats-Schedule": "@at 2026-11-30T00:00:00Z"}},
	} {
		_, err := s.InsertOutbox(ctx, []store.OutboxMessage{m})
		is.True(errors.Is(err, errRecorded)) // the insert reached the database
		got = append(got, calls(t, rec.take())...)
	}
	is.Equal(len(got), 2)                                                            // one call a message
	is.Equal(got[0].args["Data"], `{"jobId":"x"}`)                                   // the body as written
	is.Equal(got[0].args["Headers"], sql.NullString{})                               // no headers: NULL
	is.Equal(got[1].args["Headers"], `{"Nats-Schedule":"@at 2026-11-30T00:00:00Z"}`) // headers as JSON
	is.Equal(got[1].args["Data"], "")                                                // no body: empty, not NULL
	is.Equal(got[1].args["Subject"], "b")                                            // the subject
	is.Equal(got[1].args["MsgId"], "2")                                              // and the Nats-Msg-Id
}

// Calls that cannot change or find anything answer without a round trip.
func TestOutboxAndIdentifyNoCallForNothing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)

	msgs, err := s.InsertOutbox(ctx, nil)
	is.NoErr(err)
	is.Equal(len(msgs), 0) // nothing to insert
	got, err := s.GetOutboxUnpublished(ctx, 0, time.Now(), 0)
	is.NoErr(err)
	is.Equal(len(got), 0) // a limit of 0 returns nothing
	got, err = s.GetOutboxUnpublished(ctx, 7, time.Now(), 0)
	is.NoErr(err)
	is.Equal(len(got), 0)                                // from any id
	is.NoErr(s.SetOutboxPublished(ctx, nil, time.Now())) // no ids, nothing to stamp
	tables, err := s.IdentifyGuid(ctx, "2402073", store.TableJobs)
	is.NoErr(err)
	is.Equal(len(tables), 0) // a numeric reference is in no GUID table
	_, err = s.IdentifyGuid(ctx, "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", "jobs")
	is.True(err != nil && !errors.Is(err, errRecorded)) // an expected entity that is no mirror table is refused
	is.Equal(len(rec.take()), 0)                        // and none of this reached the database
}

// On SQL Server: headers and text round-trip, and a purge larger than the
// procedure's delete chunk deletes every published message and no other.
func TestOutboxOnServer(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, db := server(t)
	body := `{"note":"Müller — 屋根 🏠"}`
	msgs, err := s.InsertOutbox(ctx, []store.OutboxMessage{{Subject: "optimo.create.requested", MsgID: "k",
		Header: map[string]string{"A": "1", "B": "two"}, Data: []byte(body)}})
	is.NoErr(err)
	got, err := s.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(got), 1)
	is.Equal(string(got[0].Data), body)                              // text outside Latin-1 kept
	is.Equal(got[0].Header, map[string]string{"A": "1", "B": "two"}) // headers kept
	is.True(got[0].CreatedUTC.Equal(msgs[0].CreatedUTC))             // createdUTC as returned by the insert
	is.Equal(got[0].CreatedUTC.Location(), time.UTC)                 // read back as UTC

	const published = 9001 // more than two chunks of 4,000
	_, err = db.ExecContext(ctx, `INSERT INTO dbo.primeflowOutbox (subject, msgId, data, createdUTC, publishedUTC)
		SELECT TOP (@n) N's', CONCAT(N'm', ROW_NUMBER() OVER (ORDER BY (SELECT NULL))), N'{}',
		       DATEADD(HOUR, -3, SYSUTCDATETIME()), DATEADD(HOUR, -2, SYSUTCDATETIME())
		FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b`, sql.Named("n", published))
	is.NoErr(err)
	n, err := s.PurgeOutbox(ctx, time.Now().Add(-time.Hour))
	is.NoErr(err)
	is.Equal(n, published) // every chunk deleted and counted
	got, err = s.GetOutboxUnpublished(ctx, 0, time.Now().Add(time.Minute), 10)
	is.NoErr(err)
	is.Equal(len(got), 1) // the unpublished message stays
}
