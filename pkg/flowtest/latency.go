package flowtest

import (
	"slices"
	"testing"
	"time"
)

// Quantile is the q quantile (0 to 1) of ds, nearest rank; ds is not
// changed.
func Quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// ReportLatencies reports the p50, p95 and max of ds in milliseconds, as
// <name>-p50-ms, <name>-p95-ms and <name>-max-ms.
func ReportLatencies(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(ms(Quantile(ds, 0.5)), name+"-p50-ms")
	b.ReportMetric(ms(Quantile(ds, 0.95)), name+"-p95-ms")
	b.ReportMetric(ms(slices.Max(ds)), name+"-max-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
