package mssql

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const childScript = "020_child_mirror.sql"

// childCalls makes every call of the child-mirror areas against rec, with
// every field set, and returns what each returned.
func childCalls(ctx context.Context, s *Store) []error {
	const (
		job   = "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"
		other = "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	)
	now := time.Now()
	var errs []error
	try := func(err error) { errs = append(errs, err) }
	_, err := s.SaveAppointment(ctx, store.Appointment{AppointmentID: other, JobID: job, AppointmentTypeID: other,
		StartDate: now, EndDate: now, Status: "Scheduled", Version: 2, AssignedID: other, Description: "d",
		Notes: "n", CreatedAt: now, UpdatedAt: now, Attributes: "{}"})
	try(err)
	_, err = s.SaveAppointment(ctx, store.Appointment{AppointmentID: other})
	try(err)
	_, _, err = s.GetAppointment(ctx, other)
	try(err)
	_, err = s.SaveAllocation(ctx, store.Allocation{AllocationID: other, JobID: job, AssignedID: other,
		AssignedContactID: other, AllocationType: "Make Safe", AllocationNumber: "A1", Label: "l",
		AllocationStatusID: other, IsMakeSafe: true, Version: 1, CreatedAt: now, UpdatedAt: now, Attributes: "{}"})
	try(err)
	_, err = s.SaveAllocation(ctx, store.Allocation{AllocationID: other})
	try(err)
	_, _, err = s.GetAllocation(ctx, other)
	try(err)
	_, err = s.ListJobAllocations(ctx, job)
	try(err)
	_, err = s.HasMakeSafeAllocation(ctx, job)
	try(err)
	try(s.ReplaceJobSiteForms(ctx, job, "Job", []store.SiteForm{{SiteFormID: other, ObjectID: job, Name: "Triage",
		Status: "Completed", CreatedAt: now, UpdatedAt: now, Attributes: `{"a":1}`}, {SiteFormID: job}}))
	_, _, err = s.GetSiteForm(ctx, other)
	try(err)
	_, err = s.ListJobSiteForms(ctx, job)
	try(err)
	try(s.ReplaceJobEstimates(ctx, job, []store.Estimate{{EstimateID: other, Status: "Draft", Total: "1.50",
		CreatedAt: now, UpdatedAt: now, Attributes: "{}", Categories: []store.EstimateCategory{{CategoryID: other,
			Name: "c", SortOrder: 1, Attributes: "{}", Items: []store.EstimateItem{{ItemID: other, Description: "i",
				Quantity: "2", UnitPrice: "0.75", Total: "1.50", SortOrder: 2, Attributes: "{}"}}}}}}))
	_, err = s.ListJobEstimates(ctx, job)
	try(err)
	try(s.SaveContact(ctx, store.Contact{ContactID: other, Name: "n", FirstName: "f", LastName: "l", Email: "e",
		Mobile: "m", Phone: "p", Attributes: "{}"}))
	_, _, err = s.GetContact(ctx, other)
	try(err)
	try(s.ReplaceJobContactRelationships(ctx, job, []store.ContactRelationship{{ContactRelationshipID: other,
		ContactID: job, RelationshipType: "Insured", Attributes: "{}"}}))
	_, err = s.ListJobContactRelationships(ctx, job)
	try(err)
	try(s.QueueJobSummaryNow(ctx, job))
	_, _, err = s.GetJobSummaryQueue(ctx, job)
	try(err)
	return errs
}

// openJSONPaths reads, from a procedure's text, the JSON paths each
// OPENJSON(@Param) WITH (…) clause reads, by parameter.
func openJSONPaths(text string) map[string][]string {
	clause := regexp.MustCompile(`(?is)OPENJSON\(@(\w+)\)\s*WITH\s*\(`)
	path := regexp.MustCompile(`'\$\.(\w+)'`)
	out := map[string][]string{}
	for _, m := range clause.FindAllStringSubmatchIndex(text, -1) {
		name := text[m[2]:m[3]]
		body := text[m[1]:closing(text, m[1]-1)]
		for _, p := range path.FindAllStringSubmatch(body, -1) {
			out[name] = append(out[name], p[1])
		}
		slices.Sort(out[name])
	}
	return out
}

// carriesOpenJSONFields checks that every JSON list a call sends carries
// exactly the fields the OPENJSON of its procedure (texts, by name) reads,
// GUIDs lower-case and times in the zone-less ISO form.
func carriesOpenJSONFields(texts map[string]string) func(*is.I, call) {
	return func(is *is.I, c call) {
		for name, paths := range openJSONPaths(texts[c.proc]) {
			text, ok := c.args[name].(string)
			is.True(ok) // the JSON list is sent as text
			var rows []map[string]any
			is.NoErr(json.Unmarshal([]byte(text), &rows)) // a JSON array of objects
			is.True(len(rows) > 0)                        // with rows to check
			for _, row := range rows {
				is.Equal(slices.Sorted(maps.Keys(row)), paths) // the fields OPENJSON reads, no more, no fewer
				for key, v := range row {
					if v == nil {
						continue // NULL
					}
					s, isText := v.(string)
					switch {
					case strings.HasSuffix(key, "Id"):
						is.True(isText && isGUID(s) && s == strings.ToLower(s)) // GUIDs lower-case
					case strings.HasSuffix(key, "At"):
						_, err := time.Parse(jsonTimeLayout, s)
						is.NoErr(err) // times in the zone-less ISO form
					}
				}
			}
		}
	}
}

// Every method of the child-mirror areas calls a procedure of 020 with
// parameters that exist, values of fitting types and no required one left
// out; every JSON list carries exactly the fields the procedure's OPENJSON
// reads, in the forms it reads them; and every procedure of 020 is called.
func TestChildMirrorCallsMatchTheProcedures(t *testing.T) {
	is := is.New(t)
	s, rec := recording(t)
	for _, err := range childCalls(context.Background(), s) {
		is.True(errors.Is(err, errRecorded)) // every method reached the database
	}

	var sc script
	for _, one := range loaded(t) {
		if one.name == childScript {
			sc = one
		}
	}
	is.Equal(sc.name, childScript) // the script was found
	texts := map[string]string{}
	for _, b := range sc.batches {
		if m := regexp.MustCompile(`(?i)PROCEDURE\s+dbo\.(\w+)`).FindStringSubmatch(b.sql); m != nil {
			texts[m[1]] = b.sql
		}
	}
	checkCalls(t, rec, modules(t, []script{sc}), fitsNullable, carriesOpenJSONFields(texts))
}

// Lookups by a value that is not a GUID answer "none" without a call, and
// rows that could not be stored are refused before one.
func TestChildMirrorNoCallForImpossibleArguments(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	s, rec := recording(t)
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"

	_, found, err := s.GetAppointment(ctx, "259047")
	is.NoErr(err)
	is.True(!found) // no appointment has a numeric id
	_, found, err = s.GetAllocation(ctx, "x")
	is.NoErr(err)
	is.True(!found)
	_, found, err = s.GetSiteForm(ctx, "x")
	is.NoErr(err)
	is.True(!found)
	_, found, err = s.GetContact(ctx, "x")
	is.NoErr(err)
	is.True(!found)
	_, found, err = s.GetJobSummaryQueue(ctx, "x")
	is.NoErr(err)
	is.True(!found)
	has, err := s.HasMakeSafeAllocation(ctx, "259047")
	is.NoErr(err)
	is.True(!has)
	allocs, err := s.ListJobAllocations(ctx, "259047")
	is.NoErr(err)
	is.Equal(len(allocs), 0)
	forms, err := s.ListJobSiteForms(ctx, "259047")
	is.NoErr(err)
	is.Equal(len(forms), 0)
	ests, err := s.ListJobEstimates(ctx, "259047")
	is.NoErr(err)
	is.Equal(len(ests), 0)
	rels, err := s.ListJobContactRelationships(ctx, "259047")
	is.NoErr(err)
	is.Equal(len(rels), 0)

	for _, err := range []error{
		func() error { _, err := s.SaveAppointment(ctx, store.Appointment{AppointmentID: "259047"}); return err }(),
		func() error {
			_, err := s.SaveAllocation(ctx, store.Allocation{AllocationID: job, JobID: "259047"})
			return err
		}(),
		s.ReplaceJobSiteForms(ctx, job, "Job", []store.SiteForm{{}}),
		s.ReplaceJobSiteForms(ctx, job, "", nil),
		s.ReplaceJobEstimates(ctx, job, []store.Estimate{{EstimateID: job, Categories: []store.EstimateCategory{{}}}}),
		s.ReplaceJobContactRelationships(ctx, job, []store.ContactRelationship{{ContactRelationshipID: job, ContactID: "x"}}),
		s.SaveContact(ctx, store.Contact{}),
		s.QueueJobSummaryNow(ctx, "259047"),
	} {
		is.True(err != nil && !errors.Is(err, errRecorded)) // refused before a call
	}
	is.Equal(len(rec.take()), 0) // none of this reached the database
}

// A form or relationship given twice goes to the procedure once, as its last copy.
func TestChildMirrorReplaceSendsEachRowOnce(t *testing.T) {
	is := is.New(t)
	s, rec := recording(t)
	const job, form = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10", "8e7d6c5b-4a39-4281-9f0e-d1c2b3a4f5e6"
	err := s.ReplaceJobSiteForms(context.Background(), job, "Job", []store.SiteForm{
		{SiteFormID: form, Status: "Draft"}, {SiteFormID: strings.ToUpper(form), Status: "Completed"}})
	is.True(errors.Is(err, errRecorded))
	cs := calls(t, rec.take())
	is.Equal(len(cs), 1)
	var rows []map[string]any
	is.NoErr(json.Unmarshal([]byte(cs[0].args["SiteForms"].(string)), &rows))
	is.Equal(len(rows), 1)                   // one row for the form
	is.Equal(rows[0]["status"], "Completed") // its last copy
}
