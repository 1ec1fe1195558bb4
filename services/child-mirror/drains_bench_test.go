package childmirror_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkDrainAfterAQueueInsert measures the drains pushed by a queue
// insert: from the commit of the transaction that queues a job's four
// objects and hands them on through the outbox (as the new-job pipeline's
// does) to the last of the four items removed, each object fetched from the
// Prime simulator over HTTP and mirrored. The job has one contact (so one
// relationship), one status history and one allocation. The Prime client's
// pacing is lifted (flowtest): the figure is the drains', not Prime's
// budget's. The baseline, measured in the same run, is the hand-off alone:
// the commit to a plain consumer of prime.job.syncqueued getting the
// message. It also reports Prime calls per drained item (the contacts drain
// makes two for one contact, the relationships then the contact, and its
// fetch of the relationships serves the relationships drain: four a job).
func BenchmarkDrainAfterAQueueInsert(b *testing.B) {
	env := flowtest.New(b, flowtest.Options{})
	cfg := childmirror.DefaultConfig()
	drainConfig()(&cfg)
	cm, err := childmirror.New(cfg, env.Deps, env.Prime)
	if err != nil {
		b.Fatal(err)
	}
	env.Run("child-mirror", cm)

	var mu sync.Mutex
	handedOn := map[string]time.Time{}
	baseline := env.Consumer(events.Consumer{Stream: events.StreamJob, Durable: "bench-baseline", Subjects: []string{events.SubjectSyncQueued}})
	env.Run("baseline consumer", runner(func(ctx context.Context) error {
		return consume.Run(ctx, env.JS, consume.Spec{Consumer: baseline}, env.Deps.Log, env.Deps.Metrics,
			func(_ context.Context, msg jetstream.Msg) error {
				var sq events.SyncQueued
				if json.Unmarshal(msg.Data(), &sq) == nil {
					mu.Lock()
					handedOn[sq.JobID] = time.Now()
					mu.Unlock()
				}
				return nil
			})
	}))
	pub := &outbox.Publisher{JS: env.JS, Store: env.Store, Log: env.Deps.Log}
	ctx := context.Background()
	const samples = 30
	var toDrained, toHandedOn []time.Duration
	before := env.Sim.Stats().Calls
	for range samples {
		j := env.Sim.NewJob()
		env.Sim.NewContact(j.ID)
		env.Sim.NewStatusHistory(j.ID, j.StatusID)
		env.Sim.NewAllocation(j.ID, "Plumbing")
		if _, err := env.Store.UpsertJob(ctx, store.Job{JobID: j.ID, JobNumber: j.JobNumber, StatusID: j.StatusID}); err != nil {
			b.Fatal(err)
		}
		body, err := json.Marshal(events.SyncQueued{JobID: j.ID, Objects: store.MissingObjects(), Source: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		var committed time.Time
		if _, err := pub.InTx(ctx, env.Store, "bench hand-off", func(tx store.Store) error {
			if _, err := tx.QueueMissingObjectsByJob(ctx, j.ID); err != nil {
				return err
			}
			_, err := tx.InsertOutbox(ctx, []store.OutboxMessage{outbox.Message(events.SubjectSyncQueued, events.SyncQueuedMsgID("bench", j.ID), body)})
			committed = time.Now() // the last statement before the commit: the commit itself is in the figure
			return err
		}); err != nil {
			b.Fatal(err)
		}
		flowtest.Poll(b, 20*time.Second, time.Millisecond, "the job's items drained", func() bool {
			items, err := env.Store.ListSyncQueue(ctx, store.SyncQueueFilter{JobID: j.ID})
			return err == nil && len(items) == 0
		})
		toDrained = append(toDrained, time.Since(committed))
		flowtest.Eventually(b, "the baseline consumer got the hand-off", func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := handedOn[j.ID]
			return ok
		})
		mu.Lock()
		toHandedOn = append(toHandedOn, handedOn[j.ID].Sub(committed))
		mu.Unlock()
	}
	calls := env.Sim.Stats().Calls - before
	flowtest.ReportLatencies(b, "insert-to-drained", toDrained)
	flowtest.ReportLatencies(b, "baseline-insert-to-handed-on", toHandedOn)
	b.ReportMetric(float64(flowtest.Quantile(toDrained, 0.5))/float64(flowtest.Quantile(toHandedOn, 0.5)), "p50-vs-baseline")
	b.ReportMetric(float64(calls)/float64(samples*len(store.MissingObjects())), "prime-calls-per-item")
}

type runner func(ctx context.Context) error

func (f runner) Run(ctx context.Context) error { return f(ctx) }
