package metrics_test

import (
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/metrics"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_events_total", Help: "h"}, []string{"outcome"})
}

// A service built twice on one registry counts on in the collector
// registered the first time.
func TestRegisterKeepsTheFirst(t *testing.T) {
	is := is.New(t)
	reg := prometheus.NewRegistry()
	first := counter()
	is.NoErr(metrics.Register(reg, &first))
	first.WithLabelValues("ok").Inc()
	second := counter()
	is.NoErr(metrics.Register(reg, &second)) // no error for the second build
	is.Equal(second, first)                  // it counts into the first collector
	second.WithLabelValues("ok").Inc()
	is.Equal(testutil.ToFloat64(first.WithLabelValues("ok")), 2.0) // and the count carries on

	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_events_total", Help: "h"})
	is.True(metrics.Register(reg, &g) != nil) // another kind of collector under a taken name is refused
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"consumer": "a"}, reg)
	third := counter()
	is.True(metrics.Register(wrapped, &third) != nil) // as are other labels
}

// A collector that something else holds follows the newest.
func TestReplaceTakesTheNewest(t *testing.T) {
	is := is.New(t)
	reg := prometheus.NewRegistry()
	depth := func(n float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "test_queue_depth", Help: "h"}, func() float64 { return n })
	}
	is.NoErr(metrics.Replace(reg, depth(1)))
	is.NoErr(metrics.Replace(reg, depth(2))) // no error for the second build
	mfs, err := reg.Gather()
	is.NoErr(err)
	is.Equal(len(mfs), 1)                                      // one series
	is.Equal(mfs[0].GetMetric()[0].GetGauge().GetValue(), 2.0) // read from the newest
}
