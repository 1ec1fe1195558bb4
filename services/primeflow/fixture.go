package primeflow

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// recentFixture is the Prime simulator's fixture moved into the days before
// now, so that its jobs are among those primectl coverage counts (the last 7
// days) and the tour's webhooks about them show there: by the whole hours
// that bring its newest timestamp nearest before now, less an hour at a time
// while a job the fixture has created outside business hours would not be
// (§5.5: its Make Safe job raises its phone call, as the tour shows). Its
// records keep their order in time, so every one is in the past and its jobs
// were last updated two days before now at least: the first jobs sweep
// (JOBS_SWEEP_FIRST, a day) leaves them to the tour's webhooks. Should no
// hour in a week keep them after hours, the fixture is kept as it is.
func recentFixture(fx primesim.Fixture, now time.Time) (primesim.Fixture, error) {
	latest, err := fx.Latest()
	if err != nil {
		return nil, err
	}
	var afterHours []time.Time // the fixture's jobs created outside business hours
	for _, r := range fx[primesim.KindJobs] {
		var job struct {
			CreatedAt prime.Time `json:"createdAt"`
		}
		if err := json.Unmarshal(r.Attributes, &job); err != nil {
			return nil, fmt.Errorf("primesim fixture: job %s: %w", r.ID, err)
		}
		if store.IsOutsideBusinessHours(job.CreatedAt.Time) {
			afterHours = append(afterHours, job.CreatedAt.Time)
		}
	}
	keeps := func(d time.Duration) bool {
		for _, t := range afterHours {
			if !store.IsOutsideBusinessHours(t.Add(d)) {
				return false
			}
		}
		return true
	}
	d := now.Sub(latest).Truncate(time.Hour)
	for tries := 0; !keeps(d); tries++ {
		if tries == 7*24 {
			return fx, nil
		}
		d -= time.Hour
	}
	return fx.Moved(d)
}
