package jobmirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/outbox"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/prometheus/client_golang/prometheus"
)

// The triage invite sender (§3.1): "after the batch, the service calls
// TriageInviteService.ProcessQueueAsync() so that any triage invite queued
// by a status change goes out in the same pass". Here the commit of a
// change-job-status event that queued an invite kicks job-mirror's invite
// drainer, which posts it as JSON to TRIAGE_INVITE_SEND_URL with the SMS
// sender's guarantees (package delivery): claimed under a lease, retried
// with backoff, Failed for a person after its last attempt, an endpoint
// that is not there or not taking posts waited out without using an
// attempt, sent once and stamped sentUTC, a post in flight finishing at
// shutdown. A queued invite
// is a row of ethTriageInviteQueue, so a restart loses none: the drainer
// looks at the queue when it starts, and at least every
// TRIAGE_INVITE_SWEEP_INTERVAL.

// Invite is one triage invite handed to an InviteSender: its row, its job,
// the attempt, and the body to post.
type Invite struct {
	// ID is the ethTriageInviteQueue row, passed on so the endpoint can
	// tell a resend.
	ID    int64
	JobID string
	// Attempt counts from 1.
	Attempt int
	// Payload is the body posted (InvitePayload, JSON): built from the
	// mirror by the first claim that could, kept on the row, and posted
	// byte for byte on every attempt after.
	Payload json.RawMessage
	// unready says why the invite cannot be sent yet (readiness).
	unready error
}

// InviteContact is the person a triage invite goes to: the job's primary
// contact.
type InviteContact struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
	Email string `json:"email"`
}

// InviteSender sends one triage invite (delivery.Sender says what its
// errors mean).
type InviteSender = delivery.Sender[Invite]

// InvitePayload is the JSON body HTTPInvites posts, the same on every
// attempt (the attempt goes in delivery.AttemptHeader). The TriageInvite
// spec's endpoint was not available: this is the reading, kept in one place
// to correct (sql/README.md, "Triage invites").
type InvitePayload struct {
	// ID is the ethTriageInviteQueue row; Reference is
	// "primeflow-triage-invite-<id>", also the Idempotency-Key.
	ID        int64  `json:"id"`
	Reference string `json:"reference"`
	JobID     string `json:"jobId"`
	JobNumber string `json:"jobNumber"`
	// StatusID is the job's status when the invite was queued (the
	// Initial-Contact-Made status).
	StatusID string        `json:"statusId"`
	Contact  InviteContact `json:"contact"`
}

// InviteReference is the reference and idempotency key of an invite.
func InviteReference(id int64) string { return "primeflow-triage-invite-" + strconv.FormatInt(id, 10) }

// HTTPInvites posts each invite as JSON to TRIAGE_INVITE_SEND_URL.
type HTTPInvites struct{ p *delivery.Poster }

// NewHTTPInvites makes a sender for cfg (TRIAGE_INVITE_SEND_*). hc nil is a
// client with cfg's timeout.
func NewHTTPInvites(cfg delivery.HTTPConfig, hc *http.Client) (*HTTPInvites, error) {
	p, err := delivery.NewPoster(cfg, inviteKind.Prefix, hc)
	if err != nil {
		return nil, fmt.Errorf("job-mirror: %w", err)
	}
	return &HTTPInvites{p: p}, nil
}

// Send posts one invite.
func (s *HTTPInvites) Send(ctx context.Context, inv Invite) error {
	if err := s.p.Post(ctx, InviteReference(inv.ID), inv.Attempt, inv.Payload); err != nil {
		return fmt.Errorf("triage invite %d: %w", inv.ID, err)
	}
	return nil
}

// LogInvites logs each invite instead of sending it: bin/primeflow's stand-in
// on the Prime simulator when no TRIAGE_INVITE_SEND_URL is configured. It
// logs the invite, job and attempt, not the customer's details.
type LogInvites struct{ Log *slog.Logger }

// Send logs inv and accepts it.
func (s LogInvites) Send(_ context.Context, inv Invite) error {
	s.Log.Warn("TRIAGE_INVITE_SEND_URL is not set: triage invite logged, not sent", "invite", inv.ID, "jobId", inv.JobID, "attempt", inv.Attempt)
	return nil
}

