// Package chaos proves the pipeline under faults (`make chaos`, and a short
// profile in `make test`): the real binaries as separate processes — a
// standalone nats-server (one node, or a 3-node JetStream cluster with R3
// streams), the eight services on one SQLite file (nine in the mail
// scenario, with mail-intake) — against the Prime, OptimoRoute and Graph
// simulators and an SMS gateway, served by the harness and answering
// slowly, so that kills land mid-call.
//
// A scenario runs in three phases:
//
//  1. Faults, while Prime's webhooks arrive: every couple of seconds a random
//     process of a random kind (a service or a NATS node) gets kill -9 and is
//     started again a moment later, as a supervisor would; the database is
//     held locked for a while (and services are restarted into the lock);
//     Prime answers 5xx and then 429 for a while, and OptimoRoute fails
//     calls. The webhooks are a realistic mix (a job's status, its
//     appointment, allocations — a Make Safe for jobs created after hours —,
//     a site form, an estimate, a reschedule, a second status change), sent
//     the way Prime sends them: again and again until one is answered 2xx.
//     In the mail scenario, Prime's new-job emails (and some mail that is
//     not Prime's) arrive meanwhile, while Prime and Graph go down
//     (mail.go); in the outage scenario, Prime is down (503, then no
//     answer) for far longer than an event takes to use its attempts.
//  2. Settling: every process up, no faults, until the invariants hold or
//     the settle budget runs out.
//  3. Checking (check.go): every accepted webhook stored and processed; the
//     new-job pipeline once a job; one phone call a make-safe job created
//     after hours, and its SMS; one order an appointment, at its current
//     date; every date planned after its last order write; no capped rows;
//     no process exited on its own; and in the mail scenario, no email in
//     the failed folder that had a JobID Prime knows, and every such job
//     mirrored; in the outage scenario, no row that counted an attempt.
//
// Each scenario ends with a summary line (Summary.String).
package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Scenario is one run of the harness.
type Scenario struct {
	Name string
	// NATSNodes is 1 (a single server) or 3 (a cluster whose streams have
	// three replicas, NATS_STREAM_REPLICAS=3).
	NATSNodes int
	// Kills is how many kill -9 the fault phase deals; one comes every
	// KillEvery (a random time between the two).
	Kills     int
	KillEvery [2]time.Duration
	// Jobs is how many Prime jobs the webhooks are about (about six
	// webhooks a job).
	Jobs int
	// DBLock is how long the database is held locked, once, a third of the
	// way through the fault phase; zero does not lock it.
	DBLock time.Duration
	// Storms are Prime's 5xx and 429 storms and OptimoRoute's errors.
	Storms bool
	// Mail runs mail-intake too, and Prime's new-job emails arrive in the
	// Graph simulator's mailbox while Prime and Graph fail (mail.go).
	Mail bool
	// PrimeOutage is how long Prime is down, twice over, from a tenth of
	// the way through the fault phase: answering 503 to every call (the
	// token's too), then dropping every connection unanswered. The
	// resolver's backoff is then RESOLVER_BACKOFF=outageLadder, so that
	// each is far longer than an event takes to fail its 5 attempts; and
	// beside the other invariants, no row may have counted an attempt
	// (Prime's outage is a wait, docs/architecture.md). Zero: no outage.
	PrimeOutage time.Duration
	// Settle bounds the wait for the invariants once the faults stop.
	Settle time.Duration
}

// Full is `make chaos`: a single node and a 3-node cluster, about 100 kills
// each; the mail intake's scenario and the Prime outage's, on a single
// node.
func Full() []Scenario {
	s := Scenario{Kills: 100, KillEvery: [2]time.Duration{1500 * time.Millisecond, 3500 * time.Millisecond},
		Jobs: 30, DBLock: 30 * time.Second, Storms: true, Settle: 5 * time.Minute}
	single, cluster := s, s
	single.Name, single.NATSNodes = "single", 1
	cluster.Name, cluster.NATSNodes = "cluster", 3
	return []Scenario{single, cluster, Mail(), Outage()}
}

