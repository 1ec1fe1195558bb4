package primebudget

import (
	"github.com/prometheus/client_golang/prometheus"
)

var (
	remainingDesc = prometheus.NewDesc("prime_budget_remaining",
		"The deployment's Prime budget left: calls that may go out in the coming minute (window=\"minute\"), and the day's as Prime last told it, less the calls since (window=\"day\", when Prime sends x-ratelimit-day-remaining).",
		[]string{"window"}, nil)
	inFlightDesc = prometheus.NewDesc("prime_budget_in_flight",
		"Prime calls in flight in the whole deployment.", nil, nil)
	processesDesc = prometheus.NewDesc("prime_budget_processes",
		"Processes spending the deployment's Prime budget (their lease runs).", nil, nil)
	holdDesc = prometheus.NewDesc("prime_budget_hold_seconds",
		"How long the hold on every Prime call a 429 started (its Retry-After) still runs.", nil, nil)
	sharedDesc = prometheus.NewDesc("prime_budget_shared",
		"1 while this process spends the deployment's budget in NATS, 0 while NATS is out of reach and it spends a local share.", nil, nil)
	fallbacksDesc = prometheus.NewDesc("prime_budget_fallbacks_total",
		"Times this process lost the budget in NATS and fell back to a local share.", nil, nil)
	conflictsDesc = prometheus.NewDesc("prime_budget_conflicts_total",
		"Writes of the budget that another process's write beat (each is tried again).", nil, nil)
	dayCallsDesc = prometheus.NewDesc("prime_budget_day_calls",
		"The deployment's Prime calls in Prime's day so far (since midnight in PRIME_DAY_ZONE).", nil, nil)
	dayPaceDesc = prometheus.NewDesc("prime_budget_day_pace_per_hour",
		"The deployment's Prime calls an hour over the last hour: the pace of the day's forecast.", nil, nil)
	dayReserveAtDesc = prometheus.NewDesc("prime_budget_day_reserve_reached_timestamp_seconds",
		"When, at the pace of the last hour, the day's Prime budget would be down to PRIME_DAY_RESERVE (then only make-safe work goes out): a Unix time, absent while no call goes out.", nil, nil)
	dayEndDesc = prometheus.NewDesc("prime_budget_day_end_timestamp_seconds",
		"When Prime's day ends and its budget starts again (midnight in PRIME_DAY_ZONE): a Unix time.", nil, nil)
)

// Describe implements prometheus.Collector.
func (b *Budget) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{remainingDesc, inFlightDesc, processesDesc, holdDesc, sharedDesc, fallbacksDesc, conflictsDesc,
		dayCallsDesc, dayPaceDesc, dayReserveAtDesc, dayEndDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the budget as this process last
// saw it.
func (b *Budget) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	st := b.view
	shared := b.fallback == nil
	c := b.counts
	b.mu.Unlock()
	st.PerMinute = b.perMinute
	s := st.snapshot(b.now())
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(remainingDesc, float64(s.MinuteLeft), "minute")
	if s.DayLeft != nil {
		gauge(remainingDesc, float64(*s.DayLeft), "day")
	}
	gauge(inFlightDesc, float64(s.InFlight))
	gauge(processesDesc, float64(s.Processes))
	gauge(holdDesc, b.Held().Seconds())
	sharedV := 0.0
	if shared {
		sharedV = 1
	}
	gauge(sharedDesc, sharedV)
	if f := s.Forecast; f != nil {
		gauge(dayCallsDesc, float64(f.Calls))
		gauge(dayPaceDesc, f.PerHour)
		gauge(dayEndDesc, float64(f.End.Unix()))
		if f.ReserveAt != nil {
			gauge(dayReserveAtDesc, float64(f.ReserveAt.Unix()))
		}
	}
	ch <- prometheus.MustNewConstMetric(fallbacksDesc, prometheus.CounterValue, float64(c.fallbacks))
	ch <- prometheus.MustNewConstMetric(conflictsDesc, prometheus.CounterValue, float64(c.conflicts))
}