// NotSent says it sends nothing (delivery.NotSender): the drainer records
// its invites Logged.
func (LogInvites) NotSent() string { return "no TRIAGE_INVITE_SEND_URL" }

// InviteSenderFor is the invite sender for cfg: with SEND_DRY_RUN a
// dryrun.Sink that records each invite; an HTTPInvites posting to
// TRIAGE_INVITE_SEND_URL; or, with no URL, LogInvites (bin/primeflow on the
// Prime simulator; job-mirror on a real Prime refuses to start without the
// URL, ValidateRealPrime).
func InviteSenderFor(cfg delivery.HTTPConfig, dry dryrun.Config, log *slog.Logger) (InviteSender, error) {
	if dry.Send {
		return dryrun.OpenSink[Invite](dry, "triage-invite", log)
	}
	if cfg.URL == "" {
		log.Warn("TRIAGE_INVITE_SEND_URL is not set: triage invites are logged, not sent")
		return LogInvites{Log: log}, nil
	}
	return NewHTTPInvites(cfg, nil)
}

// inviteKind is ethTriageInviteQueue as package delivery names it.
var inviteKind = delivery.Kind{Name: "triage invite", LogKey: "invite", Prefix: "TRIAGE_INVITE_", Table: "ethTriageInviteQueue"}

// newInviteDrainer is the invite drainer over st, sending with s; an invite
// waits for its primary contact at most contactWait. The invites of a sender
// that sends nothing (a delivery.NotSender: LogInvites, a dry run's
// recorder) are recorded Logged, never Sent.
func newInviteDrainer(cfg delivery.Config, contactWait time.Duration, st store.Store, pub *outbox.Publisher, s InviteSender, log *slog.Logger, reg prometheus.Registerer) (*delivery.Drainer[Invite], error) {
	q := inviteQueue{st: st, pub: pub, contactWait: contactWait}
	return delivery.NewDrainer(cfg, delivery.Options[Invite]{Kind: inviteKind, Queue: q,
		Sender: readiness{s}, NotSent: delivery.NotSentBy(s), Log: log, Collectors: inviteCollectors(), Registry: reg})
}

// readiness refuses an invite that cannot be sent yet before its sender
// sees it: it names nobody the mirror holds, or not yet.
type readiness struct{ next InviteSender }

func (r readiness) Send(ctx context.Context, inv Invite) error {
	if inv.unready != nil {
		return inv.unready
	}
	return r.next.Send(ctx, inv)
}

// errNoPrimaryContact: the job has no primary contact, so there is nobody to
// invite (refused for good: it waits, Failed, for a person).
var errNoPrimaryContact = errors.New("the job has no primary contact in the mirror: nobody to invite")

// inviteQueue is ethTriageInviteQueue as a delivery.Queue. A claimed invite with no body yet is completed from
// the mirror — the job's number and its primary contact's name, phone
// (mobile first) and email — and its body fixed on the row, so that every
// attempt posts the same bytes. A primary contact the mirror does not hold
// yet is a wait, no attempt (contactWaiting): the job's contacts are queued
// for the contacts drain (ethSyncQueue, handed on at once) unless they are
// queued already, and the invite is looked at again later, for up to
// TRIAGE_INVITE_CONTACT_WAIT.
type inviteQueue struct {
	st          store.Store
	pub         *outbox.Publisher
	contactWait time.Duration
}

func (q inviteQueue) Claim(ctx context.Context, now time.Time, lease time.Duration, maxAttempts, limit int) ([]delivery.Claim[Invite], error) {
	rows, err := q.st.ClaimTriageInvites(ctx, now, lease, maxAttempts, limit)
	if err != nil {
		return nil, err
	}
	out := make([]delivery.Claim[Invite], len(rows))
	for i, r := range rows {
		inv := Invite{ID: r.ID, JobID: r.JobID, Attempt: r.Attempts}
		if r.Payload != "" {
			inv.Payload = json.RawMessage(r.Payload)
		} else {
			inv.unready = q.build(ctx, r, &inv, now)
		}
		out[i] = delivery.Claim[Invite]{ID: r.ID, Attempt: r.Attempts, QueuedUTC: r.QueuedUTC, Msg: inv, Log: []any{"jobId", r.JobID}}
	}
	return out, nil
}

