package sqlite

import (
	"context"
	"errors"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlrows"
)

const siteFormColumns = `siteFormId, jobId, objectType, objectId, name, status, createdAt, updatedAt, attributes, syncedUTC`

func scanSiteForm(sc sqlrows.Scanner) (store.SiteForm, error) {
	var f store.SiteForm
	err := sc.Scan(&f.SiteFormID, scanString{&f.JobID}, scanString{&f.ObjectType}, scanString{&f.ObjectID},
		scanString{&f.Name}, scanString{&f.Status}, scanTime{&f.CreatedAt}, scanTime{&f.UpdatedAt},
		scanString{&f.Attributes}, scanTime{&f.SyncedUTC})
	return f, err
}

// ReplaceJobSiteForms makes the job's forms of objectType exactly forms.
func (s *Store) ReplaceJobSiteForms(ctx context.Context, jobID, objectType string, forms []store.SiteForm) error {
	if jobID == "" || objectType == "" {
		return errors.New("sqlite: replace job site forms: no job id or object type")
	}
	return replaceRows(ctx, s, "replace job site forms", `DELETE FROM primeSiteForms WHERE jobId = ? AND objectType = ?`,
		[]any{mirrorGUID(jobID), objectType}, `INSERT INTO primeSiteForms (`+siteFormColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (siteFormId) DO UPDATE SET
				jobId = excluded.jobId, objectType = excluded.objectType, objectId = excluded.objectId,
				name = excluded.name, status = excluded.status, createdAt = excluded.createdAt,
				updatedAt = excluded.updatedAt, attributes = excluded.attributes, syncedUTC = excluded.syncedUTC`, forms,
		func(f store.SiteForm, now string) ([]any, error) {
			if f.SiteFormID == "" {
				return nil, errors.New("a site form has no id")
			}
			return []any{mirrorGUID(f.SiteFormID), mirrorGUID(jobID), nullString(objectType), mirrorGUID(f.ObjectID),
				nullString(f.Name), nullString(f.Status), nullTime(f.CreatedAt), nullTime(f.UpdatedAt),
				nullString(f.Attributes), now}, nil
		})
}

// GetSiteForm reads one site form.
func (s *Store) GetSiteForm(ctx context.Context, id string) (store.SiteForm, bool, error) {
	return queryOne(ctx, s.r(), "get site form", `SELECT `+siteFormColumns+` FROM primeSiteForms
		WHERE siteFormId = ?`, scanSiteForm, mirrorGUID(id))
}

// ListJobSiteForms reads a job's forms, oldest first.
func (s *Store) ListJobSiteForms(ctx context.Context, jobID string) ([]store.SiteForm, error) {
	return queryAll(ctx, s.r(), "list job site forms", `SELECT `+siteFormColumns+` FROM primeSiteForms
		WHERE jobId = ? ORDER BY createdAt, siteFormId`, scanSiteForm, mirrorGUID(jobID))
}
