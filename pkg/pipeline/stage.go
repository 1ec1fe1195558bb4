package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/consume"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/logging"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StatusProcessed is processStatus of a row handled without remark.
const StatusProcessed = "Processed"

// Finish is what a stage commits, in one transaction, when it has handled
// an event: its writes, the messages it hands on, and the row's stamp.
type Finish struct {
	// JobID is the job the event turned out to be about; it is backfilled
	// into the row's jobId (§3).
	JobID string
	// Status is the row's processStatus; empty is StatusProcessed.
	Status string
	// Write makes the stage's writes inside the transaction.
	Write func(ctx context.Context, tx store.Store) error
	// Outbox are the messages handed on, published after the commit. Write
	// may hand on more (tx.InsertOutbox), decided inside the transaction.
	Outbox []store.OutboxMessage
	// After runs after the commit, for best-effort steps whose failure is
	// logged and swallowed (the spec's "logged only" steps). Its context is
	// not cancelled by a shutdown: it must bound its own wait.
	After func(ctx context.Context)
}

// Work handles one resolved event. It returns what to commit, or an error:
// a *PayloadFault, a retry.Waiter — Prime's rate limit, Prime not
// answering (*prime.UnavailableError), an *UnavailableError — (the event
// waits, no attempt is counted), or any other failure (an attempt is
// counted).
type Work func(ctx context.Context, ev events.Resolved) (Finish, error)

// ErrUnavailable matches every *UnavailableError (errors.Is).
var ErrUnavailable = errors.New("service unavailable")

// UnavailableError: a service a stage asks on an event's behalf did not
// answer — job-mirror's ensure-job endpoint (§4.3) had no responder, let
// the request's deadline pass, or the connection was closed or draining.
// Like Prime's rate limit it is not a failure of the event (§9 counts the
// handler's own failures): the event waits Wait and runs again, and
// no attempt is counted, so an outage of the service does not cap the
// events that arrive during it (§3), which would lose steps such as
// make-safe detection for good (§10.5). An answer that is an error is not
// an UnavailableError: it fails the attempt as before. It is a
// retry.Waiter: retry.Delay turns it into the event's wait.
type UnavailableError struct {
	// Service is the service that did not answer ("job-mirror").
	Service string
	// Wait is how long the event waits before it runs again.
	Wait time.Duration
	// Err is the request's error.
	Err error
}

// Error says which service did not answer, how long the event waits and why.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s did not answer, retry after %s: %v", e.Service, e.Wait, e.Err)
}

// RetryAfter is Wait.
func (e *UnavailableError) RetryAfter() time.Duration { return e.Wait }

// Unwrap returns the request's error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// The labels of what an event waits for, as events.Done.Wait and the
// metrics name them (WaitLabel).
const (
	// WaitRateLimited: Prime answered 429, or the client holds its calls
	// (prime.ErrRateLimited).
	WaitRateLimited = "rate_limited"
	// WaitPrimeUnavailable: Prime answered 5xx or not at all
	// (prime.ErrUnavailable: pkg/prime/outage.go).
	WaitPrimeUnavailable = "prime_unavailable"
	// WaitUnavailable: a service the stage asks did not answer
	// (ErrUnavailable: job-mirror's ensure-job), or any other wait.
	WaitUnavailable = "unavailable"
)

// WaitLabel is the label of what err, a retry.Waiter, makes an event wait for.
func WaitLabel(err error) string {
	switch {
	case errors.Is(err, prime.ErrRateLimited):
		return WaitRateLimited
	case errors.Is(err, prime.ErrUnavailable):
		return WaitPrimeUnavailable
	}
	return WaitUnavailable
}

// Stage finishes log rows for the handlers of one service. Handler needs
// all four; Fail and Announce need no Outbox.
type Stage struct {
	Store  store.Store
	NC     *nats.Conn
	Outbox *outbox.Publisher
	Log    *slog.Logger
	// Caller names the service in the Prime calls its handlers make
	// (ForEvent), and in the errors it records on a row (FailedBy).
	Caller string
}

// errAlreadyProcessed rolls a stage's transaction back: the row was
// processed by another run of the same event before this one committed.
var errAlreadyProcessed = errors.New("log row already processed")

// Handler turns work into a consume.Handler for prime.resolved messages.
// The Prime calls work makes carry the event's class and name the stage's
// Caller (ForEvent).
// Every outcome is settled on the row before the message is acked: processed
// with the effects, or a failed attempt with its error; the resolver's lane
// learns it on events.DoneSubject and retries the event from there. An
// event that waits (a retry.Waiter) leaves the row as it was. The
// message is redelivered instead when the row itself cannot be written, and
// handed back untouched when the consumer is shutting down.
func (s *Stage) Handler(work Work) consume.Handler {
	return func(ctx context.Context, msg jetstream.Msg) error {
		var ev events.Resolved
		if err := json.Unmarshal(msg.Data(), &ev); err != nil || ev.LogID <= 0 {
			return consume.Drop(fmt.Errorf("%s: not a resolved event: %v", msg.Subject(), err))
		}
		log := s.Log.With("logId", ev.LogID, "action", ev.Action)
		ctx = ForEvent(ctx, s.Caller, ev)
		fin, err := work(ctx, ev)
		if err == nil {
			err = s.commit(ctx, ev, fin)
			if errors.Is(err, errAlreadyProcessed) {
				// Another run of the event (a lane timeout's re-dispatch,
				// a redelivery) committed first: this run's writes, hand-offs
				// and After steps are dropped, and the event is done (§3).
				log.Info("row already processed by another run of the event: nothing committed")
				s.Announce(events.Done{LogID: ev.LogID, Outcome: events.OutcomeProcessed})
				return nil
			}
			if err == nil {
				if fin.After != nil {
					// Committed: a shutdown now must not cut the
					// best-effort steps short, which nothing would run
					// again (each bounds its own wait).
					fin.After(context.WithoutCancel(ctx))
				}
				s.Announce(events.Done{LogID: ev.LogID, Outcome: events.OutcomeProcessed})
				return nil
			}
		}
		if ctx.Err() != nil {
			// Shutting down: a run cut short is not one of the row's five
			// attempts (§3; §9 counts the handler's own failures). Nothing
			// is recorded: consume hands the message back, and the event
			// runs again after the restart.
			return fmt.Errorf("log row %d handed back on shutdown: %w", ev.LogID, err)
		}
		if after := retry.Delay(err); after > 0 {
			// The lane waits and hands the event over again; the row is
			// left as it was.
			log.Info("the event waits, no attempt counted", "retryAfter", after, "err", err)
			s.Announce(events.Done{LogID: ev.LogID, Outcome: events.OutcomeWait, RetryAfterMS: after.Milliseconds(), Wait: WaitLabel(err)})
			return nil
		}
		_, err = s.Fail(ctx, ev.LogID, fin.JobID, err)
		return err
	}
}

