package mssql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// relationshipJSON is one relationship as
// spPrimeflowReplaceJobContactRelationships reads it.
type relationshipJSON struct {
	ContactRelationshipID *string `json:"contactRelationshipId"`
	ContactID             *string `json:"contactId"`
	RelationshipType      *string `json:"relationshipType"`
	Attributes            *string `json:"attributes"`
}

// SaveContact upserts a contact (spPrimeflowSaveContact).
func (s *Store) SaveContact(ctx context.Context, c store.Contact) error {
	id, err := parseGUID(c.ContactID)
	if err != nil {
		return err
	}
	if _, err := s.q().ExecContext(ctx, procSaveContact, sql.Named("ContactId", id),
		sql.Named("Name", sqlString(c.Name)), sql.Named("FirstName", sqlString(c.FirstName)),
		sql.Named("LastName", sqlString(c.LastName)), sql.Named("Email", sqlString(c.Email)),
		sql.Named("Mobile", sqlString(c.Mobile)), sql.Named("Phone", sqlString(c.Phone)),
		sql.Named("Attributes", sqlString(c.Attributes))); err != nil {
		return fmt.Errorf("mssql: save contact: %w", err)
	}
	return nil
}

// GetContact reads one contact (spPrimeflowGetContact).
func (s *Store) GetContact(ctx context.Context, contactID string) (store.Contact, bool, error) {
	id, ok := keyGUID(contactID)
	if !ok {
		return store.Contact{}, false, nil
	}
	var c store.Contact
	found, err := s.getOne(ctx, "get contact", procGetContact, []any{
		scanGUID{&c.ContactID}, scanString{&c.Name}, scanString{&c.FirstName}, scanString{&c.LastName},
		scanString{&c.Email}, scanString{&c.Mobile}, scanString{&c.Phone}, scanString{&c.Attributes},
		scanTime{&c.SyncedUTC},
	}, sql.Named("ContactId", id))
	if !found || err != nil {
		return store.Contact{}, false, err
	}
	return c, true, nil
}

// ReplaceJobContactRelationships makes the job's relationships exactly rels
// (spPrimeflowReplaceJobContactRelationships). A relationship given twice is
// stored as its last copy.
func (s *Store) ReplaceJobContactRelationships(ctx context.Context, jobID string, rels []store.ContactRelationship) error {
	job, err := parseGUID(jobID)
	if err != nil {
		return err
	}
	list, err := jsonRows(rels, func(r store.ContactRelationship) (string, relationshipJSON, error) {
		id, err := requiredGUID("contact relationship id", r.ContactRelationshipID)
		if err != nil {
			return "", relationshipJSON{}, err
		}
		contact, err := jsonGUID("contact id", r.ContactID)
		if err != nil {
			return "", relationshipJSON{}, err
		}
		return *id, relationshipJSON{ContactRelationshipID: id, ContactID: contact,
			RelationshipType: jsonText(r.RelationshipType), Attributes: jsonText(r.Attributes)}, nil
	})
	if err != nil {
		return err
	}
	if _, err := s.q().ExecContext(ctx, procReplaceJobContactRelationships, sql.Named("JobId", job),
		sql.Named("Relationships", list)); err != nil {
		return fmt.Errorf("mssql: replace job contact relationships: %w", err)
	}
	return nil
}

// ListJobContactRelationships reads a job's relationships
// (spPrimeflowListJobContactRelationships).
func (s *Store) ListJobContactRelationships(ctx context.Context, jobID string) ([]store.ContactRelationship, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list job contact relationships", procListJobContactRelationships,
		func(sc sqlrows.Scanner) (store.ContactRelationship, error) {
			var r store.ContactRelationship
			err := sc.Scan(scanGUID{&r.ContactRelationshipID}, scanGUID{&r.JobID}, scanGUID{&r.ContactID},
				scanString{&r.RelationshipType}, scanString{&r.Attributes}, scanTime{&r.SyncedUTC})
			return r, err
		}, sql.Named("JobId", job))
}
