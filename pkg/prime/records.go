package prime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// This file is the one place that knows the shape of Prime's records: the
// attribute names in the json tags below are what the client decodes and what
// primesim encodes. Shapes marked "assumed" were not seen in public material
// (see reference/external-apis.md) and are the first thing to check against a
// real tenant. Decoding ignores unknown attributes and accepts missing ones.

// Job is a Prime job (GET /jobs/{identifier}).
type Job struct {
	ID            string `json:"-"`
	JobNumber     string `json:"jobNumber"`
	StatusID      string `json:"statusId"`
	ClientID      string `json:"clientId"`
	AssignedID    string `json:"assignedId"`
	EstimatorID   string `json:"estimatorId"`
	CaseManagerID string `json:"caseManagerId"`
	SupervisorID  string `json:"supervisorId"`
	DivisionID    string `json:"divisionId"`
	Region        string `json:"region"`
	Description   string `json:"description"`
	IncidentDate  Time   `json:"incidentDate"`
	CreatedAt     Time   `json:"createdAt"`
	UpdatedAt     Time   `json:"updatedAt"`
	Version       int64  `json:"version"`
	PrimeURL      string `json:"primeUrl"`
	// AuthorisedTotalIncludingTax is a decimal Prime sends as a string ("700.80").
	AuthorisedTotalIncludingTax Amount  `json:"authorisedTotalIncludingTax"`
	Address                     Address `json:"address"`
	// PrimaryContactID is assumed: the spec reads it (§5.2) but it was not
	// seen in public material.
	PrimaryContactID string `json:"primaryContactId"`
	// Raw is the record's attributes object exactly as Prime sent it.
	Raw json.RawMessage `json:"-"`
	// Asked is when the call Prime answered went out (GetJob's, or the
	// call whose answer it reused: coalesce.go); zero for a job that came
	// otherwise (a list's, FromResource's). An answer to a call sent after
	// the mirror's row was written says what Prime held since (§8.4:
	// pkg/store's UpsertJob).
	Asked time.Time `json:"-"`
}

// Address is a job's site address.
type Address struct {
	AddressLine1 string `json:"addressLine1"`
	AddressLine2 string `json:"addressLine2"`
	Suburb       string `json:"suburb"`
	State        string `json:"state"`
	Postcode     string `json:"postcode"`
}

// Appointment is a Prime appointment. Assumed shape: GET /appointments/{id}
// was not seen in public material, nor the list GET /appointments filtered
// with 'startDate'.gte(…),'startDate'.lt(…) (ListAppointmentsByStartDate),
// which is assumed to give the same resources.
type Appointment struct {
	ID                string `json:"-"`
	JobID             string `json:"jobId"`
	AppointmentTypeID string `json:"appointmentTypeId"`
	StartDate         Time   `json:"startDate"`
	EndDate           Time   `json:"endDate"`
	Status            string `json:"status"`
	Version           int64  `json:"version"`
	// AssignedID is the Prime user the appointment is with (OptimoRoute's driver).
	AssignedID  string          `json:"assignedId"`
	Description string          `json:"description"`
	Notes       string          `json:"notes"`
	CreatedAt   Time            `json:"createdAt"`
	UpdatedAt   Time            `json:"updatedAt"`
	Raw         json.RawMessage `json:"-"`
}

// MakeSafeAllocationType is the allocationType of a Make Safe allocation.
const MakeSafeAllocationType = "Make Safe"

// Allocation is a Prime allocation: a piece of work on a job, such as a
// Make Safe (GET /allocations/{id}).
type Allocation struct {
	ID    string `json:"-"`
	JobID string `json:"jobId"`
	// UserID is the internal user the work is assigned to.
	UserID            string `json:"assignedId"`
	AssignedContactID string `json:"assignedContactId"`
	// Type is the assumed attribute that names the kind of work; see IsMakeSafe.
	Type             string          `json:"allocationType"`
	AllocationNumber string          `json:"allocationNumber"`
	Label            string          `json:"label"`
	StatusID         string          `json:"allocationStatusId"`
	Version          int64           `json:"version"`
	CreatedAt        Time            `json:"createdAt"`
	UpdatedAt        Time            `json:"updatedAt"`
	Raw              json.RawMessage `json:"-"`
}

// IsMakeSafe reports whether the allocation is a Make Safe (§5.5, §6). It is
// the one place that rule lives: allocationType "Make Safe", compared without
// regard to case, spaces, hyphens or underscores.
func (a Allocation) IsMakeSafe() bool {
	return normaliseType(a.Type) == normaliseType(MakeSafeAllocationType)
}

