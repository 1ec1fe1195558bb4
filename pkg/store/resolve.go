package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Resolvable names a table whose rows can wait for a person: a Failed SMS
// or triage invite, a new-job email whose receipt is Failed. primectl
// status counts them under "needs a person" until a person resolves each
// (Resolutions).
type Resolvable string

// The tables a person resolves rows of.
const (
	ResolvableSMS          = Resolvable(ArchiveSMS)
	ResolvableTriageInvite = Resolvable(ArchiveTriageInvites)
	ResolvableEmailReceipt = Resolvable(ArchiveEmailReceipts)
)

// How long who resolved a row, and why, may be (primeflowResolution's
// columns).
const (
	MaxResolutionByLen     = 200
	MaxResolutionReasonLen = 500
)

// Noun is what a row of the table is called in a message.
func (t Resolvable) Noun() string {
	switch t {
	case ResolvableSMS:
		return "sms"
	case ResolvableTriageInvite:
		return "triage invite"
	case ResolvableEmailReceipt:
		return "email receipt"
	}
	return string(t)
}

// ResolveAction is what a person did with a row that waited for them.
type ResolveAction string

// The actions.
const (
	// ResolveRequeue sends a Failed SMS or triage invite again: queued
	// anew — Queued, due at once, its QueuedUTC the requeue's time (its
	// wait, and an invite's TRIAGE_INVITE_CONTACT_WAIT, count from then),
	// its attempts back to 0 (the sender's whole MAX_ATTEMPTS) — under the
	// same id and so the same Idempotency-Key; an invite posts the body
	// fixed on its row, if its first claim fixed one. LastError and
	// FailedUTC stay, saying what happened before.
	ResolveRequeue ResolveAction = "Requeued"
	// ResolveDismiss closes a row without sending it: the person dealt with
	// it another way (phoned the on-call, invited the customer, made the
	// job by hand, or the email was junk). The row stays, in SendDismissed
	// or EmailDismissed, and is counted nowhere as waiting.
	ResolveDismiss ResolveAction = "Dismissed"
)

// Resolution is a person's answer to a row that waited for one, as
// primeflowResolution records it.
type Resolution struct {
	ID     int64
	Table  Resolvable
	RowID  int64
	Action ResolveAction
	// By is who, as far as the command line knows (primectl: the OS user
	// and host, or its --by), at most MaxResolutionByLen characters.
	By string
	// Reason is why, at most MaxResolutionReasonLen characters: required
	// for a dismissal.
	Reason string
	// ResolvedUTC is when; zero, Resolve takes the database's clock.
	ResolvedUTC time.Time
}

// Check refuses a resolution no table takes: an unknown table or action,
// a requeue of an email (the mail intake reads a message again only when a
// person moves it back into MAIL_FOLDER: primeflow cannot move it), a
// dismissal without a reason, no one named, or a text too long for its
// column (refused, not cut).
func (r Resolution) Check() error {
	var errs []error
	switch r.Table {
	case ResolvableSMS, ResolvableTriageInvite, ResolvableEmailReceipt:
	default:
		errs = append(errs, fmt.Errorf("%q is not a table whose rows a person resolves", r.Table))
	}
	switch {
	case r.Action == ResolveRequeue && r.Table == ResolvableEmailReceipt:
		errs = append(errs, errors.New("an email is tried again when a person moves it back into MAIL_FOLDER, not requeued"))
	case r.Action == ResolveDismiss && r.Reason == "":
		errs = append(errs, errors.New("a dismissal needs a reason"))
	case r.Action != ResolveRequeue && r.Action != ResolveDismiss:
		errs = append(errs, fmt.Errorf("%q is not an action (%s, %s)", r.Action, ResolveRequeue, ResolveDismiss))
	}
	if r.RowID <= 0 {
		errs = append(errs, fmt.Errorf("%d is not a row id", r.RowID))
	}
	if r.By == "" {
		errs = append(errs, errors.New("no one named as resolving it"))
	}
	if n := utf8.RuneCountInString(r.By); n > MaxResolutionByLen {
		errs = append(errs, fmt.Errorf("who resolved it is %d characters, more than %d", n, MaxResolutionByLen))
	}
	if n := utf8.RuneCountInString(r.Reason); n > MaxResolutionReasonLen {
		errs = append(errs, fmt.Errorf("the reason is %d characters, more than %d", n, MaxResolutionReasonLen))
	}
	return errors.Join(errs...)
}

// ErrNotResolvable: the row waits for no person, or not for a person yet
// (it is not Failed; a Failed email still in MAIL_FOLDER is the mail
// intake's until it moves it). Nothing was written.
var ErrNotResolvable = errors.New("waits for no person")

// Unresolved is why Resolve changed nothing, for an adapter to return from
// what it read of the row: ErrNotFound when there is none, else
// ErrNotResolvable with the row's state (inFolder: an email's receipt
// whose message is still in MAIL_FOLDER).
func Unresolved(r Resolution, found bool, state string, inFolder bool) error {
	what := r.Table.Noun() + " " + strconv.FormatInt(r.RowID, 10)
	switch {
	case !found:
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case inFolder:
		return fmt.Errorf("%s is %s and still in MAIL_FOLDER, which mail-intake moves it out of at its next poll: %w", what, state, ErrNotResolvable)
	}
	return fmt.Errorf("%s is %s, not %s: %w", what, state, SendFailed, ErrNotResolvable)
}

// Resolutions are a person's answers to the rows that wait for one
// (primectl sms, invites, emails: requeue, dismiss). Each is recorded in
// primeflowResolution — who, when, why — in the transaction that changes
// the row, and the row stays, queryable as it was but for its state.
type Resolutions interface {
	// Resolve applies r.Action to the row, if it is Failed (and, for an
	// email's receipt, moved out of MAIL_FOLDER), and records r, in one
	// transaction; it returns the record's id. A requeued SMS or invite is
	// SendQueued, queued and due at r.ResolvedUTC, with 0 attempts; a dismissed one is
	// SendDismissed, a dismissed receipt EmailDismissed. It refuses what
	// r.Check refuses, before the database sees it; a row that is not
	// there is ErrNotFound, one that waits for no person ErrNotResolvable
	// (Unresolved).
	Resolve(ctx context.Context, r Resolution) (id int64, err error)
	// ListResolutions returns the resolutions of table's rows with these
	// ids (at most MaxArchiveBatch), oldest first.
	ListResolutions(ctx context.Context, table Resolvable, rowIDs []int64) ([]Resolution, error)
	// ListSMSQueue returns up to limit messages, oldest first, as
	// ListTriageInviteQueue returns invites: InvitesPending those not sent
	// (Queued, Sending, Failed), InvitesFailed the Failed ones, InvitesAll
	// every one.
	ListSMSQueue(ctx context.Context, state InviteListState, limit int) ([]SMSMessage, error)
	// ListEmailReceipts returns up to limit receipts, oldest first:
	// InvitesPending those not done (EmailPending, EmailFailed),
	// InvitesFailed the Failed ones, InvitesAll every one. (The mail
	// intake's store is EmailReceipts alone: it lists nothing.)
	ListEmailReceipts(ctx context.Context, state InviteListState, limit int) ([]EmailReceipt, error)
}
