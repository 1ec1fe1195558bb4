package mailintake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/jobemail"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// turn is what became of a message at its turn in a poll.
type turn int

const (
	// kept: still in the folder, for a later poll.
	kept turn = iota
	// moved: filed in another folder.
	moved
	// graphOut: kept, because Graph did not answer its call within
	// messageWait.
	graphOut
)

// messageWait bounds how long one message's call to Graph (its body, its
// move) waits for Graph to answer; then the poll goes on without it.
const messageWait = 10 * time.Second

// poll works through the folder once, oldest message first, a page at a
// time, each page as it arrives. Filing a page's messages moves the later
// ones up under the next page's link ($skip), so after a page that filed
// any, the folder is listed from the top again, and the messages this poll
// has had their turn are passed over. Two messages in a row whose calls
// Graph did not answer end it: Graph is out, not one message, and the next
// poll's listing waits for it.
func (in *Intake) poll(ctx context.Context) {
	seen := map[string]bool{} // the messages that had their turn
	left, out := 0, 0         // the messages kept; the calls in a row Graph did not answer
	var oldest time.Time      // the receivedDateTime of the first message kept
	listed := false           // a page was listed: the figures are this poll's
	defer func() {
		if listed {
			in.metrics.backlog.Set(float64(left))
			in.setOldest(oldest)
		}
	}()
	refound := false
	for link := ""; ; {
		var page graph.Page
		err := in.graphCall(ctx, "list the folder", 0, func(ctx context.Context) error {
			var err error
			page, err = in.mail.ListPage(ctx, in.cfg.User, in.source.ID, in.cfg.PageSize, link)
			return err
		})
		if errors.Is(err, graph.ErrNotFound) && link == "" && !refound {
			// The folder's id is not there: deleted, and perhaps made again.
			if refound = true; in.refind(ctx, in.source) {
				continue
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				in.metrics.polls.WithLabelValues("failed").Inc()
				in.log.Error("the folder could not be listed; the next poll tries again", "err", err)
			}
			return
		}
		listed = true
		filed := false
		for _, m := range page.Messages {
			key := receiptKey(m)
			if seen[key] {
				continue
			}
			seen[key] = true
			if oldest.IsZero() {
				in.setOldest(m.ReceivedDateTime.Time) // while it is worked on
			}
			if ctx.Err() != nil {
				return
			}
			t := in.handle(ctx, m)
			if t == moved {
				filed, out = true, 0 // Graph answered: its silences in a row start again
				continue
			}
			if left++; oldest.IsZero() {
				oldest = m.ReceivedDateTime.Time
			}
			if t != graphOut {
				out = 0
			} else if out++; out == 2 {
				in.log.Warn("Graph did not answer two emails' calls in a row: the poll ends, the next waits for Graph")
				in.metrics.polls.WithLabelValues("failed").Inc()
				return
			}
		}
		switch {
		case page.Next == "":
			in.metrics.polls.WithLabelValues("ok").Inc()
			in.forget(seen)
			return
		case filed:
			link = ""
		default:
			link = page.Next
		}
	}
}

// setOldest notes the receivedDateTime of the oldest message still in the
// folder (zero: none).
func (in *Intake) setOldest(t time.Time) {
	if t.IsZero() {
		in.oldest.Store(0)
		return
	}
	in.oldest.Store(t.UnixNano())
}

// oldestAge is how long the oldest message has waited in the folder.
func (in *Intake) oldestAge() time.Duration {
	at := in.oldest.Load()
	if at == 0 {
		return 0
	}
	return max(0, time.Since(time.Unix(0, at)))
}

// receiptKey is what a message's receipt is keyed by: its
// internetMessageId, which a move keeps.
func receiptKey(m graph.Message) string {
	if m.InternetMessageID == "" {
		// Graph gives every message it received one; a message made in
		// the folder by hand may have none, and is known by its id there.
		return "graph:" + m.ID
	}
	return m.InternetMessageID
}

