// Package status is the pipeline's state at a glance: what `primectl
// status` prints (and --json gives as JSON) and bin/primeflow's page at /
// shows. Gather reads a Report from the store (store.Overview), from
// JetStream (each stage's consumer lag, the locks held, whether the NATS is
// the database's: pkg/instance), from wherever the Prime budget is read and
// from ingest; a part it cannot read is named in Report.Unreachable (NATS,
// ingest) or Report.Unread (the rest), and the rest is still given.
// Report.NeedsPerson is what waits for a person, and Report.Verdict what the
// report comes to, as primectl status's exit status says it.
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
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/instance"
	"github.com/ethosbuilding/primeflow/pkg/lock"
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is the pipeline's state at a glance. Every text in it that comes
// from stored data (errors, actions) is as stored: a printer escapes it.
type Report struct {
	At time.Time `json:"at"`
	// Instance is what the database and the NATS read say of the instance
	// they are (pkg/instance); nil when NATS was not read.
	Instance  *instance.Pairing `json:"instance,omitempty"`
	Log       Log               `json:"log"`
	Consumers []Consumer        `json:"consumers"`
	Outbox    Outbox            `json:"outbox"`
	Locks     []Lock            `json:"locks"`
	SMS       SMS               `json:"sms"`
	Invites   Invites           `json:"invites"`
	Emails    Emails            `json:"emails"`
	// PlanDates are optimoRoutePlan's dates by status.
	PlanDates   []PlanDates `json:"planDates"`
	PrimeBudget *Budget     `json:"primeBudget"`
	// LastErrors is each stage's newest error still standing.
	LastErrors []StageError `json:"lastErrors"`
	// NeedsPerson is what waits for a person, one line each: what does not
	// clear by itself (a row at the attempt cap, an SMS, invite or email
	// given up on, a service that never started). Each line says how a
	// person clears it: a capped row replayed, an SMS or invite requeued or
	// dismissed, an email moved back or dismissed (store.Resolutions), after
	// which it is counted no more.
	NeedsPerson []string `json:"needsPerson"`
	// Unreachable names what could not be asked, and why: NATS (the
	// consumers and the locks), ingest, or a NATS that is not the
	// database's instance's. The rest of the report cannot be trusted to
	// be the whole story.
	Unreachable []string `json:"unreachable,omitempty"`
	// Unread names each other part that could not be read, and why.
	Unread []string `json:"unread,omitempty"`
}

// Verdict is what a report comes to.
type Verdict int

// The verdicts, as primectl status's exit status gives them.
const (
	// AllWell: everything was read and nothing waits for a person.
	AllWell Verdict = 0
	// NeedsAPerson: something in NeedsPerson.
	NeedsAPerson Verdict = 1
	// CannotTell: something in Unreachable.
	CannotTell Verdict = 2
)

// Verdict is CannotTell when anything is Unreachable, else NeedsAPerson
// when anything waits for a person, else AllWell.
func (r Report) Verdict() Verdict {
	switch {
	case len(r.Unreachable) > 0:
		return CannotTell
	case len(r.NeedsPerson) > 0:
		return NeedsAPerson
	}
	return AllWell
}

// Healthy reports whether the verdict is AllWell.
func (r Report) Healthy() bool { return r.Verdict() == AllWell }

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
	// once and not yet acked, less the Kept.
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ackPending"`
	Redelivered int    `json:"redelivered"`
	// Kept are the sync drains' redeliveries that are the §7/§9 grace, not
	// trouble: hand-offs whose items were queued within
	// SYNC_DRAIN_EMPTY_GRACE are kept for a later pass while Prime has
	// nothing yet. Counted as at most one a job with an item queued within
	// the grace (store.Overview.SyncQueueRecentJobs), for the sync drains'
	// consumer only.
	Kept int `json:"kept,omitempty"`
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

// SMS is smsQueue by state, and the oldest message not sent yet.
type SMS struct {
	ByState map[string]int `json:"byState"`
	Failed  int            `json:"failed"`
	// OldestWaitingUTC is when the oldest message not sent yet (Queued or
	// Sending) was queued; nil when none waits. One that waits out an
	// endpoint not taking posts is not Failed: its wait shows here.
	OldestWaitingUTC *time.Time `json:"oldestWaitingUTC,omitempty"`
}

// SMSWaitTooLong is how long a message may wait to be sent before the
// report says it needs a person (the on-call may not know): compose's
// PrimeflowSMSWaiting alert fires at the same age.
const SMSWaitTooLong = 15 * time.Minute

// Invites is the triage invite queue (§5.1 step 6): Pending counts those
// not sent, Failed those of them given up on.
type Invites struct {
	Pending int `json:"pending"`
	Failed  int `json:"failed"`
	// OldestWaitingUTC is when the oldest invite not sent yet (Queued or
	// Sending) was queued; nil when none waits.
	OldestWaitingUTC *time.Time `json:"oldestWaitingUTC,omitempty"`
}

