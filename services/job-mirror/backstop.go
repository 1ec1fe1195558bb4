package jobmirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/micro"
)

// WatermarkJobsByDate names the backstop's watermark (primeflowSweepWatermark).
const WatermarkJobsByDate = "jobs-by-date"

// EndpointSweepJobs is the backstop's micro endpoint; its subject is
// events.SubjectSweepJobs.
const EndpointSweepJobs = "sweep-jobs"

// sourceRequest is the source of a sweep asked for on the endpoint
// without one; the schedule's is "schedule".
const sourceRequest = "request"

// purposeJobsSweep is the purpose of the backstop's Prime calls.
const purposeJobsSweep = "jobs-sweep"

// Every is an interval that may be off: a duration, or "off" (or 0) for
// none. The zero Every is off.
type Every time.Duration

// SweepOff is the Every that never sweeps.
const SweepOff Every = 0

// UnmarshalText reads a duration, "0" or "off".
func (e *Every) UnmarshalText(b []byte) error {
	d, _, err := config.ParseInterval(string(b))
	*e = Every(d)
	return err
}

// String is the interval, or "off".
func (e Every) String() string {
	if e <= 0 {
		return "off"
	}
	return time.Duration(e).String()
}

// serveSweepJobs adds the backstop's endpoint to job-mirror's micro
// service: a sweep by hand, whatever JOBS_SWEEP_EVERY says.
func (m *Mirror) serveSweepJobs(ctx context.Context, svc micro.Service) error {
	return svc.AddEndpoint(EndpointSweepJobs, micro.ContextHandler(ctx, m.handleSweepJobs),
		micro.WithEndpointSubject(events.SubjectSweepJobs))
}

func (m *Mirror) handleSweepJobs(ctx context.Context, req micro.Request) {
	var r events.JobsSweepRequest
	if len(req.Data()) > 0 {
		if err := json.Unmarshal(req.Data(), &r); err != nil {
			if err := req.Error("400", "not a jobs sweep request: want {} or {\"source\":\"…\"}", nil); err != nil {
				m.log.Warn("jobs sweep: answering", "err", err)
			}
			return
		}
	}
	// A sweep asked for unnamed ('{}', or no body) is the operator's
	// request: its log says so, not source="".
	reply, result := m.sweepJobs(ctx, cmp.Or(r.Source, sourceRequest))
	body, _ := json.Marshal(reply) // a struct of strings, times and numbers always marshals
	var err error
	switch result {
	case "rate_limited":
		err = req.Error("429", "jobs sweep stopped: rate limited by Prime", body)
	case "prime_unavailable":
		err = req.Error("503", "jobs sweep stopped: Prime is not answering", body)
	case "stopped":
		err = req.Error("500", "jobs sweep stopped before the end of the list", body)
	default:
		err = req.Respond(body)
	}
	if err != nil {
		m.log.Warn("jobs sweep: answering", "err", err)
	}
}

// SettingJobsSweepCheckpoint names the primeflowSettings row in which a
// jobs-by-date sweep cut short keeps how far it got (a JSON checkpoint;
// empty when none), so that the next sweep goes on from there.
const SettingJobsSweepCheckpoint = "JobsSweepCheckpoint"

// checkpoint is how far a jobs-by-date sweep got through its list: every
// job on the pages before NextPage of the jobs updated since FromUTC,
// newest first, went through. Newest first, a job updated since only moves
// to the front (the pages after it shift onto jobs already read), so the
// pages from NextPage still hold every job not read yet: a sweep that goes
// on from there misses none, and the watermark moves once one of them
// reaches the end of the list.
type checkpoint struct {
	FromUTC time.Time `json:"fromUTC"`
	// PerPage is the size of the pages as Prime cut them: pages of another
	// size (PRIME_PAGE_SIZE changed) start the list again.
	PerPage  int `json:"perPage"`
	NextPage int `json:"nextPage"`
	// NewestUTC is the newest updatedAt the pages gone through listed.
	NewestUTC time.Time `json:"newestUTC"`
}

// getCheckpoint reads the checkpoint a sweep cut short kept; found is
// false when there is none.
func (m *Mirror) getCheckpoint(ctx context.Context) (cp checkpoint, found bool, err error) {
	v, found, err := m.store.GetSetting(ctx, SettingJobsSweepCheckpoint)
	if err != nil || !found || v == "" {
		return checkpoint{}, false, err
	}
	if err := json.Unmarshal([]byte(v), &cp); err != nil || cp.NextPage < 1 {
		m.log.Warn("jobs sweep: the checkpoint does not read; the sweep starts from the watermark", "checkpoint", v, "err", err)
		return checkpoint{}, false, nil
	}
	return cp, true, nil
}

