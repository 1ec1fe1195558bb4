// Package status is the pipeline's state at a glance: what `primectl
// status` prints (and --json gives as JSON) and bin/primeflow's page at /
// shows. Gather reads a Report from the store (store.Overview), from
// JetStream (each stage's consumer lag, the locks held) and from wherever
// the Prime budget is read; a part it cannot read is named in
// Report.Unread and the rest is still given.
//
// To show something new: add it to store.Overview (both adapters, and
// storetest's Status), or read it here in Gather, give it a field of the
// Report, and a line in primectl's text (services/primectl/status.go) and
// in page.html.
package status

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is the pipeline's state at a glance. Every text in it that comes
// from stored data (errors, actions) is as stored: a printer escapes it.
type Report struct {
	At        time.Time  `json:"at"`
	Log       Log        `json:"log"`
	Consumers []Consumer `json:"consumers"`
	Outbox    Outbox     `json:"outbox"`
	Locks     []Lock     `json:"locks"`
	SMS       SMS        `json:"sms"`
	Invites   Invites    `json:"invites"`
	// PlanDates are optimoRoutePlan's dates by status.
	PlanDates   []PlanDates `json:"planDates"`
	PrimeBudget *Budget     `json:"primeBudget"`
	// LastErrors is each stage's newest error still standing.
	LastErrors []StageError `json:"lastErrors"`
	// Unread names each part that could not be read, and why.
	Unread []string `json:"unread,omitempty"`
}

// Log is the webhook log's rows by state.
type Log struct {
	Unprocessed int `json:"unprocessed"`
	Capped      int `json:"capped"`
	Processed   int `json:"processed"`
	Unpublished int `json:"unpublished"`
	// OldestUnprocessed is the oldest row still queued; nil when none is.
	OldestUnprocessed *Row `json:"oldestUnprocessed,omitempty"`
}

// Row is a webhook log row as status names it.
type Row struct {
	ID          int64     `json:"id"`
	ReceivedUTC time.Time `json:"receivedUTC"`
	Action      string    `json:"action"`
	Attempts    int       `json:"attempts"`
}

// Consumer is a stage's durable consumer and its lag.
type Consumer struct {
	Stage  string `json:"stage"`
	Stream string `json:"stream"`
	Name   string `json:"name"`
	// Pending are the messages not yet delivered, AckPending those
	// delivered and not yet acked, Redelivered those delivered more than
	// once and not yet acked.
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ackPending"`
	Redelivered int    `json:"redelivered"`
	// Missing: the consumer does not exist (its service never started).
	Missing bool `json:"missing,omitempty"`
}

// Outbox is the hand-offs not published yet.
type Outbox struct {
	Unpublished int        `json:"unpublished"`
	OldestUTC   *time.Time `json:"oldestUTC,omitempty"`
}

// Lock is one of the locks (§8.3).
type Lock struct {
	Key  string `json:"key"`
	Held bool   `json:"held"`
	// Holder names the holder (lock.Holder.String) when it is held.
	Holder  string     `json:"holder,omitempty"`
	TakenAt *time.Time `json:"takenAt,omitempty"`
}

// SMS is smsQueue by state.
type SMS struct {
	ByState map[string]int `json:"byState"`
	Failed  int            `json:"failed"`
}

// Invites is the triage invite queue (§5.1 step 6).
type Invites struct {
	Pending int `json:"pending"`
}

// PlanDates is how many dates are in a PlanStatus, and the earliest.
type PlanDates struct {
	Status   string `json:"status"`
	Dates    int    `json:"dates"`
	Earliest string `json:"earliest"`
}

// StageError is a stage's newest error still standing: on a log row that
// is still unprocessed, a failing first sight, an SMS not sent, an order
// OptimoRoute refused, a plan date.
type StageError struct {
	Stage string `json:"stage"`
	// What says what holds the error (log row 42, attempt 2 of 5).
	What  string     `json:"what"`
	Error string     `json:"error"`
	At    *time.Time `json:"at,omitempty"`
}

