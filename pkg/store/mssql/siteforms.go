package mssql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

// siteFormJSON is one form as spPrimeflowReplaceJobSiteForms reads it.
type siteFormJSON struct {
	SiteFormID *string `json:"siteFormId"`
	ObjectID   *string `json:"objectId"`
	Name       *string `json:"name"`
	Status     *string `json:"status"`
	CreatedAt  *string `json:"createdAt"`
	UpdatedAt  *string `json:"updatedAt"`
	Attributes *string `json:"attributes"`
}

func siteFormDest(f *store.SiteForm) []any {
	return []any{scanGUID{&f.SiteFormID}, scanGUID{&f.JobID}, scanString{&f.ObjectType}, scanGUID{&f.ObjectID},
		scanString{&f.Name}, scanString{&f.Status}, scanTime{&f.CreatedAt}, scanTime{&f.UpdatedAt},
		scanString{&f.Attributes}, scanTime{&f.SyncedUTC}}
}

// ReplaceJobSiteForms makes the job's forms of objectType exactly forms
// (spPrimeflowReplaceJobSiteForms). A form given twice is stored as its
// last copy.
func (s *Store) ReplaceJobSiteForms(ctx context.Context, jobID, objectType string, forms []store.SiteForm) error {
	if objectType == "" {
		return errors.New("mssql: replace job site forms: no object type")
	}
	job, err := parseGUID(jobID)
	if err != nil {
		return err
	}
	list, err := jsonRows(forms, func(f store.SiteForm) (string, siteFormJSON, error) {
		id, err := requiredGUID("site form id", f.SiteFormID)
		if err != nil {
			return "", siteFormJSON{}, err
		}
		obj, err := jsonGUID("site form object id", f.ObjectID)
		if err != nil {
			return "", siteFormJSON{}, err
		}
		return *id, siteFormJSON{SiteFormID: id, ObjectID: obj, Name: jsonText(f.Name), Status: jsonText(f.Status),
			CreatedAt: jsonTime(f.CreatedAt), UpdatedAt: jsonTime(f.UpdatedAt), Attributes: jsonText(f.Attributes)}, nil
	})
	if err != nil {
		return err
	}
	if _, err := s.q().ExecContext(ctx, procReplaceJobSiteForms, sql.Named("JobId", job),
		sql.Named("ObjectType", objectType), sql.Named("SiteForms", list)); err != nil {
		return fmt.Errorf("mssql: replace job site forms: %w", err)
	}
	return nil
}

// GetSiteForm reads one site form (spPrimeflowGetSiteForm).
func (s *Store) GetSiteForm(ctx context.Context, siteFormID string) (store.SiteForm, bool, error) {
	id, ok := keyGUID(siteFormID)
	if !ok {
		return store.SiteForm{}, false, nil
	}
	var f store.SiteForm
	found, err := s.getOne(ctx, "get site form", procGetSiteForm, siteFormDest(&f), sql.Named("SiteFormId", id))
	if !found || err != nil {
		return store.SiteForm{}, false, err
	}
	return f, true, nil
}

// ListJobSiteForms reads a job's forms (spPrimeflowListJobSiteForms).
func (s *Store) ListJobSiteForms(ctx context.Context, jobID string) ([]store.SiteForm, error) {
	job, ok := keyGUID(jobID)
	if !ok {
		return nil, nil
	}
	return queryAll(ctx, s.q(), "list job site forms", procListJobSiteForms, func(sc sqlrows.Scanner) (store.SiteForm, error) {
		var f store.SiteForm
		err := sc.Scan(siteFormDest(&f)...)
		return f, err
	}, sql.Named("JobId", job))
}
