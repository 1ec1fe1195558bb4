package store

import (
	"context"
	"time"
)

// Contact is a row of primeContacts (§5.2 contact sync).
type Contact struct {
	ContactID string
	Name      string
	FirstName string
	LastName  string
	Email     string
	Mobile    string
	Phone     string
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row.
	SyncedUTC time.Time
}

// ContactRelationship is a row of primeContactRelationships: a contact's
// link to a job.
type ContactRelationship struct {
	ContactRelationshipID string
	JobID                 string
	ContactID             string
	RelationshipType      string
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row.
	SyncedUTC time.Time
}

// Contacts is the contact mirror: primeContacts and primeContactRelationships.
type Contacts interface {
	// SaveContact inserts the contact or updates the row with its id.
	SaveContact(ctx context.Context, c Contact) error
	// GetContact returns a mirrored contact; found is false when
	// primeContacts has no row for it.
	GetContact(ctx context.Context, contactID string) (c Contact, found bool, err error)
	// ReplaceJobContactRelationships makes the job's relationships exactly
	// rels, in one transaction: Prime lists a job's relationships as they
	// are now, so one it no longer lists is deleted. Each is stored with jobID.
	ReplaceJobContactRelationships(ctx context.Context, jobID string, rels []ContactRelationship) error
	// ListJobContactRelationships returns a job's relationships, by id.
	ListJobContactRelationships(ctx context.Context, jobID string) ([]ContactRelationship, error)
}
