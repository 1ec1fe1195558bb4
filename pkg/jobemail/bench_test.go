package jobemail

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// BenchmarkTextLinear: the HTML-to-text pass (without its MaxRead cap) on
// bodies made to be slow — a 4 MiB body of "<a" took 14.8 s, ~3,900 ns a
// byte, when every '<' scanned up to 4 KiB ahead for its '>' — against an
// ordinary Outlook body, measured in the same run: the time a byte at 4 MiB
// against the time a byte at 64 KiB (~1 for a pass linear in the body), and
// the time a byte of each against the ordinary body's (a small constant: no
// body costs much more a byte than a real one). Then Extract of the 4 MiB
// body, which reads MaxRead of it.
func BenchmarkTextLinear(b *testing.B) {
	ordinary := `<p class="MsoNormal" style="margin:0">{ &quot;JobID&quot;: &#39;2262480&#39;, &quot;JobNumber&quot;: &#39;J014370&#39; }<br></p>`
	for range b.N {
		base := perByte(repeatTo(ordinary, 4<<20))
		fmt.Fprintf(os.Stdout, "text of an ordinary body, 4 MiB: %.2f ns/byte\n", base)
		for _, body := range []struct{ name, unit string }{
			{"lt-a", "<a"}, {"lt-a-quote", "<a '"}, {"lt-a-quotes", `<a "'`}, {"lt-bang", "<!"}, {"tags", "<a href=x>y"},
		} {
			large := repeatTo(body.unit, 4<<20)
			small, big := perByte(repeatTo(body.unit, 64<<10)), perByte(large)
			start := time.Now()
			_, _ = Extract(Email{HTML: true, Body: large})
			extract := time.Since(start)
			fmt.Fprintf(os.Stdout, "text of %-14q 64 KiB %.2f ns/byte, 4 MiB %.2f ns/byte: 4 MiB/64 KiB %.2f (linear: ~1), against the ordinary body %.2f; Extract of the 4 MiB body %s\n",
				body.unit, small, big, big/small, big/base, extract.Round(time.Microsecond))
			b.ReportMetric(big/small, "size-ratio("+body.name+")")
			b.ReportMetric(big/base, "vs-ordinary("+body.name+")")
		}
	}
}

// perByte is the time text takes a byte of s: the best of three runs, each
// over 8 MiB, so that neither a small body nor a large one is measured cold.
func perByte(s string) float64 {
	best := time.Duration(math.MaxInt64)
	for range 3 {
		start := time.Now()
		for range (8 << 20) / len(s) {
			text(s)
		}
		best = min(best, time.Since(start))
	}
	return float64(best) / float64((8<<20)/len(s)*len(s))
}

func repeatTo(unit string, n int) string { return strings.Repeat(unit, n/len(unit)+1)[:n] }
