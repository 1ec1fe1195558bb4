package mailintake

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/jobemail"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// poll works through the folder once, oldest message first.
func (in *Intake) poll(ctx context.Context) {
	var msgs []graph.Message
	err := in.graphCall(ctx, "list the folder", func() error {
		var err error
		msgs, err = in.mail.ListMessages(ctx, in.cfg.User, in.folder.ID, in.cfg.PageSize)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			in.metrics.polls.WithLabelValues("failed").Inc()
			in.log.Error("the folder could not be listed; the next poll tries again", "err", err)
		}
		return
	}
	in.metrics.polls.WithLabelValues("ok").Inc()
	in.metrics.backlog.Set(float64(len(msgs)))
	for i, m := range msgs {
		in.setOldest(msgs[i:])
		if ctx.Err() != nil {
			return
		}
		if in.handle(ctx, m) {
			in.metrics.backlog.Dec()
		}
	}
	in.setOldest(nil)
}

// setOldest notes the oldest message still to handle (the list is oldest
// first).
func (in *Intake) setOldest(rest []graph.Message) {
	if len(rest) == 0 || rest[0].ReceivedDateTime.IsZero() {
		in.oldest.Store(0)
		return
	}
	in.oldest.Store(rest[0].ReceivedDateTime.UnixNano())
}

// oldestAge is how long the oldest message has waited in the folder.
func (in *Intake) oldestAge() time.Duration {
	at := in.oldest.Load()
	if at == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(0, at)))
}

// handle is one message's turn; it reports whether the message left the
// folder.
func (in *Intake) handle(ctx context.Context, m graph.Message) (moved bool) {
	key := m.InternetMessageID
	if key == "" {
		// Graph gives every message it received one; a message made in
		// the folder by hand may have none, and is known by its id there.
		key = "graph:" + m.ID
	}
	log := in.log.With("internetMessageId", key, "subject", m.Subject)
	r, inserted, err := in.store.RegisterEmail(ctx, store.EmailReceipt{
		InternetMessageID: key, Subject: m.Subject, ReceivedUTC: m.ReceivedDateTime.Time,
		From: m.From.EmailAddress.Address, BodyPreview: m.BodyPreview,
	})
	if err != nil {
		log.Error("the email's receipt could not be written; the next poll tries again", "err", err)
		return false
	}
	if inserted {
		log.Info("new-job email received", "receivedDateTime", m.ReceivedDateTime.Time)
	}
	if !r.MovedUTC.IsZero() {
		// It was filed before and is back: a person moved it here to have
		// it tried again.
		log.Info("email moved back into the folder: trying it afresh", "was", r.Outcome, "movedTo", r.MovedTo)
		r.Outcome, r.Attempts, r.LastError, r.MovedUTC, r.MovedTo = store.EmailPending, 0, "", time.Time{}, ""
		if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
			log.Error("the email's receipt could not be written; the next poll tries again", "err", err)
			return false
		}
		in.metrics.messages.WithLabelValues("reopened").Inc()
	}
	switch r.Outcome {
	case store.EmailProcessed:
		// Done before, and the move did not happen (a crash, Graph down).
		return in.file(ctx, m, r, in.processed)
	case store.EmailFailed:
		return in.file(ctx, m, r, in.failed)
	}
	return in.attempt(ctx, m, r)
}

// attempt extracts the JobID and makes sure of the job; the message is
// filed when that is done, or after its last failed attempt.
func (in *Intake) attempt(ctx context.Context, m graph.Message, r store.EmailReceipt) (moved bool) {
	job, err := jobemail.Extract(jobemail.Email{Subject: m.Subject, Body: m.Body.Content, HTML: m.HTML(), Preview: m.BodyPreview})
	if err != nil {
		return in.failedAttempt(ctx, m, r, err)
	}
	r.JobID, r.JobIDKind, r.NumericReference, r.JobNumber = job.JobID, string(job.Kind), job.NumericReference, job.JobNumber
	// The email's job, and nothing about it: job-mirror asks Prime, in the
	// mail intake's class (after the events, before the sweeps), and records
	// the sight as the email's, from the subject alone.
	req := events.EnsureJobRequest{NumericRef: job.NumericReference}
	if job.Kind == jobemail.KindGUID {
		req.JobID = job.JobID
	}
	reply, err := in.ensureJob(ctx, req)
	switch {
	case ctx.Err() != nil:
		return false
	case errors.Is(err, prime.ErrNotFound):
		return in.failedAttempt(ctx, m, r, fmt.Errorf("Prime has no job %s (%s JobID of the email)", job.JobID, job.Kind))
	case err != nil:
		return in.failedAttempt(ctx, m, r, err)
	}
	r.PrimeJobID, r.Outcome = reply.JobID, store.EmailProcessed
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		// The job is mirrored; the next poll asks again (no Prime call:
		// the mirror has it) and records it then.
		in.log.Error("the email's receipt could not be written; the next poll tries again", "internetMessageId", r.InternetMessageID, "err", err)
		return false
	}
	in.log.Info("new-job email: job made sure of", "internetMessageId", r.InternetMessageID, "jobId", reply.JobID,
		"jobIdInEmail", job.JobID, "jobNumber", job.JobNumber, "firstSight", reply.FirstSight, "wasMirrored", reply.WasMirrored)
	return in.file(ctx, m, r, in.processed)
}