// Outage is the scenario of a Prime outage longer than the backoff ladder:
// 20 kills while 12 jobs' webhooks arrive, nearly all of them while Prime
// answers 503 to every call for 40 s and then answers none for 40 s more
// (PrimeOutage); it caps no row, and no row counts an attempt.
func Outage() Scenario {
	return Scenario{Name: "outage", NATSNodes: 1, Kills: 20, KillEvery: [2]time.Duration{1500 * time.Millisecond, 3500 * time.Millisecond},
		Jobs: 12, PrimeOutage: 40 * time.Second, Settle: 4 * time.Minute}
}

// outageLadder is RESOLVER_BACKOFF in a scenario with a PrimeOutage: an
// event that kept failing would be capped 10 s after its first attempt.
const outageLadder = "1s,2s,3s,4s"

// Mail is the mail intake's scenario: about 40 kills (mail-intake among
// the services), a database lock, and Prime's and Graph's outages — Prime
// answering 5xx to every call for 20 s, then not answering, then 429;
// Graph not answering, failing every move, throttling, and the processed
// folder deleted and made again — while new-job emails arrive (mail.go).
func Mail() Scenario {
	return Scenario{Name: "mail", NATSNodes: 1, Kills: 40, KillEvery: [2]time.Duration{1500 * time.Millisecond, 3500 * time.Millisecond},
		Jobs: 10, DBLock: 15 * time.Second, Mail: true, Settle: 5 * time.Minute}
}

// Short is the profile `make test` runs: one scenario (the cluster, whose
// failovers find the most), a few kills, a short lock and every storm.
func Short() []Scenario {
	return []Scenario{{Name: "cluster-short", NATSNodes: 3, Kills: 6,
		KillEvery: [2]time.Duration{2 * time.Second, 4 * time.Second}, Jobs: 6,
		DBLock: 12 * time.Second, Storms: true, Settle: 3 * time.Minute}}
}

// Options say where the binaries are and where the run keeps its data.
type Options struct {
	// Bin holds the services' binaries and primectl (make build's bin/).
	Bin string
	// NATSServer is the nats-server binary.
	NATSServer string
	// Dir is where each scenario keeps its database, JetStream stores and
	// one log a process (Dir/<scenario>/).
	Dir string
	// Log receives the progress lines.
	Log io.Writer
	// Seed makes the choice of faults repeatable (the processes' timing is
	// not); zero picks one, which the first progress line gives.
	Seed uint64
}

// Summary is what a scenario found.
type Summary struct {
	Scenario string
	Seed     uint64
	// Kills is the kill -9 dealt, by process kind in ByKind.
	Kills  int
	ByKind map[string]int
	// Webhooks is how many webhooks Prime had accepted; Posts how many
	// posts that took (a retry after a lost answer or an error is a post).
	Webhooks, Posts int
	// Lost are accepted webhooks whose row is missing; Duplicated are
	// effects done twice (a pipeline run, a phone call, an SMS, an order);
	// Unprocessed are rows not processed at the end, Capped those of them
	// at the attempt cap.
	Lost, Duplicated, Unprocessed, Capped int
	// Exits are processes that exited on their own.
	Exits int
	// Emails is how many new-job emails arrived in the mailbox (the mail
	// scenario); FailedKnown how many of those with a JobID Prime knows,
	// from Prime's sender, ended in the failed folder.
	Emails, FailedKnown int
	// Resent are posts the SMS gateway or the triage invite endpoint
	// received more than once under the same Idempotency-Key: at-least-once
	// delivery, not a duplicate (docs/architecture.md, "What happens exactly once").
	Resent int
	// Violations say which invariant failed and how; none is a pass.
	Violations []string
	Elapsed    time.Duration
	// Dir holds the scenario's logs.
	Dir string
}

// String is the summary line.
func (s Summary) String() string {
	verdict := "PASS"
	if len(s.Violations) > 0 {
		verdict = fmt.Sprintf("FAIL (%d violations)", len(s.Violations))
	}
	mail := ""
	if s.Emails > 0 {
		mail = fmt.Sprintf(" emails=%d failed-known=%d", s.Emails, s.FailedKnown)
	}
	return fmt.Sprintf("chaos %s: kills=%d webhooks=%d posts=%d lost=%d duplicated=%d unprocessed=%d capped=%d exits=%d resent=%d%s elapsed=%s seed=%d: %s",
		s.Scenario, s.Kills, s.Webhooks, s.Posts, s.Lost, s.Duplicated, s.Unprocessed, s.Capped, s.Exits, s.Resent, mail,
		s.Elapsed.Round(time.Second), s.Seed, verdict)
}

