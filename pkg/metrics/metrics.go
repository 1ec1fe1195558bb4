// Package metrics registers primeflow's Prometheus collectors, one way for
// every package, so that building a service twice on one registry (a
// restart in a test, or two parts of one process that share a counter)
// behaves like a restart everywhere:
//
//   - Register, for a collector the service counts into (a counter, a
//     gauge, a histogram, their vectors): when one of the same name and
//     labels is registered already, the service counts into that one, so the
//     count carries on;
//   - Replace, for collectors that something the service was handed holds
//     or reads at scrape time (an API client's counts, a queue's depth in
//     the store, a GaugeFunc): they take the place of those registered
//     before, so the scrape reads the newest client or store.
//
// To add a metric to a service: declare it in the service's metrics.go,
// named primeflow_<service>_<what>[_<unit>][_total], with a Help that lists
// its label values, and register it in newMetrics with Register (Replace
// for a reader); export the label values an alert watches at 0 on the
// registered collector, so the alert reads 0, not "no data"; bound a label
// that comes from input (an eventAction: events.ActionLabel), so it cannot
// add a series a value; list it in docs/monitoring.md's metrics table, and put a
// failure counter on a Grafana dashboard (compose's tests check that every
// one is).
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Register registers *c with reg, or, when a collector of the same name and
// labels is registered already, sets *c to that one. An error is a
// collector that clashes with another (the same name, other labels or
// another kind).
func Register[C prometheus.Collector](reg prometheus.Registerer, c *C) error {
	err := reg.Register(*c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			*c = existing
			return nil
		}
		return fmt.Errorf("%w: the one registered is a %T", err, already.ExistingCollector)
	}
	return err
}

// NewRegistry is a process's registry, with the Go runtime and process
// collectors.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) // a new registry takes them
	return reg
}

// Replace registers each of cs with reg in place of any collector
// registered with the same descriptions before it.
func Replace(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	var errs []error
	for _, c := range cs {
		reg.Unregister(c) // finds the one registered before by c's descriptions
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
