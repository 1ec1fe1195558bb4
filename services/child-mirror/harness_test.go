package childmirror_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/nats-io/nats.go/jetstream"
)

// env is the pipeline from the log to the child mirror, for real: embedded
// NATS, SQLite, the Prime simulator over HTTP, the resolver, job-mirror
// (the ensure-job micro service and first sight) and child-mirror, all on
// one store that records its writes and fails the steps a test asks it to.
type env struct {
	*flowtest.Env
	store  *recordingStore
	nudges *nudgeServer
	deps   service.Deps // the services' Deps, on the recording store
}

type options struct {
	cfg func(*childmirror.Config)
	// nudgeStatus is what the AI summary generator answers (default 200).
	nudgeStatus int
	// noNudge leaves AI_SUMMARY_NUDGE_URL blank.
	noNudge bool
	// noJobMirror starts without job-mirror (startJobMirror starts it).
	noJobMirror bool
	// prime adjusts the Prime client's configuration.
	prime func(*prime.Config)
}

func start(t *testing.T, o options) *env {
	t.Helper()
	e := &env{Env: flowtest.New(t, flowtest.Options{PrimeConfig: o.prime})}
	e.store = &recordingStore{Store: e.Env.Store, shared: &shared{}}
	d := e.Deps
	d.Store = e.store
	e.deps = d

	rc := resolver.DefaultConfig()
	rc.Lanes, rc.LaneWait, rc.Backoff = 8, 20*time.Second, retry.Backoff{10 * time.Millisecond}
	r, err := resolver.New(rc, d, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("resolver", r)

	e.nudges = &nudgeServer{status: o.nudgeStatus}
	srv := httptest.NewServer(e.nudges)
	t.Cleanup(srv.Close)
	cfg := childmirror.DefaultConfig()
	cfg.Workers, cfg.EnsureTimeout, cfg.ContactSyncTimeout, cfg.AISummaryNudgeTimeout = 4, 10*time.Second, 10*time.Second, 5*time.Second
	cfg.AISummaryNudgeURL = srv.URL + "/webhook/ai-summary?key=s3cret-nudge-key"
	if o.noNudge {
		cfg.AISummaryNudgeURL = ""
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	cm, err := childmirror.New(cfg, d, e.Prime)
	if err != nil {
		t.Fatal(err)
	}
	e.Run("child-mirror", cm)
	flowtest.Eventually(e.T, "child-mirror's sweep micro service", func() bool {
		_, err := e.NC.Request("$SRV.PING."+childmirror.ServiceName, nil, time.Second)
		return err == nil
	})
	if !o.noJobMirror {
		e.startJobMirror()
	}
	return e
}

// startJobMirror starts job-mirror and waits for its ensure-job micro
// service to answer.
func (e *env) startJobMirror() {
	e.T.Helper()
	cfg := jobmirror.DefaultConfig()
	cfg.Workers, cfg.EnsureTimeout = 4, 5*time.Second
	cfg.JobsSweepEvery = jobmirror.SweepOff // no jobs-by-date sweep behind the test's back
	jm, err := jobmirror.New(cfg, e.deps, e.Prime, jobmirror.LogInvites{Log: e.deps.Log})
	if err != nil {
		e.T.Fatal(err)
	}
	e.Run("job-mirror", jm)
	flowtest.Eventually(e.T, "job-mirror's ensure-job micro service", func() bool {
		_, err := e.NC.Request("$SRV.PING."+jobmirror.ServiceName, nil, time.Second)
		return err == nil
	})
}

// recordingStore records, in order, the mirror writes every service makes
// ("job:<id>", "appointment:<id>" …), and fails the steps a test asks, in
// transactions too.
type recordingStore struct {
	store.Store
	*shared
}

// shared is what a recordingStore shares with the transactions it opens.
type shared struct {
	mu   sync.Mutex
	list []string

	failSummary  atomic.Bool // QueueJobSummaryNow fails
	failMakesafe atomic.Bool // writing a makesafe.detect hand-off fails
}

func (s *shared) record(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, what)
}

// writes is what was written so far, in order.
func (s *shared) writes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.list)
}

func (s *recordingStore) InTx(ctx context.Context, fn func(store.Store) error) error {
	return s.Store.InTx(ctx, func(tx store.Store) error {
		return fn(&recordingStore{Store: tx, shared: s.shared})
	})
}

// ClaimSyncQueue records a backstop pass's claims ("claim:<object>").
func (s *recordingStore) ClaimSyncQueue(ctx context.Context, f store.SyncQueueFilter, staleBefore time.Time) ([]store.SyncQueueItem, error) {
	items, err := s.Store.ClaimSyncQueue(ctx, f, staleBefore)
	if err == nil && f.JobID == "" {
		s.record("claim:" + f.Object)
	}
	return items, err
}

// waitFirstPasses waits for the backstop pass each drain makes at start,
// so that a test's items are no pass's but its own.
func (e *env) waitFirstPasses() {
	e.T.Helper()
	for _, o := range store.MissingObjects() {
		flowtest.Eventually(e.T, "the first backstop pass of "+o, func() bool { return e.store.count("claim:"+o) > 0 })
	}
}