// Emails are the new-job emails given up on (§7): Failed counts them,
// LastFailed is the newest; nil when none. Rejected counts the emails
// refused unread as not Prime's: junk, which needs nobody.
type Emails struct {
	Failed     int    `json:"failed"`
	LastFailed *Email `json:"lastFailed,omitempty"`
	Rejected   int    `json:"rejected"`
}

// Email is a new-job email as status names it.
type Email struct {
	Subject     string     `json:"subject"`
	ReceivedUTC *time.Time `json:"receivedUTC,omitempty"`
	Attempts    int        `json:"attempts"`
	Error       string     `json:"error"`
	// MovedTo is the folder it went to ("" while it is still in
	// MAIL_FOLDER: it moves at the next poll).
	MovedTo string `json:"movedTo,omitempty"`
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
	// UnreachableSince is when Prime stopped answering (a 5xx or no
	// answer, none answered since: pkg/prime), as the Prime client of the
	// process whose metrics were read saw it; nil while it answers, or when
	// no such metrics were read.
	UnreachableSince *time.Time `json:"unreachableSince,omitempty"`
}

// DefaultSyncGrace is the sync drains' SYNC_DRAIN_EMPTY_GRACE when it is
// not set: child-mirror's default, which primectl status reads too (a test
// on each side holds it to this).
const DefaultSyncGrace = 15 * time.Minute

// Sources are where Gather reads.
type Sources struct {
	// Store is the database: its overview, and the instance it is paired
	// with.
	Store interface {
		store.Status
		store.Settings
	}
	// JS reads the consumers, the locks and the instance; nil, they are
	// Unreachable (with JSErr's reason when set).
	JS    jetstream.JetStream
	JSErr error
	// Budget reads the Prime budget; nil leaves it out.
	Budget func(context.Context) (*Budget, error)
	// Ingest asks whether ingest answers (Livez); nil does not ask (the
	// status page of bin/primeflow, which is ingest).
	Ingest func(context.Context) error
	// SyncGrace is the drains' SYNC_DRAIN_EMPTY_GRACE: the sync drains'
	// redeliveries within it are Kept, not trouble. 0 keeps none.
	SyncGrace time.Duration
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
	var q store.OverviewQuery
	if src.SyncGrace > 0 {
		q.SyncQueuedSince = r.At.Add(-src.SyncGrace)
	}
	o, err := src.Store.StatusOverview(ctx, q)
	if err != nil {
		return r, err
	}
	r.fromOverview(o)
	if src.JS == nil {
		r.Unreachable = append(r.Unreachable, "consumers and locks: "+cmp.Or(errString(src.JSErr), "no NATS"))
	} else {
		r.Consumers, err = consumers(ctx, src.JS)
		if err != nil {
			r.Unreachable = append(r.Unreachable, "consumers: "+err.Error())
		}
		r.keep(o.SyncQueueRecentJobs)
		r.Locks, err = locks(ctx, src.JS)
		if err != nil {
			r.Unreachable = append(r.Unreachable, "locks: "+err.Error())
		}
		r.pairing(ctx, src)
	}
	if src.Budget != nil {
		if r.PrimeBudget, err = src.Budget(ctx); err != nil {
			r.Unread = append(r.Unread, "Prime budget: "+err.Error())
		}
	}
	if src.Ingest != nil {
		if err := src.Ingest(ctx); err != nil {
			r.Unreachable = append(r.Unreachable, "ingest: "+err.Error())
		}
	}
	r.NeedsPerson = r.problems()
	return r, nil
}

// keep takes the sync drains' redeliveries that are the grace out of
// their Redelivered (Consumer.Kept): at most one a job queued within it.
func (r *Report) keep(recentJobs int) {
	for i, c := range r.Consumers {
		if c.Stream == events.ConsumerSyncDrain.Stream && c.Name == events.ConsumerSyncDrain.Durable {
			kept := min(c.Redelivered, recentJobs)
			r.Consumers[i].Kept, r.Consumers[i].Redelivered = kept, c.Redelivered-kept
		}
	}
}