// build makes the invite's body from the mirror and fixes it on the row, or
// says why it cannot yet.
func (q inviteQueue) build(ctx context.Context, r store.TriageInvite, inv *Invite, now time.Time) error {
	p := InvitePayload{ID: r.ID, Reference: InviteReference(r.ID), JobID: r.JobID, StatusID: r.StatusID}
	if err := q.complete(ctx, r, &p, now); err != nil {
		return err
	}
	body, err := json.Marshal(p)
	if err != nil {
		return delivery.Permanent(fmt.Errorf("triage invite %d: %w", r.ID, err))
	}
	if err := q.st.SetTriageInvitePayload(ctx, r.ID, r.Attempts, string(body)); err != nil {
		return fmt.Errorf("triage invite %d: keep its body: %w", r.ID, err)
	}
	inv.Payload = body
	return nil
}

// complete fills in the job's number and its primary contact, or says why
// it cannot.
func (q inviteQueue) complete(ctx context.Context, r store.TriageInvite, p *InvitePayload, now time.Time) error {
	job, found, err := q.st.GetJob(ctx, r.JobID)
	switch {
	case err != nil:
		return fmt.Errorf("triage invite %d: read the job: %w", r.ID, err)
	case !found:
		return delivery.Permanent(fmt.Errorf("triage invite %d: job %s is not in the mirror", r.ID, r.JobID))
	case job.PrimaryContactID == "":
		return delivery.Permanent(fmt.Errorf("triage invite %d: %w", r.ID, errNoPrimaryContact))
	}
	p.JobNumber = job.JobNumber
	c, found, err := q.st.GetContact(ctx, job.PrimaryContactID)
	if err != nil {
		return fmt.Errorf("triage invite %d: read the primary contact: %w", r.ID, err)
	}
	if !found {
		return q.waitForContact(ctx, r, job.PrimaryContactID, now)
	}
	phone := c.Mobile
	if strings.TrimSpace(phone) == "" {
		phone = c.Phone
	}
	p.Contact = InviteContact{Name: c.Name, Phone: phone, Email: c.Email}
	if p.Contact.Name == "" {
		p.Contact.Name = strings.TrimSpace(c.FirstName + " " + c.LastName)
	}
	return nil
}

// waitForContact is an invite whose primary contact is not mirrored yet: a
// wait, with the job's contacts queued for their drain, as long as the
// drainer makes every wait (as long as the invite has waited so far,
// between the first and the last TRIAGE_INVITE_RETRY_BACKOFF); past
// TRIAGE_INVITE_CONTACT_WAIT since it was queued, a failure for good, for a
// person.
func (q inviteQueue) waitForContact(ctx context.Context, r store.TriageInvite, contactID string, now time.Time) error {
	waited := now.Sub(r.QueuedUTC)
	if waited >= q.contactWait {
		return delivery.Permanent(fmt.Errorf("triage invite %d: the primary contact %s was not mirrored within TRIAGE_INVITE_CONTACT_WAIT (%s)",
			r.ID, contactID, q.contactWait))
	}
	if err := q.syncContacts(ctx, r, now); err != nil {
		return fmt.Errorf("triage invite %d: the primary contact %s is not mirrored, and its sync could not be queued: %w", r.ID, contactID, err)
	}
	return contactWaiting(fmt.Sprintf("triage invite %d: waiting for the primary contact %s to be mirrored (the job's contacts are queued for a sync)",
		r.ID, contactID))
}

// contactWaiting is a retry.Waiter: the invite waits, no attempt counted,
// as long as the drainer's backoff for waits says (it asks for no more).
type contactWaiting string

func (w contactWaiting) Error() string           { return string(w) }
func (contactWaiting) RetryAfter() time.Duration { return 0 }

