package primesim

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/prime"
)

// Latest is the newest timestamp of f's records: each attribute written as
// Prime writes one (prime.TimeLayout); zero when f has none.
func (f Fixture) Latest() (time.Time, error) {
	var latest time.Time
	_, err := f.mapTimes(func(t time.Time) time.Time {
		if t.After(latest) {
			latest = t
		}
		return t
	})
	return latest, err
}

// Moved is f with every timestamp of its records (Latest's) moved by d, and
// nothing else changed: the records keep their order in time, a job its
// children, to the second.
func (f Fixture) Moved(d time.Duration) (Fixture, error) {
	return f.mapTimes(func(t time.Time) time.Time { return t.Add(d) })
}

// mapTimes is f with each timestamp attribute t of its records replaced by
// fn(t).
func (f Fixture) mapTimes(fn func(time.Time) time.Time) (Fixture, error) {
	out := make(Fixture, len(f))
	for k, recs := range f {
		moved := make([]Record, len(recs))
		for i, r := range recs {
			var attrs map[string]json.RawMessage
			if err := json.Unmarshal(r.Attributes, &attrs); err != nil {
				return nil, fmt.Errorf("primesim: fixture %s %s: %w", k, r.ID, err)
			}
			for name, v := range attrs {
				var s string
				if json.Unmarshal(v, &s) != nil {
					continue
				}
				t, err := time.ParseInLocation(prime.TimeLayout, s, time.UTC)
				if err != nil {
					continue
				}
				attrs[name], _ = json.Marshal(fn(t).Format(prime.TimeLayout)) // a string always marshals
			}
			b, err := json.Marshal(attrs)
			if err != nil {
				return nil, fmt.Errorf("primesim: fixture %s %s: %w", k, r.ID, err)
			}
			r.Attributes = b
			moved[i] = r
		}
		out[k] = moved
	}
	return out, nil
}