// setCheckpoint keeps how far the sweep got; the zero checkpoint clears it.
func (m *Mirror) setCheckpoint(ctx context.Context, cp checkpoint) error {
	v := ""
	if cp.NextPage > 0 {
		b, err := json.Marshal(cp)
		if err != nil {
			return err
		}
		v = string(b)
	}
	return m.store.SetSetting(ctx, SettingJobsSweepCheckpoint, v)
}

// sweepJobs lists the jobs Prime updated since the watermark, less the
// overlap window (JOBS_SWEEP_OVERLAP: a job whose change Prime committed
// late, or clocks that disagree), newest first, one call a page, and puts
// each through the one first-sight path: a job the mirror holds at that
// version, its objects queued for that version, costs nothing more; one
// whose version moved since is written and gets its objects queued again
// (§6 step 1, as n8n's copy of the pipeline did for every job it listed),
// drained in the sweeps' class; one the mirror lacks is written, claimed
// as first seen (via backstop) and handed to the new-job pipeline. The
// watermark moves to the newest updatedAt listed only when the whole list
// went through. A sweep that stops (Prime's rate limit, a failed page, a
// job that could not be written, the deadline) keeps, after each page
// whose jobs all went through, a checkpoint, and the next sweep goes on
// from its page, so that even a sweep always cut short gets to the end of
// the list; a page with a job that failed is read again. A hold on Prime's
// budget stops the sweep at once, so that it never queues up behind the
// webhook events for the budget they share. result labels the outcome:
// ok, rate_limited (Prime's 429), prime_unavailable (Prime answered 5xx or
// not at all: pkg/prime/outage.go) or stopped.
func (m *Mirror) sweepJobs(ctx context.Context, source string) (reply events.JobsSweepReply, result string) {
	m.sweeping.Lock()
	defer m.sweeping.Unlock()
	defer func() { m.metrics.jobsSweeps.WithLabelValues(result).Inc() }()
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, m.cfg.JobsSweepTimeout)
	defer cancel()
	// A hold stops it at once; otherwise its calls get what the others
	// leave (the jobs-by-date backstop is a sweep).
	ctx = prime.WithCaller(prime.WithPriority(prime.FailOnHold(ctx), prime.PrioritySweep), ServiceName, purposeJobsSweep)
	log := m.log.With("sweep", WatermarkJobsByDate, "source", source)
	stop := func(err error) (events.JobsSweepReply, string) {
		reply.Error = err.Error()
		if after := retry.Delay(err); after > 0 {
			reply.RetryAfterMS = max(after.Milliseconds(), 1)
			if errors.Is(err, prime.ErrUnavailable) {
				log.Warn("jobs sweep stopped: Prime is not answering (5xx, or no answer); the next one goes on from the last page it got through",
					"retryAfter", after, "err", err, "reply", reply)
				return reply, "prime_unavailable"
			}
			log.Warn("jobs sweep stopped by Prime's rate limit: the next one goes on from the last page it got through", "retryAfter", after, "reply", reply)
			return reply, "rate_limited"
		}
		if parent.Err() != nil {
			log.Info("jobs sweep cut short by the shutdown: the next one goes on from the last page it got through", "reply", reply)
		} else {
			log.Error("jobs sweep stopped: the next one goes on from the last page it got through", "err", err, "reply", reply)
		}
		return reply, "stopped"
	}

	watermark, found, err := m.store.GetSweepWatermark(ctx, WatermarkJobsByDate)
	if err != nil {
		return stop(fmt.Errorf("read the watermark: %w", err))
	}
	cp, resumed, err := m.getCheckpoint(ctx)
	if err != nil {
		return stop(fmt.Errorf("read the checkpoint: %w", err))
	}
	reply.WatermarkUTC = watermark
	switch {
	case resumed:
		reply.FromUTC, reply.FromPage = cp.FromUTC, cp.NextPage
	case found:
		reply.FromUTC = watermark.Add(-m.cfg.JobsSweepOverlap)
	default:
		reply.FromUTC = time.Now().Add(-m.cfg.JobsSweepFirst)
	}
	if found {
		m.metrics.watermark(watermark)
	}
	newest := watermark
	if cp.NewestUTC.After(newest) {
		newest = cp.NewestUTC
	}
	kept := resumed // a checkpoint is kept, to be cleared at the end
	clean := true   // every job listed so far went through: the checkpoint may move
	for n := max(cp.NextPage, 1); ; n++ {
		page, err := m.prime.ListJobsUpdatedSince(ctx, reply.FromUTC, n)
		if err != nil {
			return stop(fmt.Errorf("list page %d: %w", n, err))
		}
		if resumed && n > 1 && page.PerPage != cp.PerPage {
			log.Info("jobs sweep: Prime's pages are of another size than the checkpoint's; the list starts again", "perPage", page.PerPage, "checkpoint", cp.PerPage)
			resumed, n, reply.FromPage = false, 0, 0
			continue
		}
		resumed = false
		reply.Pages++
		reply.Listed += len(page.Records)
		ids := make([]string, len(page.Records))
		for i, j := range page.Records {
			ids[i] = j.ID
		}
		if _, err := m.store.RecordBackstopSeen(ctx, ids, time.Now()); err != nil {
			return stop(fmt.Errorf("record what page %d listed: %w", n, err))
		}
		failed := reply.Failed
		for _, j := range page.Records {
			if err := m.sweepJob(ctx, log, j, &reply); err != nil {
				return stop(fmt.Errorf("job %s: %w", j.ID, err))
			}
			if j.UpdatedAt.After(newest) {
				newest = j.UpdatedAt.Time
			}
		}
		clean = clean && reply.Failed == failed
		if page.Last() {
			break
		}
		if clean {
			if err := m.setCheckpoint(ctx, checkpoint{FromUTC: reply.FromUTC, PerPage: page.PerPage, NextPage: n + 1, NewestUTC: newest}); err != nil {
				return stop(fmt.Errorf("keep the checkpoint after page %d: %w", n, err))
			}
			kept = true
		}
	}
	if reply.Failed > 0 {
		return stop(fmt.Errorf("%d of %d jobs could not be mirrored", reply.Failed, reply.Listed))
	}
	if newest.After(watermark) {
		if err := m.store.SetSweepWatermark(ctx, WatermarkJobsByDate, newest); err != nil {
			return stop(fmt.Errorf("move the watermark: %w", err))
		}
		reply.WatermarkUTC = newest
	}
	if kept {
		if err := m.setCheckpoint(ctx, checkpoint{}); err != nil {
			return stop(fmt.Errorf("clear the checkpoint: %w", err))
		}
	}
	if !reply.WatermarkUTC.IsZero() {
		m.metrics.watermark(reply.WatermarkUTC)
	}
	log.Info("jobs sweep finished", "reply", reply)
	return reply, "ok"
}