// Budget is what is known of the Prime account's budget, and where it was
// read.
type Budget struct {
	// Source says where: "the deployment's budget in NATS …", "the
	// process's metrics at …".
	Source string `json:"source"`
	// Minute and Day are the calls left in Prime's minute and day windows:
	// the deployment's shared budget (pkg/primebudget), or as Prime's last
	// answer said (x-ratelimit-*-remaining); nil when not known.
	Minute *float64 `json:"minute"`
	Day    *float64 `json:"day"`
	// InFlight and Processes are the shared budget's calls in flight and
	// the processes spending it; HoldSeconds is how long a 429's hold on
	// every call still runs. Only from the shared budget.
	InFlight    *int    `json:"inFlight,omitempty"`
	Processes   *int    `json:"processes,omitempty"`
	HoldSeconds float64 `json:"holdSeconds,omitempty"`
	// Forecast is the day's: the deployment's calls in Prime's day, their
	// pace, and when at that pace the day's budget is down to its reserve.
	// Only from the shared budget, once a call went out today.
	Forecast *primebudget.Forecast `json:"forecast,omitempty"`
}

// Sources are where Gather reads.
type Sources struct {
	Store store.Status
	// JS reads the consumers and the locks; nil, they are Unread (with
	// JSErr's reason when set).
	JS    jetstream.JetStream
	JSErr error
	// Budget reads the Prime budget; nil leaves it out.
	Budget func(context.Context) (*Budget, error)
	// Now is the report's time (default time.Now).
	Now func() time.Time
}

