package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// remainingMetric is what the Prime client serves of Prime's budget: the
// last x-ratelimit-<window>-remaining Prime sent (pkg/prime).
const remainingMetric = "prime_client_ratelimit_remaining"

// unreachableMetric is when Prime stopped answering a process's Prime
// client, 0 while it answers (pkg/prime).
const unreachableMetric = "prime_client_unreachable_since_seconds"

// budgetFrom reads the budget, and since when Prime has not answered (the
// earliest of the process's clients), from a process's metric families.
func budgetFrom(source string, families map[string]*dto.MetricFamily) *Budget {
	b := &Budget{Source: source}
	for _, m := range families[unreachableMetric].GetMetric() {
		if v := m.GetGauge().GetValue(); v > 0 {
			t := time.UnixMilli(int64(v * 1e3)).UTC()
			if b.UnreachableSince == nil || t.Before(*b.UnreachableSince) {
				b.UnreachableSince = &t
			}
		}
	}
	mf := families[remainingMetric]
	if mf == nil {
		return b
	}
	for _, m := range mf.GetMetric() {
		v := m.GetGauge().GetValue()
		for _, l := range m.GetLabel() {
			if l.GetName() != "window" {
				continue
			}
			switch l.GetValue() {
			case "minute":
				b.Minute = &v
			case "day":
				b.Day = &v
			}
		}
	}
	return b
}

// FromBudgetBucket reads the deployment's Prime budget that every process
// calling Prime shares, from its bucket in NATS (pkg/primebudget); while no
// process has written it yet, or NATS cannot be read (js nil), it reads
// other instead. Whether Prime answers is each process's own and not in
// the bucket: it is read from other, when other can be read.
func FromBudgetBucket(js jetstream.JetStream, other func(context.Context) (*Budget, error)) func(context.Context) (*Budget, error) {
	return func(ctx context.Context) (*Budget, error) {
		if js == nil {
			return other(ctx)
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := primebudget.Read(ctx, js)
		if errors.Is(err, primebudget.ErrNotSpent) {
			return other(ctx)
		}
		if err != nil {
			return nil, err
		}
		minute := float64(s.MinuteLeft)
		b := &Budget{Source: "the deployment's budget in NATS (KV " + events.BucketPrimeBudget + ")", Minute: &minute,
			InFlight: &s.InFlight, Processes: &s.Processes, HoldSeconds: s.Hold.Seconds(), Forecast: s.Forecast}
		if s.DayLeft != nil {
			day := float64(*s.DayLeft)
			b.Day = &day
		}
		if o, err := other(ctx); err == nil {
			b.UnreachableSince = o.UnreachableSince
		}
		return b, nil
	}
}

// FromRegistry reads the Prime budget from the process's own metrics (the
// status page of bin/primeflow, whose Prime client is registered there).
func FromRegistry(g prometheus.Gatherer) func(context.Context) (*Budget, error) {
	return func(context.Context) (*Budget, error) {
		mfs, err := g.Gather()
		if err != nil {
			return nil, err
		}
		byName := make(map[string]*dto.MetricFamily, len(mfs))
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		return budgetFrom("this process's Prime client ("+remainingMetric+")", byName), nil
	}
}

// FromMetricsURL reads the Prime budget from a process's /metrics at base,
// with the admin login (primectl status, from INGEST_URL: bin/primeflow's,
// or any process with a Prime client).
func FromMetricsURL(base string, admin opshttp.Credentials) func(context.Context) (*Budget, error) {
	return func(ctx context.Context) (*Budget, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		req.SetBasicAuth(admin.User, admin.Password)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%s/metrics answered %s", base, res.Status)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := parser.TextToMetricFamilies(io.LimitReader(res.Body, 32<<20))
		if err != nil {
			return nil, fmt.Errorf("%s/metrics: %w", base, err)
		}
		return budgetFrom(base+"/metrics ("+remainingMetric+")", mfs), nil
	}
}