// handle is one message's turn.
func (in *Intake) handle(ctx context.Context, m graph.Message) turn {
	key := receiptKey(m)
	if in.held(key) {
		return kept
	}
	log := in.log.With("internetMessageId", key, "subject", m.Subject)
	r, inserted, err := in.store.RegisterEmail(ctx, store.EmailReceipt{
		InternetMessageID: key, Subject: m.Subject, ReceivedUTC: m.ReceivedDateTime.Time,
		From: m.From.EmailAddress.Address, BodyPreview: m.BodyPreview,
	})
	if err != nil {
		log.Error("the email's receipt could not be written; the next poll tries again", "err", err)
		return kept
	}
	if inserted {
		log.Info("new-job email received", "receivedDateTime", m.ReceivedDateTime.Time, "from", m.From.EmailAddress.Address)
	}
	if !r.MovedUTC.IsZero() {
		// It was filed before and is back: a person moved it here to have
		// it tried again.
		log.Info("email moved back into the folder: trying it afresh", "was", r.Outcome, "movedTo", r.MovedTo)
		r.Outcome, r.Attempts, r.LastError, r.MovedUTC, r.MovedTo = store.EmailPending, 0, "", time.Time{}, ""
		if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
			log.Error("the email's receipt could not be written; the next poll tries again", "err", err)
			return kept
		}
		in.metrics.messages.WithLabelValues("reopened").Inc()
	}
	refusal := in.senders.refusal(m)
	switch {
	case r.Outcome == store.EmailProcessed:
		// Done before, and the move did not happen (a crash, Graph down).
		return in.file(ctx, m, r, in.processed, "processed")
	case r.Outcome == store.EmailRejected:
		return in.file(ctx, m, r, in.failed, "rejected")
	case r.Outcome == store.EmailFailed:
		return in.file(ctx, m, r, in.failed, "failed")
	case refusal != "":
		// Not Prime's, or not proven to be: filed unread, no Prime call.
		log.Warn("email refused unread: it goes to the failed folder", "from", m.From.EmailAddress.Address, "reason", refusal)
		return in.failNow(ctx, m, r, store.EmailRejected, refusal)
	}
	return in.attempt(ctx, m, r)
}

// attempt reads the message's JobID and makes sure of the job; the message
// is filed when that is done, or after its last failed attempt.
func (in *Intake) attempt(ctx context.Context, m graph.Message, r store.EmailReceipt) turn {
	var body graph.Body
	err := in.graphCall(ctx, "fetch the email's body", in.messageWait, func(ctx context.Context) error {
		var err error
		body, err = in.mail.GetBody(ctx, in.cfg.User, m.ID, in.cfg.MaxBodyBytes)
		return err
	})
	switch {
	case ctx.Err() != nil:
		return kept
	case errors.Is(err, graph.ErrTooLarge):
		return in.failNow(ctx, m, r, store.EmailFailed, fmt.Sprintf("the email is too large to read (MAIL_MAX_BODY_BYTES %d): %v", in.cfg.MaxBodyBytes, err))
	case errors.Is(err, graph.ErrNotFound):
		in.log.Warn("the email left the folder before its body was read", "internetMessageId", r.InternetMessageID)
		return kept
	case err != nil:
		return in.graphFault(r, err)
	}
	job, err := jobemail.Extract(jobemail.Email{Subject: m.Subject, Body: body.Content, HTML: body.HTML(), Preview: m.BodyPreview})
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
	reply, err := in.ensure.Ensure(ctx, events.SubjectEnsureJobEmail, req)
	switch {
	case ctx.Err() != nil:
		return kept
	case errors.Is(err, prime.ErrNotFound):
		return in.failedAttempt(ctx, m, r, fmt.Errorf("Prime has no job %s (%s JobID of the email)", job.JobID, job.Kind))
	case errors.Is(err, prime.ErrUnavailable):
		// Prime did not answer job-mirror (a 5xx or no answer): it says
		// how long to wait.
		in.hold(r, "ensure_failed", retry.Delay(err), err)
		return kept
	case retry.Delay(err) > 0:
		// Prime's rate limit, or job-mirror not answering.
		in.hold(r, "job_mirror", retry.Delay(err), err)
		return kept
	case err != nil:
		// job-mirror answered that it could not: a 5xx Prime gave for
		// this job alone, most likely. Not the email's fault (§7: the
		// mail stays for the next poll).
		in.hold(r, "ensure_failed", 0, err)
		return kept
	}
	r.PrimeJobID, r.Outcome = reply.JobID, store.EmailProcessed
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		// The job is mirrored; the next poll asks again (no Prime call:
		// the mirror has it) and records it then.
		in.log.Error("the email's receipt could not be written; the next poll tries again", "internetMessageId", r.InternetMessageID, "err", err)
		return kept
	}
	in.log.Info("new-job email: job made sure of", "internetMessageId", r.InternetMessageID, "jobId", reply.JobID,
		"jobIdInEmail", job.JobID, "jobNumber", job.JobNumber, "firstSight", reply.FirstSight, "wasMirrored", reply.WasMirrored)
	return in.file(ctx, m, r, in.processed, "processed")
}

