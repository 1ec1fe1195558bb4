package store

import (
	"context"
	"time"
)

// Outcomes of an email receipt (EmailReceipt.Outcome).
const (
	// EmailPending: read, not done yet (or reopened: a person moved the
	// message back into the folder).
	EmailPending = "Pending"
	// EmailProcessed: the job is mirrored and its hand-offs committed; the
	// message goes to the processed folder.
	EmailProcessed = "Processed"
	// EmailFailed: it failed its last attempt, or cannot be read (too
	// large); the message goes to the failed folder, LastError says why.
	// It waits for a person: moved back into the folder it is tried
	// afresh, or it is dismissed.
	EmailFailed = "Failed"
	// EmailRejected: refused unread, as not Prime's (not from
	// MAIL_ALLOWED_SENDERS, or not authenticated for its sender); the
	// message goes to the failed folder, LastError says why. Junk needs
	// nobody: it is counted, never a person's to clear.
	EmailRejected = "Rejected"
	// EmailDismissed: it failed, and a person closed its receipt
	// (Resolutions): they dealt with the message another way (moved it,
	// made the job by hand) or it is junk. It waits for nobody; moved back
	// into the folder it is tried afresh, as a Failed one is.
	EmailDismissed = "Dismissed"
)

// MaxEmailErrorLen is how much of an error a receipt keeps.
const MaxEmailErrorLen = 2000

// EmailReceipt is a row of PrimeEmailJobRegistered: the receipt of one of
// Prime's new-job emails (§7), keyed by its internetMessageId. The spec's
// receipt keeps the body preview; the rest is primeflow's (sql/README.md).
type EmailReceipt struct {
	ID                int64
	InternetMessageID string
	Subject           string
	// ReceivedUTC is the message's receivedDateTime.
	ReceivedUTC time.Time
	From        string
	BodyPreview string
	// JobID, JobIDKind, NumericReference and JobNumber are what Extract
	// JobID found (empty until it ran, or when it found nothing).
	JobID            string
	JobIDKind        string
	NumericReference int64
	JobNumber        string
	// PrimeJobID is the job's GUID once the job is mirrored.
	PrimeJobID string
	// Outcome is EmailPending, EmailProcessed, EmailFailed, EmailRejected
	// or EmailDismissed.
	Outcome string
	// LastError is the last failure, cut to MaxEmailErrorLen.
	LastError string
	// Attempts counts the failed attempts.
	Attempts int
	// MovedUTC is when the message was moved out of the folder, to MovedTo
	// (EmailProcessed or EmailFailed: the folder it went to, a rejected
	// message's too); zero while it is in the folder.
	MovedUTC      time.Time
	MovedTo       string
	RegisteredUTC time.Time
	UpdatedUTC    time.Time
}

// EmailReceipts is PrimeEmailJobRegistered.
type EmailReceipts interface {
	// RegisterEmail records a message's receipt unless one is recorded
	// under its InternetMessageID, and returns the receipt as stored
	// (spPrimeEmailJobRegisteredInsert): inserted says this call made it.
	// Of the given receipt it stores the message's fields only (id,
	// subject, received, from, preview); the row starts EmailPending.
	RegisterEmail(ctx context.Context, r EmailReceipt) (stored EmailReceipt, inserted bool, err error)
	// UpdateEmailReceipt writes what became of the message whose
	// InternetMessageID r has: the JobID fields, PrimeJobID, Outcome,
	// LastError (cut to MaxEmailErrorLen), Attempts, MovedUTC and MovedTo.
	// A message never registered is ErrNotFound.
	UpdateEmailReceipt(ctx context.Context, r EmailReceipt) error
	// GetEmailReceipt returns a message's receipt; found is false when
	// there is none.
	GetEmailReceipt(ctx context.Context, internetMessageID string) (r EmailReceipt, found bool, err error)
}