// failedAttempt records a failed attempt, and files the message in the
// failed folder when it was the last.
func (in *Intake) failedAttempt(ctx context.Context, m graph.Message, r store.EmailReceipt, cause error) (moved bool) {
	r.Attempts++
	r.LastError = cause.Error()
	last := r.Attempts >= in.cfg.MaxAttempts
	if last {
		r.Outcome = store.EmailFailed
	}
	log := in.log.With("internetMessageId", r.InternetMessageID, "subject", m.Subject, "attempts", r.Attempts, "err", cause)
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		log.Error("new-job email failed an attempt, and its receipt could not be written", "recordErr", err)
		return false
	}
	if !last {
		in.metrics.messages.WithLabelValues("retry").Inc()
		log.Warn("new-job email failed an attempt; the next poll tries it again", "maxAttempts", in.cfg.MaxAttempts)
		return false
	}
	log.Error("new-job email failed its last attempt: it goes to the failed folder, its receipt says why", "folder", in.cfg.FailedFolder)
	return in.file(ctx, m, r, in.failed)
}

// file moves the message to a folder, last, and records where it went.
func (in *Intake) file(ctx context.Context, m graph.Message, r store.EmailReceipt, to graph.Folder) (moved bool) {
	err := in.graphCall(ctx, "move the email", func() error {
		_, err := in.mail.Move(ctx, in.cfg.User, m.ID, to.ID)
		return err
	})
	switch {
	case errors.Is(err, graph.ErrNotFound):
		// Gone from the folder since it was listed: filed by a person, or
		// by another intake on the same folder.
		in.log.Warn("the email was no longer in the folder to move", "internetMessageId", r.InternetMessageID)
	case err != nil:
		if ctx.Err() == nil {
			in.log.Error("the email could not be moved; the next poll moves it", "internetMessageId", r.InternetMessageID, "err", err)
		}
		return false
	}
	outcome := store.EmailProcessed
	if to.ID == in.failed.ID {
		outcome = store.EmailFailed
	}
	in.metrics.messages.WithLabelValues(strings.ToLower(outcome)).Inc()
	r.MovedUTC, r.MovedTo = time.Now(), outcome
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		in.log.Warn("the email was moved, but its receipt does not say so", "internetMessageId", r.InternetMessageID, "err", err)
	}
	return true
}

// ensureJob asks job-mirror to make sure of the job, waiting out Prime's
// rate limit and job-mirror not answering: neither is a failure of the
// email (§9).
func (in *Intake) ensureJob(ctx context.Context, req events.EnsureJobRequest) (events.EnsureJobReply, error) {
	for {
		reply, err := in.ensure.Ensure(ctx, events.SubjectEnsureJobEmail, req)
		after := retry.Delay(err)
		if after <= 0 || ctx.Err() != nil {
			return reply, err
		}
		in.metrics.waits.WithLabelValues("job_mirror").Inc()
		in.log.Info("the job cannot be made sure of now: waiting, no attempt counted", "retryAfter", after, "err", err)
		if !sleep(ctx, after) {
			return reply, ctx.Err()
		}
	}
}

// graphWaits are the waits between calls to Graph while it cannot answer
// and gives no Retry-After, by call.
var graphWaits = retry.Backoff{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// graphCall runs call until Graph answers it: a 429 waits its
// Retry-After, a 5xx or no answer the next of graphWaits. The start and the
// end of an outage are logged.
func (in *Intake) graphCall(ctx context.Context, what string, call func() error) error {
	for n := 0; ; n++ {
		err := call()
		var w *graph.WaitError
		if !errors.As(err, &w) || ctx.Err() != nil {
			if !in.waiting.IsZero() && ctx.Err() == nil {
				in.log.Info("Graph answers again", "waited", time.Since(in.waiting).Round(time.Millisecond))
				in.waiting = time.Time{}
			}
			return err
		}
		reason := "unavailable"
		if w.Status == 429 {
			reason = "throttled"
		}
		in.metrics.waits.WithLabelValues(reason).Inc()
		after := retry.Wait(w.RetryAfter())
		if w.RetryAfter() <= 0 {
			after = graphWaits.After(n + 1)
		}
		if in.waiting.IsZero() {
			in.waiting = time.Now()
			in.log.Warn("Graph cannot answer now: waiting, nothing is lost", "call", what, "retryAfter", after, "err", err)
		}
		if !sleep(ctx, after) {
			return ctx.Err()
		}
	}
}

// sleep waits d, or until ctx ends (then it reports false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