func (s *Stage) commit(ctx context.Context, ev events.Resolved, fin Finish) error {
	status := fin.Status
	if status == "" {
		status = StatusProcessed
	}
	_, err := s.Outbox.With("logId", ev.LogID).InTx(ctx, s.Store, "hand-off", func(tx store.Store) error {
		// The row first, and only while it is unprocessed: the check and
		// the stamp are one statement, and the row stays locked until the
		// commit, so of two runs of one event only one commits its effects.
		written, err := tx.SetWebhookLogProcessedIfUnprocessed(ctx, ev.LogID, fin.JobID, status)
		if err != nil {
			return err
		}
		if !written {
			return errAlreadyProcessed
		}
		if fin.Write != nil {
			if err := fin.Write(ctx, tx); err != nil {
				return err
			}
		}
		if len(fin.Outbox) > 0 {
			_, err := tx.InsertOutbox(ctx, fin.Outbox)
			return err
		}
		return nil
	})
	return err
}

// Fail records a failed attempt on the row (payload faults logged with the
// payload), announces it and returns what it announced: the failure with
// the attempts so far, or, when another run of the event has processed the
// row meanwhile, that it is processed (nothing recorded: the row is not
// marked failed). It returns an error only when the row could not be
// written, so the message is redelivered rather than lost.
func (s *Stage) Fail(ctx context.Context, logID int64, jobID string, cause error) (events.Done, error) {
	log := s.Log.With("logId", logID)
	// A payload fault (§9) is logged with the row's payload: in full on its
	// first fault, then by size and hash (logging.Payload).
	var fault *PayloadFault
	payload, first := "", true
	if errors.As(cause, &fault) {
		if row, err := s.Store.GetWebhookLog(ctx, logID); err == nil {
			payload, first = row.Payload, row.ProcessAttempts == 0
		}
	}
	attempts, err := s.Store.IncrementWebhookLogAttempt(context.WithoutCancel(ctx), logID, jobID, RecordedError(s.Caller, cause.Error()))
	if errors.Is(err, store.ErrAlreadyProcessed) {
		log.Info("another run of the event processed the row meanwhile: this run's failure is not recorded", "err", cause)
		d := events.Done{LogID: logID, Outcome: events.OutcomeProcessed}
		s.Announce(d)
		return d, nil
	}
	if err != nil {
		return events.Done{}, fmt.Errorf("record failed attempt of row %d: %w (after: %v)", logID, err, cause)
	}
	log = log.With("attempt", attempts, "of", store.MaxAttempts, "err", cause)
	switch {
	case fault != nil && fault.Kind == UnknownIdentifier:
		// Not the parser's: the payload names a record neither the mirror
		// nor Prime has (yet, or any more).
		log.Warn("the record the payload names is not in the mirror or in Prime: it may not exist yet, or was deleted; the event is retried",
			logging.Payload(payload, first))
	case fault != nil:
		// §9: the parser's, logged with the payload.
		log.Error("payload fault: fix the parser, then replay the row", logging.Payload(payload, first))
	case attempts < store.MaxAttempts:
		log.Warn("event failed")
	}
	if attempts >= store.MaxAttempts {
		log.Error("event failed its last attempt: it stays unprocessed for a person to look at (primectl list --state capped)")
	}
	d := events.Done{LogID: logID, Outcome: events.OutcomeFailed, Attempts: attempts, Error: cause.Error()}
	s.Announce(d)
	return d, nil
}

// RecordedError is the processStatus a failed attempt records: the error,
// after the name of the service that met it ("resolver: payload fault …"),
// so that whoever reads the row knows whose it is (a payload fault on a
// create-appointment row is the resolver's, not child-mirror's, whose
// action it is). No service named, or one the error names first already,
// is the error alone. FailedBy reads the name back.
func RecordedError(service, err string) string {
	if service == "" || strings.HasPrefix(err, service+": ") {
		return err
	}
	return service + ": " + err
}

// FailedBy is the service a recorded error names first (RecordedError),
// if it is one of services, and the error without it; "" and the error as
// it is otherwise (a row failed before the services named themselves, or
// by another program).
func FailedBy(status string, services []string) (service, err string) {
	for _, name := range services {
		if rest, ok := strings.CutPrefix(status, name+": "); ok && name != "" {
			return name, rest
		}
	}
	return "", status
}

// Announce tells the resolver's lane how a row finished. It is best effort:
// a lane that misses it reads the row instead.
func (s *Stage) Announce(d events.Done) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	if err := s.NC.Publish(events.DoneSubject(d.LogID), b); err != nil {
		s.Log.Debug("announce done", "logId", d.LogID, "err", err)
	}
}