// failedAttempt records a failed attempt — a fault of the email itself —
// and files the message in the failed folder when it was the last.
func (in *Intake) failedAttempt(ctx context.Context, m graph.Message, r store.EmailReceipt, cause error) turn {
	r.Attempts++
	r.LastError = cause.Error()
	last := r.Attempts >= in.cfg.MaxAttempts
	if last {
		r.Outcome = store.EmailFailed
	}
	in.release(r.InternetMessageID)
	log := in.log.With("internetMessageId", r.InternetMessageID, "subject", m.Subject, "attempts", r.Attempts, "err", cause)
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		log.Error("new-job email failed an attempt, and its receipt could not be written", "recordErr", err)
		return kept
	}
	if !last {
		in.metrics.messages.WithLabelValues("retry").Inc()
		log.Warn("new-job email failed an attempt; the next poll tries it again", "maxAttempts", in.cfg.MaxAttempts)
		return kept
	}
	log.Error("new-job email failed its last attempt: it goes to the failed folder, its receipt says why", "folder", in.cfg.FailedFolder)
	return in.file(ctx, m, r, in.failed, "failed")
}

// failNow files a message in the failed folder at once, the reason in its
// receipt: no attempt can make it otherwise. outcome is the receipt's:
// store.EmailFailed for one a person should look at (too large), or
// store.EmailRejected for one refused as not Prime's, which needs nobody.
func (in *Intake) failNow(ctx context.Context, m graph.Message, r store.EmailReceipt, outcome, reason string) turn {
	r.Outcome, r.LastError = outcome, reason
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		in.log.Error("the email's receipt could not be written; the next poll tries again", "internetMessageId", r.InternetMessageID, "err", err)
		return kept
	}
	if outcome == store.EmailRejected {
		return in.file(ctx, m, r, in.failed, "rejected")
	}
	in.log.Error("new-job email cannot be read: it goes to the failed folder, its receipt says why",
		"internetMessageId", r.InternetMessageID, "subject", m.Subject, "reason", reason)
	return in.file(ctx, m, r, in.failed, "failed")
}

// file moves the message to a folder, last, and records where it went;
// outcome labels it in primeflow_mailintake_messages_total.
func (in *Intake) file(ctx context.Context, m graph.Message, r store.EmailReceipt, to *mailFolder, outcome string) turn {
	err := in.graphCall(ctx, "move the email", in.messageWait, func(ctx context.Context) error {
		return in.mail.Move(ctx, in.cfg.User, m.ID, to.ID)
	})
	switch {
	case ctx.Err() != nil:
		return kept
	case errors.Is(err, graph.ErrNotFound):
		if t, gone := in.notFoundOnMove(ctx, m, r, to); !gone {
			return t
		}
	case err != nil:
		return in.graphFault(r, err)
	}
	in.release(r.InternetMessageID)
	in.metrics.messages.WithLabelValues(outcome).Inc()
	r.MovedUTC, r.MovedTo = time.Now(), store.EmailProcessed
	if to == in.failed {
		r.MovedTo = store.EmailFailed
	}
	if err := in.store.UpdateEmailReceipt(ctx, r); err != nil {
		in.log.Warn("the email was moved, but its receipt does not say so", "internetMessageId", r.InternetMessageID, "err", err)
	}
	return moved
}