func normaliseType(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_':
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// SiteFormObjectJob is the objectType of a site form that hangs off a job.
const SiteFormObjectJob = "Job"

// SiteForm is a Prime site form (a triage form, for example). Assumed
// attribute names.
type SiteForm struct {
	ID         string          `json:"-"`
	JobID      string          `json:"jobId"`
	ObjectType string          `json:"objectType"`
	ObjectID   string          `json:"objectId"`
	Name       string          `json:"name"`
	Status     string          `json:"status"`
	CreatedAt  Time            `json:"createdAt"`
	UpdatedAt  Time            `json:"updatedAt"`
	Raw        json.RawMessage `json:"-"`
}

// Estimate is a Prime estimate with its categories and line items (§5.4).
// Assumed shape: categories and items nested in the estimate's attributes.
type Estimate struct {
	ID         string             `json:"-"`
	JobID      string             `json:"jobId"`
	Status     string             `json:"status"`
	Total      Amount             `json:"total"`
	CreatedAt  Time               `json:"createdAt"`
	UpdatedAt  Time               `json:"updatedAt"`
	Categories []EstimateCategory `json:"categories"`
	Raw        json.RawMessage    `json:"-"`
}

// EstimateCategory groups an estimate's line items.
type EstimateCategory struct {
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Items []EstimateItem `json:"items"`
}

// EstimateItem is one line of an estimate.
type EstimateItem struct {
	ID          string `json:"id"`
	Description string `json:"description"`
	Quantity    Amount `json:"quantity"`
	UnitPrice   Amount `json:"unitPrice"`
	Total       Amount `json:"total"`
}

// Contact is a Prime contact (GET /contacts/{id}).
type Contact struct {
	ID        string          `json:"-"`
	Name      string          `json:"name"`
	FirstName string          `json:"firstName"`
	LastName  string          `json:"lastName"`
	Email     string          `json:"email"`
	Mobile    string          `json:"mobile"`
	Phone     string          `json:"phone"`
	Raw       json.RawMessage `json:"-"`
}

// DisplayName is the contact's name, or its first and last names joined.
func (c Contact) DisplayName() string {
	if c.Name != "" {
		return c.Name
	}
	return strings.TrimSpace(c.FirstName + " " + c.LastName)
}

// ContactRelationship links a contact to a job. Assumed shape.
type ContactRelationship struct {
	ID        string          `json:"-"`
	JobID     string          `json:"jobId"`
	ContactID string          `json:"contactId"`
	Type      string          `json:"relationshipType"`
	Raw       json.RawMessage `json:"-"`
}

// StatusHistory is one status change of a job. Assumed shape.
type StatusHistory struct {
	ID        string          `json:"-"`
	JobID     string          `json:"jobId"`
	StatusID  string          `json:"statusId"`
	CreatedAt Time            `json:"createdAt"`
	Raw       json.RawMessage `json:"-"`
}

// TimeLayout is how Prime writes timestamps: no zone, read as UTC.
const TimeLayout = "2006-01-02 15:04:05"

// ParseTime reads a Prime timestamp ("2025-02-07 04:14:33") as UTC. It is the
// one place that decides the zone (assumed UTC: the spec converts to
// Melbourne time from it). RFC 3339 and bare dates are accepted too.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range [...]string{TimeLayout, time.RFC3339Nano, "2006-01-02T15:04:05", time.DateOnly} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("prime: time %q: not a Prime timestamp", s)
}

// Time is a Prime timestamp. The zero Time is a missing (null or empty) one.
type Time struct{ time.Time }

// UnmarshalJSON reads a Prime timestamp with ParseTime; null and "" give the
// zero Time.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("prime: time: %w", err)
	}
	if s == "" {
		*t = Time{}
		return nil
	}
	parsed, err := ParseTime(s)
	if err != nil {
		return err
	}
	t.Time = parsed
	return nil
}

// MarshalJSON writes the time the way Prime does, in UTC; the zero Time is null.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.UTC().Format(TimeLayout) + `"`), nil
}

// Amount is a decimal as text ("700.80"). Prime sends money as strings; an
// Amount also accepts a JSON number, and null as "".
type Amount string

// UnmarshalJSON accepts a JSON string, number or null.
func (a *Amount) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*a = ""
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("prime: amount: %w", err)
		}
		*a = Amount(s)
	default:
		var n json.Number
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("prime: amount: %w", err)
		}
		*a = Amount(n.String())
	}
	return nil
}
