package flowtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

func TestQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1 … 10, unsorted
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 1},
		{0.5, 6},
		{0.95, 10},
		{1, 10},
	} {
		t.Run(fmt.Sprint(tc.q), func(t *testing.T) {
			is := is.New(t)
			is.Equal(flowtest.Quantile(ds, tc.q), tc.want) // nearest rank
		})
	}
	is := is.New(t)
	is.Equal(ds[0], time.Duration(5)) // the input is left as it was
}

func TestCounter(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "h"}, []string{"a", "b"})
	reg.MustRegister(c)
	c.WithLabelValues("x", "1").Add(1)
	c.WithLabelValues("x", "2").Add(2)
	c.WithLabelValues("y", "1").Add(4)
	for _, tc := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"every series", "c_total", nil, 7},
		{"one label", "c_total", map[string]string{"a": "x"}, 3},
		{"both labels", "c_total", map[string]string{"a": "x", "b": "2"}, 2},
		{"no such series", "c_total", map[string]string{"a": "z"}, 0},
		{"no such metric", "d_total", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			is.Equal(flowtest.Counter(t, reg, tc.metric, tc.labels), tc.want) // the sum of the matching series
		})
	}
}