// pairing reads whether the NATS is the database's instance's; one that is
// another's is Unreachable: the database's own NATS was not asked.
func (r *Report) pairing(ctx context.Context, src Sources) {
	p, err := instance.Check(ctx, src.JS, src.Store)
	if err != nil {
		r.Unread = append(r.Unread, "instance: "+err.Error())
		return
	}
	r.Instance = &p
	if !p.Same() {
		r.Unreachable = append(r.Unreachable, fmt.Sprintf("NATS is not this database's: its %s stream was created at %s, "+
			"the database's at %s — another instance's NATS (NATS_URL, NATS_LISTEN), or the stream was made anew "+
			"and no resolver has started since (its start pairs them again)", events.StreamWebhook, p.NATS, p.Database))
	}
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
	r.SMS = SMS{ByState: map[string]int{}, Failed: o.SMS[store.SendFailed], OldestWaitingUTC: timeOrNil(o.SMSOldestWaitingUTC)}
	for st, n := range o.SMS {
		r.SMS.ByState[string(st)] = n
	}
	r.Invites = Invites{Pending: o.InvitesPending, Failed: o.InvitesFailed, OldestWaitingUTC: timeOrNil(o.InvitesOldestWaitingUTC)}
	r.Emails = Emails{Failed: o.EmailsFailed, Rejected: o.EmailsRejected}
	if e := o.EmailLastFailed; e.ID != 0 {
		r.Emails.LastFailed = &Email{Subject: e.Subject, ReceivedUTC: timeOrNil(e.ReceivedUTC), Attempts: e.Attempts,
			Error: e.LastError, MovedTo: e.MovedTo}
	}
	r.PlanDates = []PlanDates{}
	for _, p := range o.PlanDates {
		r.PlanDates = append(r.PlanDates, PlanDates{Status: p.Status, Dates: p.Dates, Earliest: p.Earliest})
	}
	r.LastErrors = []StageError{}
	for _, f := range o.Failing {
		stage, msg := StageOfRow(f)
		r.LastErrors = append(r.LastErrors, StageError{Stage: stage,
			What:  fmt.Sprintf("log row %d (%s), attempt %d of %d", f.ID, cmp.Or(f.EventAction, "no eventAction"), f.ProcessAttempts, store.MaxAttempts),
			Error: msg, At: timeOrNil(f.ReceivedUTC)})
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
	if e := r.Emails.LastFailed; e != nil {
		r.LastErrors = append(r.LastErrors, StageError{Stage: events.RoleMailIntake.Name,
			What:  fmt.Sprintf("email %q (%d failed)", e.Subject, o.EmailsFailed),
			Error: e.Error, At: e.ReceivedUTC})
	}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// StageOfRow is the stage a failing log row's error is from, and the error
// without its name: the service the recorded error names
// (pipeline.RecordedError: a payload fault the resolver met on a
// create-appointment row is the resolver's), or for an error recorded
// without one, the stage of its action (StageOf).
func StageOfRow(r store.WebhookLogRow) (stage, err string) {
	var names []string
	for _, role := range events.ServiceRoles {
		names = append(names, role.Name)
	}
	if stage, err = pipeline.FailedBy(r.ProcessStatus, names); stage != "" {
		return stage, err
	}
	return StageOf(r.EventAction), r.ProcessStatus
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
			info, err := c.Info(ctx, js)
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
				row.Missing = true
				out = append(out, row)
				continue
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%s: %w", c.Stream, c.Durable, err))
				continue
			}
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

// smsWaited is how long the oldest message not sent yet has waited at the
// report's time; 0 when none waits.
func (r Report) smsWaited() time.Duration {
	if r.SMS.OldestWaitingUTC == nil {
		return 0
	}
	return r.At.Sub(*r.SMS.OldestWaitingUTC)
}

// problems lists what waits for a person, one line a kind, each naming
// where to look (Report.NeedsPerson).
func (r Report) problems() []string {
	out := []string{}
	if r.Log.Capped > 0 {
		out = append(out, fmt.Sprintf("%s failed %d times, not retried until replayed: primectl list --state capped",
			plural(r.Log.Capped, "log row"), store.MaxAttempts))
	}
	if r.SMS.Failed > 0 {
		out = append(out, plural(r.SMS.Failed, "SMS message")+" failed for good: primectl sms --failed; phone the on-call, then "+
			"primectl sms requeue ID (sent again) or primectl sms dismiss ID --reason … for each")
	}
	if w := r.smsWaited(); w >= SMSWaitTooLong {
		out = append(out, fmt.Sprintf("an SMS has waited %s to be sent: the on-call may not know; it goes, with no attempt used, when the SMS endpoint takes posts again (the SMS's last error says why it waits)",
			w.Round(time.Second)))
	}
	if r.Invites.Failed > 0 {
		out = append(out, plural(r.Invites.Failed, "triage invite")+" failed for good: primectl invites --failed; invite those customers another way "+
			"and primectl invites dismiss ID --reason …, or fix the cause and primectl invites requeue ID")
	}
	if r.Emails.Failed > 0 {
		out = append(out, plural(r.Emails.Failed, "new-job email")+" failed for good, in MAIL_FAILED_FOLDER (receipts Failed in "+
			"PrimeEmailJobRegistered: primectl emails --failed): fix the cause, then move each back into MAIL_FOLDER to try it again, "+
			"or primectl emails dismiss ID --reason … (junk, or dealt with by hand)")
	}
	for _, c := range r.Consumers {
		if c.Missing {
			out = append(out, fmt.Sprintf("consumer %s/%s of %s missing: run %s", c.Stream, c.Name, c.Stage, events.ApplyCommand))
		}
	}
	return out
}

// Waits lists what the pipeline waits out now, one line each: a fault that
// is not the work's own, which counts no attempt and needs no person while
// it lasts — Prime not answering.
func (r Report) Waits() []string {
	var out []string
	if b := r.PrimeBudget; b != nil && b.UnreachableSince != nil {
		out = append(out, fmt.Sprintf("Prime has not answered for %s (since %s UTC): the events and queue items that need it wait, no attempt counted, and one call at a time tries it again",
			r.At.Sub(*b.UnreachableSince).Round(time.Second), b.UnreachableSince.UTC().Format(time.DateTime)))
	}
	return out
}

// plural is n with its noun: "1 log row", "2 log rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
