package outbox_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

// rerun runs a transaction's function twice, as a group commit does when
// the group it shared fails: once in a transaction rolled back, then in one
// of its own that commits.
type rerun struct{ store.Store }

func (r rerun) InTx(ctx context.Context, fn func(store.Store) error) error {
	errGroup := errors.New("another transaction of the group failed")
	if err := r.Store.InTx(ctx, func(tx store.Store) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errGroup
	}); !errors.Is(err, errGroup) {
		return err
	}
	return r.Store.InTx(ctx, fn)
}

// shutdownAtCommit cancels the caller's context as its transaction commits:
// the process stopping right then.
type shutdownAtCommit struct {
	store.Store
	cancel context.CancelFunc
}

func (s shutdownAtCommit) InTx(ctx context.Context, fn func(store.Store) error) error {
	defer s.cancel()
	return s.Store.InTx(ctx, fn)
}

func TestInTxPublishesWhatTheCommitHandsOn(t *testing.T) {
	ctx := context.Background()
	_, js := natstest.Connect(t, natstest.Server(t))
	r := newSweepRig(t, js, 200)
	published := func(t *testing.T) uint64 {
		t.Helper()
		s, err := js.Stream(ctx, events.StreamJob)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	hand := func(msgs ...store.OutboxMessage) func(tx store.Store) error {
		return func(tx store.Store) error {
			_, err := tx.InsertOutbox(ctx, msgs)
			return err
		}
	}

	t.Run("published after the commit", func(t *testing.T) {
		is := is.New(t)
		sent, err := r.pub.InTx(ctx, r.store, "test hand-off", hand(firstSeen("a")))
		is.NoErr(err)
		is.Equal(len(sent), 1)            // handed on
		is.Equal(published(t), uint64(1)) // published
		is.Equal(len(r.unpublished()), 0) // and recorded
	})
	t.Run("a run rolled back hands nothing on", func(t *testing.T) {
		is := is.New(t)
		sent, err := r.pub.InTx(ctx, rerun{r.store}, "test hand-off", hand(firstSeen("b")))
		is.NoErr(err)
		is.Equal(len(sent), 1) // the committed run's message only
		is.Equal(published(t), uint64(2))
		is.Equal(len(r.unpublished()), 0)
	})
	t.Run("a shutdown at the commit does not cut the publish short", func(t *testing.T) {
		is := is.New(t)
		sctx, cancel := context.WithCancel(ctx)
		sent, err := r.pub.InTx(sctx, shutdownAtCommit{r.store, cancel}, "test hand-off", hand(firstSeen("b2")))
		is.NoErr(err)
		is.Equal(len(sent), 1)
		is.Equal(published(t), uint64(3)) // published all the same
		is.Equal(len(r.unpublished()), 0) // and recorded
	})
	t.Run("a failed transaction publishes nothing", func(t *testing.T) {
		is := is.New(t)
		boom := errors.New("locked")
		sent, err := r.pub.InTx(ctx, r.store, "test hand-off", func(tx store.Store) error {
			if err := hand(firstSeen("c"))(tx); err != nil {
				return err
			}
			return boom
		})
		is.True(errors.Is(err, boom)) // the transaction's error
		is.Equal(len(sent), 0)        // nothing handed on
		is.Equal(published(t), uint64(3))
		is.Equal(len(r.unpublished()), 0)
	})
	t.Run("a failed publish is left to the sweeper, said once", func(t *testing.T) {
		is := is.New(t)
		r.logs.Reset()
		// No stream takes the subjects.
		sent, err := r.pub.With("jobId", "j1").InTx(ctx, r.store, "test hand-off", hand(
			outbox.Message("nostream.one", "d", []byte(`{}`)), outbox.Message("nostream.two", "e", []byte(`{}`))))
		is.NoErr(err)                                                                                           // committed: the hand-off is durable
		is.Equal(len(sent), 2)                                                                                  // both handed on
		is.Equal(len(r.unpublished()), 2)                                                                       // both wait for the sweeper
		is.Equal(strings.Count(r.logs.String(), "test hand-off not published yet; the outbox sweeper will"), 1) // said once
		is.True(strings.Contains(r.logs.String(), "jobId=j1"))                                                  // with the hand-off's context
	})
}