// sweepJob puts one listed job through the first-sight path and counts it.
// A job that cannot be written is counted and the sweep goes on; what it
// returns stops the sweep: the deadline.
func (m *Mirror) sweepJob(ctx context.Context, log *slog.Logger, j prime.Job, reply *events.JobsSweepReply) error {
	count := func(outcome string, n *int) {
		*n++
		m.metrics.jobsSwept.WithLabelValues(outcome).Inc()
	}
	held, found, err := m.store.GetJob(ctx, j.ID)
	if err == nil && found {
		var queued store.JobVersion
		var marked bool
		queued, marked, err = m.store.GetJobObjectsQueued(ctx, j.ID)
		if err == nil && marked && queued.Covers(versionOf(j)) && held.At().Covers(versionOf(j)) {
			count("unchanged", &reply.Unchanged)
			return nil
		}
	}
	firstSight := false
	if err == nil {
		firstSight, err = m.mirrorJob(ctx, sighting{job: j, firstSight: !found, via: store.ViaBackstop, requeue: true})
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		count("failed", &reply.Failed)
		log.Warn("jobs sweep: job not mirrored", "jobId", j.ID, "err", err)
		return nil
	}
	if firstSight {
		count("first_sight", &reply.FirstSight)
		log.Info("jobs sweep found a job no other path had brought: first sight, new-job pipeline handed off", "jobId", j.ID, "jobNumber", j.JobNumber)
		return nil
	}
	count("updated", &reply.Updated)
	return nil
}

// versionOf is the listed job's version.
func versionOf(j prime.Job) store.JobVersion {
	return store.JobVersion{Version: j.Version, UpdatedAt: j.UpdatedAt.Time}
}

// queueObjects is the backstop's copy of §6 step 1 for a job the mirror
// knew whose version moved since its objects were last queued (n8n's
// "Prime Sync Jobs by Date" ran the pipeline for every job it listed):
// queue its status histories, contacts, allocations and contact
// relationships (skipping those queued already), record the version they
// are queued for, and hand them to the drains, whose calls for them go in
// the sweeps' class, after everyone else's. All of it in tx, the job's
// write.
func queueObjects(ctx context.Context, tx store.Store, jobID string, j prime.Job) error {
	if _, err := tx.QueueMissingObjectsByJob(ctx, jobID); err != nil {
		return fmt.Errorf("queue the job's objects: %w", err)
	}
	v := versionOf(j)
	if err := tx.SetJobObjectsQueued(ctx, jobID, v); err != nil {
		return err
	}
	body, err := json.Marshal(events.SyncQueued{JobID: jobID, Objects: store.MissingObjects(), Source: store.ViaBackstop,
		Priority: prime.PrioritySweep.String()})
	if err != nil {
		return err
	}
	key := fmt.Sprintf("%s@%d:%d", jobID, v.Version, v.UpdatedAt.UnixMilli())
	_, err = tx.InsertOutbox(ctx, []store.OutboxMessage{outbox.Message(events.SubjectSyncQueued, events.SyncQueuedMsgID(store.ViaBackstop, key), body)})
	return err
}