// graphFault holds a message whose call Graph did not answer within
// messageWait, or refused (a 403, an answer it could not read): neither is
// the email's fault.
func (in *Intake) graphFault(r store.EmailReceipt, err error) turn {
	in.hold(r, "graph", 0, err)
	if errors.Is(err, graph.ErrWait) {
		return graphOut
	}
	return kept
}

// notFoundOnMove finds out what a move's 404 meant, and reports whether the
// message is gone from the folder: filed by a person, or by another intake
// on the same folder. A deleted destination folder answers 404 too, so
// both are asked about: where the message is, and whether the folder is
// still there (found again by its path, it may have been made again).
func (in *Intake) notFoundOnMove(ctx context.Context, m graph.Message, r store.EmailReceipt, to *mailFolder) (turn, bool) {
	var at string
	err := in.graphCall(ctx, "locate the email", in.messageWait, func(ctx context.Context) error {
		var err error
		at, err = in.mail.Locate(ctx, in.cfg.User, m.ID)
		return err
	})
	gone := errors.Is(err, graph.ErrNotFound)
	switch {
	case ctx.Err() != nil:
		return kept, false
	case err != nil && !gone:
		return in.graphFault(r, err), false
	}
	in.refind(ctx, to)
	if gone {
		in.log.Warn("the email was no longer in the folder to move: another reader filed it", "internetMessageId", r.InternetMessageID)
		return moved, true
	}
	in.log.Warn("the email is still in its folder after a move that answered 404; the next poll moves it", "internetMessageId", r.InternetMessageID,
		"in", at, "to", to.setting)
	return kept, false
}

// refind resolves a folder again by its path, after an id of it was not
// found: it reports whether the folder is there under a new id (deleted and
// made again). A folder not there is a wait for a person to make it, and
// says so.
func (in *Intake) refind(ctx context.Context, f *mailFolder) bool {
	var now graph.Folder
	err := in.graphCall(ctx, "resolve "+f.setting, in.messageWait, func(ctx context.Context) error {
		var err error
		now, err = in.mail.ResolveFolder(ctx, in.cfg.User, f.path)
		return err
	})
	switch {
	case errors.Is(err, graph.ErrNotFound):
		in.metrics.waits.WithLabelValues("folder_missing").Inc()
		in.log.Error("a folder of the mail intake is no longer in the mailbox: make it again; the emails wait in MAIL_FOLDER, nothing is lost",
			"setting", f.setting, "path", f.path)
		return false
	case err != nil:
		return false
	case now.ID != f.ID:
		in.log.Warn("a folder of the mail intake was made again: filing in it from now", "setting", f.setting, "path", f.path)
		f.Folder = now
		return true
	}
	return false
}

// graphWaits are the waits between calls to Graph while it cannot answer
// and gives no Retry-After, by call.
var graphWaits = retry.Backoff{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second}

// graphCall runs call until Graph answers it: a 429 waits its Retry-After,
// a 5xx or no answer the next of graphWaits. With a bound above zero, it
// waits no longer than that in all — each call runs under a context that
// ends then, so a call Graph takes and never answers is cut there too, not
// at GRAPH_TIMEOUT — and returns the *graph.WaitError that would have it
// wait longer. The start and the end of an outage are logged.
func (in *Intake) graphCall(ctx context.Context, what string, bound time.Duration, call func(context.Context) error) error {
	callCtx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	start := time.Now()
	for n := 0; ; n++ {
		err := call(callCtx)
		var w *graph.WaitError
		if !errors.As(err, &w) || ctx.Err() != nil {
			if !in.waiting.IsZero() && ctx.Err() == nil {
				in.log.Info("Graph answers again", "waited", time.Since(in.waiting).Round(time.Millisecond))
				in.waiting = time.Time{}
			}
			return err
		}
		if callCtx.Err() != nil {
			return fmt.Errorf("%w (no answer within %s)", err, bound)
		}
		after := retry.Wait(w.RetryAfter())
		if w.RetryAfter() <= 0 {
			after = graphWaits.After(n + 1)
		}
		if bound > 0 && time.Since(start)+after > bound {
			return err
		}
		reason := "unavailable"
		if w.Status == 429 {
			reason = "throttled"
		}
		in.metrics.waits.WithLabelValues(reason).Inc()
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