// Gather reads the Report. It fails only when the database cannot be read;
// NATS and the budget, when they cannot be, are named in Unread.
func Gather(ctx context.Context, src Sources) (Report, error) {
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	r := Report{At: now().UTC()}
	o, err := src.Store.StatusOverview(ctx)
	if err != nil {
		return r, err
	}
	r.fromOverview(o)
	if src.JS == nil {
		r.Unread = append(r.Unread, "consumers and locks: "+cmp.Or(errString(src.JSErr), "no NATS"))
	} else {
		r.Consumers, err = consumers(ctx, src.JS)
		if err != nil {
			r.Unread = append(r.Unread, "consumers: "+err.Error())
		}
		r.Locks, err = locks(ctx, src.JS)
		if err != nil {
			r.Unread = append(r.Unread, "locks: "+err.Error())
		}
	}
	if src.Budget != nil {
		if r.PrimeBudget, err = src.Budget(ctx); err != nil {
			r.Unread = append(r.Unread, "Prime budget: "+err.Error())
		}
	}
	return r, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (r *Report) fromOverview(o store.Overview) {
	r.Log = Log{Unprocessed: o.Unprocessed, Capped: o.Capped, Processed: o.Processed, Unpublished: o.Unpublished}
	if o.OldestUnprocessed.ID != 0 {
		u := o.OldestUnprocessed
		r.Log.OldestUnprocessed = &Row{ID: u.ID, ReceivedUTC: u.ReceivedUTC, Action: u.EventAction, Attempts: u.ProcessAttempts}
	}
	r.Outbox = Outbox{Unpublished: o.OutboxUnpublished, OldestUTC: timeOrNil(o.OutboxOldestUTC)}
	r.SMS = SMS{ByState: map[string]int{}, Failed: o.SMS[store.SendFailed]}
	for st, n := range o.SMS {
		r.SMS.ByState[string(st)] = n
	}
	r.Invites = Invites{Pending: o.InvitesPending}
	r.PlanDates = []PlanDates{}
	for _, p := range o.PlanDates {
		r.PlanDates = append(r.PlanDates, PlanDates{Status: p.Status, Dates: p.Dates, Earliest: p.Earliest})
	}
	r.LastErrors = []StageError{}
	for _, f := range o.Failing {
		r.LastErrors = append(r.LastErrors, StageError{Stage: StageOf(f.EventAction),
			What:  fmt.Sprintf("log row %d (%s), attempt %d of %d", f.ID, cmp.Or(f.EventAction, "no eventAction"), f.ProcessAttempts, store.MaxAttempts),
			Error: f.ProcessStatus, At: timeOrNil(f.ReceivedUTC)})
	}
	if o.FirstSeenFailing > 0 {
		r.LastErrors = append(r.LastErrors, StageError{Stage: events.RoleNewJobPipeline.Name,
			What:  fmt.Sprintf("job %s (%d failing)", o.FirstSeenLastErrorJob, o.FirstSeenFailing),
			Error: o.FirstSeenLastError})
	}
	if o.SMSLastError != "" {
		r.LastErrors = append(r.LastErrors, StageError{Stage: events.RoleMakesafe.Name, What: "an SMS not sent",
			Error: o.SMSLastError, At: timeOrNil(o.SMSLastErrorUTC)})
	}
	if o.OrdersFailing > 0 {
		r.LastErrors = append(r.LastErrors, StageError{Stage: events.RoleOptimoCreate.Name,
			What:  fmt.Sprintf("order %s (%d refused)", o.OrderLastErrorNo, o.OrdersFailing),
			Error: o.OrderLastError})
	}
	if o.PlanLastError != "" {
		r.LastErrors = append(r.LastErrors, StageError{Stage: events.RoleOptimoPlan.Name,
			What: "plan date " + o.PlanLastErrorDate, Error: o.PlanLastError})
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// StageOf is the stage whose consumer takes an action's resolved events;
// the resolver for an action no stage takes (its rows' errors are the
// resolver's: no handler, a payload fault).
func StageOf(action string) string {
	subject := events.ResolvedSubject(action)
	for _, role := range events.ServiceRoles {
		for _, c := range role.Consumes {
			if c.Stream == events.StreamResolved && slices.Contains(c.Subjects, subject) {
				return role.Name
			}
		}
	}
	return events.RoleResolver.Name
}

// consumers reads every stage's consumers (events.ServiceRoles), in the
// roles' order.
func consumers(ctx context.Context, js jetstream.JetStream) ([]Consumer, error) {
	var out []Consumer
	var errs []error
	for _, role := range events.ServiceRoles {
		for _, c := range role.Consumes {
			row := Consumer{Stage: role.Name, Stream: c.Stream, Name: c.Durable}
			cons, err := js.Consumer(ctx, c.Stream, c.Durable)
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				row.Missing = true
				out = append(out, row)
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", c.Stream, c.Durable, err))
				continue
			}
			info := cons.CachedInfo() // just fetched by js.Consumer
			row.Pending, row.AckPending, row.Redelivered = info.NumPending, info.NumAckPending, info.NumRedelivered
			out = append(out, row)
		}
	}
	return out, errors.Join(errs...)
}

// locks reads who holds each lock a role takes.
func locks(ctx context.Context, js jetstream.JetStream) ([]Lock, error) {
	var keys []string
	for _, role := range events.ServiceRoles {
		keys = append(keys, role.Locks...)
	}
	var out []Lock
	for _, key := range keys {
		h, held, err := lock.Held(ctx, js, key)
		if err != nil {
			return out, fmt.Errorf("%s: %w", key, err)
		}
		l := Lock{Key: key, Held: held}
		if held {
			l.Holder, l.TakenAt = h.String(), timeOrNil(h.TakenAt)
		}
		out = append(out, l)
	}
	return out, nil
}

// Healthy reports whether nothing in the report waits for a person: no
// capped row, no failed SMS, no stage error standing, nothing unread.
func (r Report) Healthy() bool {
	return r.Log.Capped == 0 && r.SMS.Failed == 0 && len(r.LastErrors) == 0 && len(r.Unread) == 0
}

// Problems lists what waits for a person, one line each, for a summary.
func (r Report) Problems() []string {
	var out []string
	if r.Log.Capped > 0 {
		out = append(out, fmt.Sprintf("%s failed %d times, not retried until replayed: primectl list --state capped",
			plural(r.Log.Capped, "log row"), store.MaxAttempts))
	}
	if r.SMS.Failed > 0 {
		out = append(out, plural(r.SMS.Failed, "SMS message")+" failed for good: they stay Failed in smsQueue")
	}
	for _, c := range r.Consumers {
		if c.Missing {
			out = append(out, fmt.Sprintf("consumer %s/%s missing: %s has not started", c.Stream, c.Name, c.Stage))
		}
	}
	out = append(out, r.Unread...)
	return slices.Clip(slices.DeleteFunc(out, func(s string) bool { return strings.TrimSpace(s) == "" }))
}

// plural is n with its noun: "1 log row", "2 log rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
