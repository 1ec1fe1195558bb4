package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
)

const (
	childForm1 = "e1e1e1e1-0000-4000-8000-000000000001"
	childForm2 = "e1e1e1e1-0000-4000-8000-000000000002"
	childForm3 = "e1e1e1e1-0000-4000-8000-000000000003"
	childForm4 = "e1e1e1e1-0000-4000-8000-000000000004"
	objectJob  = "Job"
)

func sampleForm(id, status string, day int) store.SiteForm {
	return store.SiteForm{SiteFormID: strings.ToUpper(id), ObjectID: childJob, Name: "Triage Form",
		Status: status, CreatedAt: at(day, 1), UpdatedAt: at(day, 2), Attributes: `{"status":"` + status + `"}`}
}

func formIDs(forms []store.SiteForm) []string {
	out := make([]string, len(forms))
	for i, f := range forms {
		out[i] = f.SiteFormID
	}
	return out
}

func testSiteForms(t *testing.T, open Opener) {
	ctx := context.Background()
	is := is.New(t)
	s := open(t)

	is.NoErr(s.ReplaceJobSiteForms(ctx, strings.ToUpper(childJob), objectJob, []store.SiteForm{
		sampleForm(childForm1, "Draft", 1), sampleForm(childForm2, "Completed", 2)}))
	// A form of the job under another object, and a form of another job.
	is.NoErr(s.ReplaceJobSiteForms(ctx, childJob, "Allocation", []store.SiteForm{sampleForm(childForm3, "Draft", 3)}))
	is.NoErr(s.ReplaceJobSiteForms(ctx, childJob2, objectJob, []store.SiteForm{sampleForm(childForm4, "Draft", 4)}))

	got, found, err := s.GetSiteForm(ctx, strings.ToUpper(childForm2))
	is.NoErr(err)
	is.True(found)                                     // found in any case
	is.Equal(got.SiteFormID, childForm2)               // lower-case
	is.Equal(got.JobID, childJob)                      // stored with the job
	is.Equal(got.ObjectType, objectJob)                // and the object type
	is.Equal(got.ObjectID, childJob)                   // object id
	is.Equal(got.Name, "Triage Form")                  // name
	is.Equal(got.Status, "Completed")                  // status
	is.Equal(got.CreatedAt, at(2, 1))                  // createdAt
	is.Equal(got.UpdatedAt, at(2, 2))                  // updatedAt
	is.Equal(got.Attributes, `{"status":"Completed"}`) // raw attributes
	is.True(!got.SyncedUTC.IsZero())                   // stamped

	list, err := s.ListJobSiteForms(ctx, childJob)
	is.NoErr(err)
	is.Equal(formIDs(list), []string{childForm1, childForm2, childForm3}) // the job's forms, oldest first

	// Prime now lists form 2 changed and form 1 gone.
	is.NoErr(s.ReplaceJobSiteForms(ctx, childJob, objectJob, []store.SiteForm{sampleForm(childForm2, "Approved", 2)}))
	list, err = s.ListJobSiteForms(ctx, childJob)
	is.NoErr(err)
	is.Equal(formIDs(list), []string{childForm2, childForm3}) // form 1 removed, the other object's form left alone
	is.Equal(list[0].Status, "Approved")                      // form 2 updated
	_, found, err = s.GetSiteForm(ctx, childForm1)
	is.NoErr(err)
	is.True(!found) // gone
	other, err := s.ListJobSiteForms(ctx, childJob2)
	is.NoErr(err)
	is.Equal(formIDs(other), []string{childForm4}) // another job's forms untouched

	is.NoErr(s.ReplaceJobSiteForms(ctx, childJob, objectJob, nil))
	list, err = s.ListJobSiteForms(ctx, childJob)
	is.NoErr(err)
	is.Equal(formIDs(list), []string{childForm3}) // no Job forms left

	err = s.ReplaceJobSiteForms(ctx, childJob, "Allocation", []store.SiteForm{sampleForm(childForm1, "Draft", 1), {}})
	is.True(err != nil) // a form without an id fails the whole replace
	list, err = s.ListJobSiteForms(ctx, childJob)
	is.NoErr(err)
	is.Equal(formIDs(list), []string{childForm3}) // and changes nothing
}
