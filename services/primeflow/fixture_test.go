package primeflow_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/services/primeflow"
)

// make run's Prime simulator has its fixture in the days before it first
// starts, whenever that is (each hour of a week in each season, and across
// Melbourne's daylight-saving changes): every record in the past, every job
// created within primectl coverage's 7 days and last updated before the
// first jobs sweep's day (JOBS_SWEEP_FIRST), so that the tour's webhooks are
// the first to bring them and coverage counts them; and the Make Safe job,
// and every job the fixture has created after hours, still created after
// hours (§5.5).
func TestTheFixtureIsRecent(t *testing.T) {
	fx, err := primesim.DefaultFixture()
	if err != nil {
		t.Fatal(err)
	}
	afterHours := map[string]bool{}
	for _, j := range jobsOf(t, fx) {
		afterHours[j.ID] = store.IsOutsideBusinessHours(j.CreatedAt.Time)
	}
	if !afterHours[fixtureMakeSafeJob] {
		t.Fatalf("the fixture's Make Safe job %s is not created after hours", fixtureMakeSafeJob)
	}
	for _, start := range []time.Time{
		time.Date(2026, 1, 12, 0, 0, 0, 0, time.UTC),  // summer: AEDT
		time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC),   // daylight saving ends on 5 April
		time.Date(2026, 7, 13, 0, 0, 0, 0, time.UTC),  // winter: AEST
		time.Date(2026, 9, 30, 0, 0, 0, 0, time.UTC),  // daylight saving starts on 4 October
		time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC), // the day this was written
	} {
		for h := range 8 * 24 {
			now := start.Add(time.Duration(h)*time.Hour + 17*time.Minute)
			moved, err := primeflow.RecentFixture(fx, now)
			if err != nil {
				t.Fatal(err)
			}
			if latest, err := moved.Latest(); err != nil || latest.After(now) {
				t.Fatalf("now %s: the newest record is of %s (%v): in the future", now, latest, err)
			}
			for _, j := range jobsOf(t, moved) {
				switch {
				case j.CreatedAt.Before(now.Add(-7 * 24 * time.Hour)):
					t.Errorf("now %s: job %s created %s, before coverage's 7 days", now, j.ID, j.CreatedAt)
				case !j.UpdatedAt.Before(now.Add(-24 * time.Hour)):
					t.Errorf("now %s: job %s updated %s, within the first jobs sweep's day", now, j.ID, j.UpdatedAt)
				case afterHours[j.ID] && !store.IsOutsideBusinessHours(j.CreatedAt.Time):
					t.Errorf("now %s: job %s created %s, inside business hours", now, j.ID, j.CreatedAt.In(melbourne(t)))
				}
			}
		}
	}
}

func jobsOf(t *testing.T, fx primesim.Fixture) []prime.Job {
	t.Helper()
	var jobs []prime.Job
	for _, r := range fx[primesim.KindJobs] {
		var j prime.Job
		if err := json.Unmarshal(r.Attributes, &j); err != nil {
			t.Fatal(err)
		}
		j.ID = r.ID
		jobs = append(jobs, j)
	}
	return jobs
}

func melbourne(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(store.BusinessZone)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// The README's tour names the simulator's records and its Initial Contact
// Made status as the code has them.
func TestTheTourNamesTheSimulatorsRecords(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{fixtureJob, fixtureMakeSafeJob, fixtureAllocation, primesim.StatusInitialContactMade} {
		if !strings.Contains(string(readme), id) {
			t.Errorf("README.md does not name %s", id)
		}
	}
}