// Run runs the scenarios one after the other and returns their summaries.
// An error is the harness failing (a binary missing, a port refused), not
// an invariant: those are in the summaries.
func Run(ctx context.Context, opts Options, scenarios []Scenario) ([]Summary, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Seed == 0 {
		opts.Seed = rand.Uint64()
	}
	var out []Summary
	for i, sc := range scenarios {
		dir := filepath.Join(opts.Dir, sc.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return out, err
		}
		s, err := runScenario(ctx, opts, sc, dir, opts.Seed+uint64(i))
		if err != nil {
			return out, fmt.Errorf("chaos %s: %w", sc.Name, err)
		}
		fmt.Fprintln(opts.Log, s.String())
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(s.ByKind)) {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, s.ByKind[k]))
		}
		fmt.Fprintf(opts.Log, "  kills by kind: %s\n", strings.Join(kinds, ", "))
		for _, v := range s.Violations {
			fmt.Fprintln(opts.Log, "  violation:", v)
		}
		out = append(out, s)
	}
	return out, nil
}

func runScenario(ctx context.Context, opts Options, sc Scenario, dir string, seed uint64) (Summary, error) {
	start := time.Now()
	rng := rand.New(rand.NewPCG(seed, seed^0x5deece66d))
	logf := func(format string, args ...any) {
		fmt.Fprintf(opts.Log, "%s %s: %s\n", time.Now().Format("15:04:05.000"), sc.Name, fmt.Sprintf(format, args...))
	}
	logf("seed %d, logs in %s", seed, dir)

	ext, err := startExternals(dir, seed)
	if err != nil {
		return Summary{}, err
	}
	defer ext.close()
	st, err := startStack(ctx, opts, sc, dir, ext, logf)
	if err != nil {
		return Summary{}, err
	}
	defer st.stop(logf)

	pr := newPrime(ext, st.webhookURL(), st.webhookKey)
	phase := time.Duration(sc.Kills) * (sc.KillEvery[0] + sc.KillEvery[1]) / 2
	w := newWorkload(pr, rng, sc.Jobs)
	mw := newMailWorkload(ext, w, rng, sc.Mail)
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		var both sync.WaitGroup
		both.Go(func() { w.run(ctx, phase*7/10, logf) })
		both.Go(func() { mw.run(ctx, phase*8/10, logf) })
		both.Wait()
	}()
	f := &faults{st: st, ext: ext, mail: mw, rng: rng, logf: logf, byKind: map[string]int{}}
	f.run(ctx, sc, phase)
	<-workDone
	logf("faults over: %d kills; %d webhooks accepted in %d posts; settling", f.kills, pr.acceptedCount(), pr.postCount())
	if err := st.upAll(ctx, logf); err != nil {
		return Summary{}, err
	}
	ext.calm()

	s := Summary{Scenario: sc.Name, Seed: seed, Kills: f.kills, ByKind: f.byKind, Dir: dir}
	deadline := time.Now().Add(sc.Settle)
	var r report
	for {
		r, err = check(ctx, st, ext, pr, w, mw)
		if err != nil {
			return s, err
		}
		if r.settled() || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	logf("settled: %s", strings.Join(r.waitingFor(), "; "))
	r.exits = st.exits()
	s.Webhooks, s.Posts = pr.acceptedCount(), pr.postCount()
	s.Lost, s.Duplicated, s.Unprocessed, s.Capped = r.lost, r.duplicated, r.unprocessed, r.capped
	s.Exits, s.Resent = len(r.exits), r.resent
	s.Emails, s.FailedKnown = len(mw.sent()), len(r.mailFailedKnown)
	r.noAttempts = sc.PrimeOutage > 0
	s.Violations = r.violations()
	s.Elapsed = time.Since(start)
	return s, nil
}
