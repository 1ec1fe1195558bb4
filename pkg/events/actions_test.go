package events_test

import (
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/matryer/is"
)

// TestActionsAreSubjectTokens: every handled action is published on a
// subject of its own (a typo would route nothing), once.
func TestActionsAreSubjectTokens(t *testing.T) {
	is := is.New(t)
	seen := map[string]bool{}
	for _, a := range events.Actions() {
		is.Equal(events.ActionToken(a), a)                       // its own subject token, not _invalid
		is.Equal(events.ResolvedSubject(a), "prime.resolved."+a) // the subject its stage consumes
		is.True(!seen[a])                                        // listed once
		seen[a] = true
	}
	is.Equal(len(seen), 6) // §5's six actions
}

func TestFetchedJob(t *testing.T) {
	const job = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	appt := events.Resource{Type: events.ResourceAppointments, ID: "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"}
	other := events.Resource{Type: events.ResourceJobs, ID: "5e6f7a8b-0c1d-4e2f-9a3b-6c7d8e9f0a06"}
	mine := events.Resource{Type: events.ResourceJobs, ID: "0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"}
	for _, tc := range []struct {
		name  string
		ev    events.Resolved
		want  events.Resource
		found bool
	}{
		{"the job named, in any case", events.Resolved{JobID: job, Fetched: []events.Resource{appt, other, mine}}, mine, true},
		{"another job only", events.Resolved{JobID: job, Fetched: []events.Resource{appt, other}}, events.Resource{}, false},
		{"no job named: the first job fetched", events.Resolved{Fetched: []events.Resource{appt, other, mine}}, other, true},
		{"nothing fetched", events.Resolved{JobID: job}, events.Resource{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			got, found := tc.ev.FetchedJob()
			is.Equal(found, tc.found) // found or not
			is.Equal(got, tc.want)    // the right record
		})
	}
	is := is.New(t)
	got, found := events.FindResource([]events.Resource{appt, mine}, events.ResourceAppointments, appt.ID)
	is.True(found)      // by type and id
	is.Equal(got, appt) // that one
	_, found = events.FindResource([]events.Resource{appt, mine}, events.ResourceAllocations, appt.ID)
	is.True(!found) // not another type's
}
