package ensurejob_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

func TestReplyError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply events.EnsureJobReply
		check func(error) bool
	}{
		{"mirrored", events.EnsureJobReply{JobID: "x", WasMirrored: true}, func(err error) bool { return err == nil }},
		{"rate limited", events.EnsureJobReply{RetryAfterMS: 1500}, func(err error) bool {
			var limited *prime.RateLimitedError
			return errors.As(err, &limited) && limited.RetryAfter == 1500*time.Millisecond && errors.Is(err, prime.ErrRateLimited)
		}},
		{"not found", events.EnsureJobReply{NotFound: true}, func(err error) bool { return errors.Is(err, prime.ErrNotFound) }},
		{"failed", events.EnsureJobReply{Error: "database is locked"}, func(err error) bool {
			return err != nil && !errors.Is(err, prime.ErrNotFound) && !errors.Is(err, prime.ErrRateLimited)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.True(tc.check(ensurejob.ReplyError(tc.reply))) // the reply's kind of failure, as an error
		})
	}
}

func TestEnsureWithNoJobMirror(t *testing.T) {
	is := is.New(t)
	nc, _ := natstest.Connect(t, natstest.Server(t))
	_, err := ensurejob.Ensure(context.Background(), nc, events.EnsureJobRequest{JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"})
	is.True(errors.Is(err, nats.ErrNoResponders)) // nobody answers: an ordinary failure, not a rate limit
	_, err = ensurejob.Ensure(context.Background(), nc, events.EnsureJobRequest{})
	is.True(err != nil) // a request must name a job
}

func TestRow(t *testing.T) {
	is := is.New(t)
	j, err := prime.FromResource[prime.Job]("0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10",
		[]byte(`{"jobNumber":"J012345","statusId":"s","createdAt":"2025-02-07 04:14:33","version":4,"authorisedTotalIncludingTax":"700.80","address":{"suburb":"Carlton","postcode":"3053"},"extra":true}`))
	is.NoErr(err)
	r := ensurejob.Row(j)
	is.Equal(r.JobID, j.ID)
	is.Equal(r.JobNumber, "J012345")
	is.True(r.CreatedAt.Equal(time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC))) // Prime's time, read as UTC
	is.Equal(r.Version, int64(4))
	is.Equal(r.AuthorisedTotalIncludingTax, "700.80") // the decimal as text
	is.Equal(r.Suburb, "Carlton")                     // the address flattened into columns
	is.Equal(r.Postcode, "3053")
	is.True(r.IncidentDate.IsZero())      // a missing time is NULL
	is.Equal(r.Attributes, string(j.Raw)) // the raw attributes, unknown ones too
}
