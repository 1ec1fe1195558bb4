package sqlite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// SaveContact upserts a contact.
func (s *Store) SaveContact(ctx context.Context, c store.Contact) error {
	if c.ContactID == "" {
		return errors.New("sqlite: save contact: no id")
	}
	_, err := s.w().ExecContext(ctx, `INSERT INTO primeContacts
		(contactId, name, firstName, lastName, email, mobile, phone, attributes, syncedUTC)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (contactId) DO UPDATE SET
			name = excluded.name, firstName = excluded.firstName, lastName = excluded.lastName,
			email = excluded.email, mobile = excluded.mobile, phone = excluded.phone,
			attributes = excluded.attributes, syncedUTC = excluded.syncedUTC`,
		mirrorGUID(c.ContactID), nullString(c.Name), nullString(c.FirstName), nullString(c.LastName), nullString(c.Email),
		nullString(c.Mobile), nullString(c.Phone), nullString(c.Attributes), formatTime(time.Now()))
	if err != nil {
		return fmt.Errorf("sqlite: save contact: %w", err)
	}
	return nil
}

// GetContact reads one contact.
func (s *Store) GetContact(ctx context.Context, id string) (store.Contact, bool, error) {
	return queryOne(ctx, s.r(), "get contact", `SELECT contactId, name, firstName, lastName, email, mobile, phone,
		attributes, syncedUTC FROM primeContacts WHERE contactId = ?`, func(sc sqlrows.Scanner) (store.Contact, error) {
		var c store.Contact
		err := sc.Scan(&c.ContactID, scanString{&c.Name}, scanString{&c.FirstName}, scanString{&c.LastName}, scanString{&c.Email},
			scanString{&c.Mobile}, scanString{&c.Phone}, scanString{&c.Attributes}, scanTime{&c.SyncedUTC})
		return c, err
	}, mirrorGUID(id))
}

// ReplaceJobContactRelationships makes the job's relationships exactly rels.
func (s *Store) ReplaceJobContactRelationships(ctx context.Context, jobID string, rels []store.ContactRelationship) error {
	if jobID == "" {
		return errors.New("sqlite: replace job contact relationships: no job id")
	}
	return replaceRows(ctx, s, "replace job contact relationships", `DELETE FROM primeContactRelationships WHERE jobId = ?`,
		[]any{mirrorGUID(jobID)}, `INSERT INTO primeContactRelationships
			(contactRelationshipId, jobId, contactId, relationshipType, attributes, syncedUTC)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (contactRelationshipId) DO UPDATE SET
				jobId = excluded.jobId, contactId = excluded.contactId,
				relationshipType = excluded.relationshipType, attributes = excluded.attributes,
				syncedUTC = excluded.syncedUTC`, rels,
		func(r store.ContactRelationship, now string) ([]any, error) {
			if r.ContactRelationshipID == "" {
				return nil, errors.New("a contact relationship has no id")
			}
			return []any{mirrorGUID(r.ContactRelationshipID), mirrorGUID(jobID), mirrorGUID(r.ContactID),
				nullString(r.RelationshipType), nullString(r.Attributes), now}, nil
		})
}

// ListJobContactRelationships reads a job's relationships, by id.
func (s *Store) ListJobContactRelationships(ctx context.Context, jobID string) ([]store.ContactRelationship, error) {
	return queryAll(ctx, s.r(), "list job contact relationships", `SELECT contactRelationshipId, jobId, contactId,
		relationshipType, attributes, syncedUTC FROM primeContactRelationships WHERE jobId = ? ORDER BY contactRelationshipId`,
		func(sc sqlrows.Scanner) (store.ContactRelationship, error) {
			var r store.ContactRelationship
			err := sc.Scan(&r.ContactRelationshipID, scanString{&r.JobID}, scanString{&r.ContactID},
				scanString{&r.RelationshipType}, scanString{&r.Attributes}, scanTime{&r.SyncedUTC})
			return r, err
		}, mirrorGUID(jobID))
}