func (s *recordingStore) UpsertJob(ctx context.Context, j store.Job) (bool, error) {
	created, err := s.Store.UpsertJob(ctx, j)
	if err == nil {
		s.record("job:" + strings.ToLower(j.JobID))
	}
	return created, err
}

func (s *recordingStore) SaveAppointment(ctx context.Context, a store.Appointment) (bool, error) {
	saved, err := s.Store.SaveAppointment(ctx, a)
	if err == nil {
		s.record("appointment:" + a.AppointmentID)
	}
	return saved, err
}

func (s *recordingStore) SaveContact(ctx context.Context, c store.Contact) error {
	err := s.Store.SaveContact(ctx, c)
	if err == nil {
		s.record("contact:" + c.ContactID)
	}
	return err
}

func (s *recordingStore) SaveAllocation(ctx context.Context, a store.Allocation) (bool, error) {
	saved, err := s.Store.SaveAllocation(ctx, a)
	if err == nil {
		s.record("allocation:" + a.AllocationID)
	}
	return saved, err
}

func (s *recordingStore) ReplaceJobSiteForms(ctx context.Context, jobID, objectType string, forms []store.SiteForm) error {
	err := s.Store.ReplaceJobSiteForms(ctx, jobID, objectType, forms)
	if err == nil {
		s.record("siteforms:" + jobID)
	}
	return err
}

func (s *recordingStore) ReplaceJobEstimates(ctx context.Context, jobID string, es []store.Estimate) error {
	err := s.Store.ReplaceJobEstimates(ctx, jobID, es)
	if err == nil {
		s.record("estimates:" + jobID)
	}
	return err
}

func (s *recordingStore) QueueJobSummaryNow(ctx context.Context, jobID string) error {
	if s.failSummary.Load() {
		return errors.New("injected: the AI summary queue is unavailable")
	}
	return s.Store.QueueJobSummaryNow(ctx, jobID)
}

func (s *recordingStore) InsertOutbox(ctx context.Context, msgs []store.OutboxMessage) ([]store.OutboxMessage, error) {
	for _, m := range msgs {
		if m.Subject == events.SubjectMakesafeDetect && s.failMakesafe.Load() {
			return nil, errors.New("injected: the outbox is unavailable")
		}
	}
	return s.Store.InsertOutbox(ctx, msgs)
}

// nudgeServer plays the AI summary generator's trigger.
type nudgeServer struct {
	status int
	mu     sync.Mutex
	jobs   []string
	keys   []string
}

func (n *nudgeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	n.jobs = append(n.jobs, r.URL.Query().Get("jobId"))
	n.keys = append(n.keys, r.URL.Query().Get("key"))
	n.mu.Unlock()
	if n.status != 0 {
		w.WriteHeader(n.status)
	}
}

func (n *nudgeServer) received() (jobs, keys []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.jobs), slices.Clone(n.keys)
}

// messages returns the bodies of the messages on a subject of a stream.
func (e *env) messages(stream, subject string) [][]byte {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := e.JS.Stream(ctx, stream)
	if err != nil {
		e.T.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.T.Fatalf("stream %s info: %v", stream, err)
	}
	n := int(info.State.Subjects[subject])
	if n == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		e.T.Fatalf("consumer on %s: %v", subject, err)
	}
	var out [][]byte
	for len(out) < n {
		batch, err := cons.Fetch(n-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			e.T.Fatalf("fetch %s: %v", subject, err)
		}
		for m := range batch.Messages() {
			out = append(out, m.Data())
		}
		if batch.Error() != nil {
			e.T.Fatalf("fetch %s: %v", subject, batch.Error())
		}
	}
	return out
}

// firstSeen counts the new-job pipeline's hand-offs for a job.
func (e *env) firstSeen(jobID string) int {
	n := 0
	for _, b := range e.messages(events.StreamJob, events.SubjectJobFirstSeen) {
		var m events.JobFirstSeen
		if json.Unmarshal(b, &m) == nil && m.JobID == jobID {
			n++
		}
	}
	return n
}

// makesafeDetects returns the detection requests for a job.
func (e *env) makesafeDetects(jobID string) []events.MakesafeDetect {
	var out []events.MakesafeDetect
	for _, b := range e.messages(events.StreamMakesafeDetect, events.SubjectMakesafeDetect) {
		var m events.MakesafeDetect
		if json.Unmarshal(b, &m) == nil && m.JobID == jobID {
			out = append(out, m)
		}
	}
	return out
}

// createRequests counts optimo.create.requested messages.
func (e *env) createRequests() int {
	return len(e.messages(events.StreamOptimo, events.SubjectOptimoCreate))
}

// replay queues a processed row again and republishes it, as
// `primectl replay` and ingest's relay do, and waits for it to be processed.
func (e *env) replay(id int64) store.WebhookLogRow {
	e.T.Helper()
	ctx := context.Background()
	n, err := e.Env.Store.ResetWebhookLog(ctx, store.LogFilter{IDs: []int64{id}})
	if err != nil || n != 1 {
		e.T.Fatalf("reset row %d: %d, %v", id, n, err)
	}
	row := e.Row(id)
	if _, err := e.JS.PublishMsg(ctx, events.NewWebhookMsg(id, row.ReplayCount, row.EventAction, row.Payload)); err != nil {
		e.T.Fatalf("republish row %d: %v", id, err)
	}
	return e.WaitProcessed(id)
}