// syncContacts queues the job's contacts for the contacts drain and hands
// them on (§6: the drain the pipeline's items go to), unless they are queued
// already: the drain has them, and queueing them again would only make it
// fetch them again.
func (q inviteQueue) syncContacts(ctx context.Context, r store.TriageInvite, now time.Time) error {
	queued, err := q.st.ListSyncQueue(ctx, store.SyncQueueFilter{Object: store.TableContacts, JobID: r.JobID, Limit: 1})
	if err != nil || len(queued) > 0 {
		return err
	}
	body, err := json.Marshal(events.SyncQueued{JobID: r.JobID, Objects: []string{store.TableContacts}, Source: inviteSource})
	if err != nil {
		return err
	}
	_, err = q.pub.With("invite", r.ID, "jobId", r.JobID).InTx(ctx, q.st, "contacts sync hand-off", func(tx store.Store) error {
		if err := tx.UpsertSyncQueue(ctx, store.TableContacts, r.JobID); err != nil {
			return err
		}
		key := fmt.Sprintf("%d:%d", r.ID, now.UnixNano())
		_, err := tx.InsertOutbox(ctx, []store.OutboxMessage{outbox.Message(events.SubjectSyncQueued, events.SyncQueuedMsgID(inviteSource, key), body)})
		return err
	})
	return err
}

// inviteSource is the Source of the hand-offs the invite sender makes.
const inviteSource = "triage-invite"

func (q inviteQueue) SetSent(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.st.SetTriageInviteSent(ctx, id, attempt, at)
}

func (q inviteQueue) SetLogged(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.st.SetTriageInviteLogged(ctx, id, attempt, at)
}

func (q inviteQueue) SetFailed(ctx context.Context, id int64, attempt int, cause string, retryAt, at time.Time) error {
	return q.st.SetTriageInviteFailed(ctx, id, attempt, cause, retryAt, at)
}

func (q inviteQueue) Release(ctx context.Context, id int64, attempt int, at time.Time) error {
	return q.st.ReleaseTriageInvite(ctx, id, attempt, at)
}

func (q inviteQueue) Defer(ctx context.Context, id int64, attempt int, cause string, until, at time.Time) error {
	return q.st.DeferTriageInvite(ctx, id, attempt, cause, until, at)
}

func (q inviteQueue) NextDue(ctx context.Context) (time.Time, bool, error) {
	return q.st.NextTriageInviteDue(ctx)
}

func (q inviteQueue) Count(ctx context.Context) (map[store.SendState]int, error) {
	return q.st.CountTriageInvites(ctx)
}

func (q inviteQueue) Oldest(ctx context.Context) (time.Time, bool, error) {
	return q.st.OldestTriageInviteWaiting(ctx)
}

// inviteCollectors are the primeflow_triage_invites_* metrics.
func inviteCollectors() delivery.Collectors {
	return delivery.Collectors{
		Sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_triage_invites_sent_total",
			Help: "Triage invites TRIAGE_INVITE_SEND_URL accepted (§3.1).",
		}),
		Logged: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_triage_invites_logged_total",
			Help: "Triage invites logged or recorded instead of sent: no TRIAGE_INVITE_SEND_URL (bin/primeflow on the Prime simulator), or a dry run (SEND_DRY_RUN).",
		}),
		Failed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_triage_invites_failed_total",
			Help: "Triage invites given up on (attempts used up, refused for good, nobody to invite, or a primary contact not mirrored within TRIAGE_INVITE_CONTACT_WAIT); they stay Failed in ethTriageInviteQueue for a person.",
		}),
		Retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_triage_invites_send_retries_total",
			Help: "Failed triage invite sends that will be tried again (the endpoint's errors; an invite that waits is no failure).",
		}),
		Waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "primeflow_triage_invites_send_waits_total",
			Help: "Triage invite sends deferred, no attempt counted: the endpoint not there or not taking posts (no connection, 429, 502, 503, 504), or the primary contact not mirrored yet.",
		}),
		Handoff: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "primeflow_triage_invites_handoff_seconds",
			Help:    "Time from a triage invite being queued (the change-job-status commit) to its first hand-off to the sender.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 16),
		}),
		Queue: prometheus.NewDesc("primeflow_triage_invites_queue",
			"Triage invites in ethTriageInviteQueue by state: Queued, Sending, Sent, Logged (logged or recorded, never sent: no TRIAGE_INVITE_SEND_URL, or SEND_DRY_RUN), Failed (Failed waits for a person: the customer was never invited; primectl invites requeue or dismiss), Dismissed (a person closed it unsent).",
			[]string{"state"}, nil),
		Oldest: prometheus.NewDesc("primeflow_triage_invites_oldest_waiting_seconds",
			"How long the oldest triage invite not sent yet (Queued or Sending in ethTriageInviteQueue) has waited since it was queued; 0 when none waits.",
			nil, nil),
	}
}
