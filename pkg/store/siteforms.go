package store

import (
	"context"
	"time"
)

// SiteForm is a row of primeSiteForms (§5.3): a Prime site form (a triage
// form, for example) and its raw attributes JSON.
type SiteForm struct {
	SiteFormID string
	JobID      string
	// ObjectType is what the form hangs off ("Job", …); ObjectID is its id.
	ObjectType string
	ObjectID   string
	Name       string
	Status     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// Attributes is Prime's attributes object exactly as it came.
	Attributes string
	// SyncedUTC is when primeflow last wrote the row.
	SyncedUTC time.Time
}

// SiteForms is the site form mirror, primeSiteForms.
type SiteForms interface {
	// ReplaceJobSiteForms makes the job's forms of objectType exactly forms
	// (GetSiteFormsbyJob, §5.3): rows of that job and objectType that forms
	// does not hold are deleted, the others inserted or updated, in one
	// transaction. Each form is stored with jobID and objectType; forms of
	// the job with another objectType are left alone. jobID and objectType
	// must not be empty.
	ReplaceJobSiteForms(ctx context.Context, jobID, objectType string, forms []SiteForm) error
	// GetSiteForm returns a mirrored site form; found is false when
	// primeSiteForms has no row for it.
	GetSiteForm(ctx context.Context, siteFormID string) (f SiteForm, found bool, err error)
	// ListJobSiteForms returns every mirrored form of a job, oldest
	// createdAt first (then by id).
	ListJobSiteForms(ctx context.Context, jobID string) ([]SiteForm, error)
}
