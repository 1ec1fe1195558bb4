package primectl

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
)

// archiveBenchRows is the size of BenchmarkArchive's log: 50,000 rows in
// make bench; the figures in the README are of the 2-million-row log (a
// year at about 5,500 webhooks a day):
//
//	PRIMEFLOW_BENCH_ARCHIVE_ROWS=2000000 go test -run '^$' -bench BenchmarkArchive -benchtime 1x -timeout 60m ./services/primectl/
const archiveBenchRowsVar = "PRIMEFLOW_BENCH_ARCHIVE_ROWS"

// BenchmarkArchive archives the rows of a year's log older than 30 days on
// SQLite while an ingest inserts a webhook every 10 ms through a store of
// its own (as ingest's process does: the insert and its durable commit
// are what its 200 waits for), and reports: the archive's throughput, by
// phase; the inserts' latency while it runs against the same inserts just
// before it (p50, p99, max, and the p99 ratio); the file's size per row;
// and the times of status, list --state all and coverage --since 7d before
// and after (the ratio after ÷ before).
func BenchmarkArchive(b *testing.B) {
	rows := 50_000
	if v := os.Getenv(archiveBenchRowsVar); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			b.Fatalf("%s=%q: want a number of rows, at least 1000", archiveBenchRowsVar, v)
		}
		rows = n
	}
	for range b.N {
		benchArchive(b, rows)
	}
}

func benchArchive(b *testing.B, rows int) {
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "primeflow.db")
	now := time.Now().UTC()
	fillStart := time.Now()
	fillLog(b, path, rows, now)
	fill := time.Since(fillStart)
	dbBefore := fileSize(b, path)

	env := map[string]string{"DATABASE_URL": "sqlite:" + path, "NATS_URL": "nats://" + flowtest.FreeAddr(b), "INGEST_URL": "http://" + flowtest.FreeAddr(b)}
	commands := [][]string{{"status"}, {"list", "--state", "all"}, {"coverage", "--since", "7d"}}
	before := timeCommands(b, env, commands)

	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	in := startIngest(b, path)
	in.wait(300) // the baseline: 300 inserts, 3 s

	cutoff := now.Add(-30 * 24 * time.Hour)
	counts, err := st.CountArchivable(ctx, cutoff)
	if err != nil {
		b.Fatal(err)
	}
	archived := counts[store.ArchiveWebhookLog]
	a := archiver{st: st, before: cutoff, batch: defaultDeleteBatch, now: now}
	file := filepath.Join(dir, "archive.jsonl.gz")
	t0 := time.Now()
	in.phase("write")
	written, err := a.write(ctx, file)
	if err != nil {
		b.Fatal(err)
	}
	tWrite := time.Since(t0)
	t1 := time.Now()
	in.phase("verify")
	if err := verifyArchive(file, written); err != nil {
		b.Fatal(err)
	}
	tVerify := time.Since(t1)
	t2 := time.Now()
	in.phase("delete")
	deleted, err := a.deleteArchived(ctx, file)
	if err != nil {
		b.Fatal(err)
	}
	tDelete := time.Since(t2)
	total := time.Since(t0)
	lat := in.stop()
	if deleted[store.ArchiveWebhookLog] != archived || written[store.ArchiveWebhookLog].Rows != archived {
		b.Fatalf("archived %d rows, wrote %d, deleted %d", archived, written[store.ArchiveWebhookLog].Rows, deleted[store.ArchiveWebhookLog])
	}
	after := timeCommands(b, env, commands)
	fileBytes := fileSize(b, file)
	free := freeBytes(b, path)

	base := lat["baseline"]
	during := slices.Concat(lat["write"], lat["verify"], lat["delete"])
	fmt.Fprintf(os.Stdout, "\narchive of a %d-row webhook log (made in %s, %d MB), rows older than 30 days: %d\n",
		rows, fill.Round(time.Second), dbBefore>>20, archived)
	fmt.Fprintf(os.Stdout, "  %-36s %10s %12s\n", "phase", "time", "rows/s")
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"write the file", tWrite}, {"read it back and check it", tVerify}, {fmt.Sprintf("delete, %d a batch", defaultDeleteBatch), tDelete}, {"all told", total}} {
		fmt.Fprintf(os.Stdout, "  %-36s %10s %12.0f\n", p.name, p.d.Round(time.Millisecond), float64(archived)/p.d.Seconds())
	}
	fmt.Fprintf(os.Stdout, "  file: %d bytes, %.1f a row (the database: %.0f a row)\n", fileBytes, float64(fileBytes)/float64(archived), float64(dbBefore)/float64(rows))
	fmt.Fprintf(os.Stdout, "  database after: %d MB on disk, %d MB of it free pages that new rows reuse (VACUUM gives them back)\n",
		fileSize(b, path)>>20, free>>20)
	fmt.Fprintf(os.Stdout, "  ingest's insert, one every 10 ms   %6s %10s %10s %10s\n", "n", "p50", "p99", "max")
	for _, l := range []struct {
		name string
		d    []time.Duration
	}{{"before the archive (baseline)", base}, {"while it writes the file", lat["write"]}, {"while it checks it", lat["verify"]},
		{"while it deletes", lat["delete"]}, {"while it runs, all told", during}} {
		fmt.Fprintf(os.Stdout, "    %-32s %6d %10s %10s %10s\n", l.name, len(l.d), pct(l.d, 50), pct(l.d, 99), pct(l.d, 100))
	}
	ratio := float64(pct(during, 99)) / float64(pct(base, 99))
	fmt.Fprintf(os.Stdout, "    p99 while it runs ÷ baseline: %.2f\n", ratio)
	fmt.Fprintf(os.Stdout, "  %-36s %10s %10s %8s\n", "command (median of 3)", "before", "after", "ratio")
	for i, cmd := range commands {
		fmt.Fprintf(os.Stdout, "  %-36s %10s %10s %8.2f\n", strings.Join(cmd, " "), before[i].Round(time.Millisecond), after[i].Round(time.Millisecond),
			float64(after[i])/float64(before[i]))
	}
	b.ReportMetric(float64(archived)/total.Seconds(), "rows/s")
	b.ReportMetric(ratio, "ingest-p99-ratio")
	b.ReportMetric(float64(fileBytes)/float64(archived), "file-bytes/row")
}

// fillLog makes a log of rows webhooks received over the year to now,
// about 20 a job, every one processed but for the last hundred, and the
// jobs they are of in primeJobs (created at their first webhook).
func fillLog(b *testing.B, path string, rows int, now time.Time) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	year := 365 * 24 * time.Hour
	step := year / time.Duration(rows)
	start := now.Add(-year)
	jobs := max(rows/20, 1)
	rnd := rand.New(rand.NewPCG(1, 2))
	guid := func() string {
		return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", rnd.Uint32(), rnd.Uint32()&0xffff, rnd.Uint32()&0xfff, rnd.Uint32()&0x3fff|0x8000, rnd.Uint64()&0xffffffffffff)
	}
	jobIDs := make([]string, jobs)
	for i := range jobIDs {
		jobIDs[i] = guid() // Prime's ids are random, and compress as such
	}
	job := func(i int) string { return jobIDs[i%jobs] }
	headers := `{"Accept-Encoding":["gzip"],"Api-Key":["(redacted)"],"Content-Length":["212"],"Content-Type":["application/json"],` +
		`"Traceparent":["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],"User-Agent":["Prime-Webhooks/2.1"],"X-Forwarded-For":["203.0.113.7"]}`
	actions := []string{"change-job-status", "create-appointment", "create-allocation", "create-estimate", "change-custom-form-status"}
	const chunk = 5000
	batch := make([]store.NewWebhookLogRow, 0, chunk)
	for i := range rows {
		action := actions[i%len(actions)]
		batch = append(batch, store.NewWebhookLogRow{ReceivedUTC: start.Add(time.Duration(i) * step), EventAction: action, JobID: job(i),
			Payload: fmt.Sprintf(`{"eventAction":"%s","jobId":%d,"jobStatusId":"%s","appointmentId":"%s",`+
				`"updatedBy":"ops@ethosbuilding.com.au","timestamp":"%s"}`, action, 2400000+i%jobs, job(i), guid(), start.Add(time.Duration(i)*step).Format(time.RFC3339)),
			Headers: headers, RemoteIP: "203.0.113.7", IsAuthenticated: true})
		if len(batch) == chunk || i == rows-1 {
			if _, err := st.InsertWebhookLogs(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	st.Close()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`UPDATE ethPrimeWebhookLog SET processedUTC = strftime('%Y-%m-%d %H:%M:%f', receivedUTC, '+2 seconds'),
			processStatus = 'Processed', publishedUTC = receivedUTC WHERE id <= (SELECT MAX(id) - 100 FROM ethPrimeWebhookLog)`,
		`INSERT INTO primeJobs (jobId, createdAt, syncedUTC)
			SELECT jobId, MIN(receivedUTC), MIN(receivedUTC) FROM ethPrimeWebhookLog GROUP BY jobId`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
}

// timeCommands runs each command three times and returns its median time.
func timeCommands(b *testing.B, env map[string]string, cmds [][]string) []time.Duration {
	b.Helper()
	out := make([]time.Duration, len(cmds))
	for i, cmd := range cmds {
		var ds []time.Duration
		for range 3 {
			start := time.Now()
			err := Run(context.Background(), cmd, func(k string) string { return env[k] }, strings.NewReader(""), io.Discard, io.Discard)
			ds = append(ds, time.Since(start))
			if _, exit := err.(*ExitStatus); err != nil && !exit { // status says NATS is not there: exit 2, measured all the same
				b.Fatalf("%v: %v", cmd, err)
			}
		}
		slices.Sort(ds)
		out[i] = ds[1]
	}
	return out
}

// ingestLoad inserts a webhook every 10 ms through a store of its own and
// keeps each insert's latency under the phase it was made in.
type ingestLoad struct {
	mu    sync.Mutex
	cur   string
	lat   map[string][]time.Duration
	stopc chan struct{}
	done  chan struct{}
	err   error
}

func startIngest(b *testing.B, path string) *ingestLoad {
	b.Helper()
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	l := &ingestLoad{cur: "baseline", lat: map[string][]time.Duration{}, stopc: make(chan struct{}), done: make(chan struct{})}
	row := store.NewWebhookLogRow{EventAction: "change-job-status", JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10",
		Payload: `{"eventAction":"change-job-status","jobId":2402073}`, Headers: `{}`, IsAuthenticated: true}
	go func() {
		defer close(l.done)
		defer st.Close()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stopc:
				return
			case <-tick.C:
			}
			row.ReceivedUTC = time.Now()
			start := time.Now()
			_, err := st.InsertWebhookLog(context.Background(), row)
			d := time.Since(start)
			l.mu.Lock()
			l.lat[l.cur] = append(l.lat[l.cur], d)
			if err != nil && l.err == nil {
				l.err = err
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// wait returns once the current phase has n inserts.
func (l *ingestLoad) wait(n int) {
	for {
		l.mu.Lock()
		got := len(l.lat[l.cur])
		l.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (l *ingestLoad) phase(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = name
}

func (l *ingestLoad) stop() map[string][]time.Duration {
	close(l.stopc)
	<-l.done
	if l.err != nil {
		panic(fmt.Sprintf("ingest's insert failed: %v", l.err))
	}
	return l.lat
}

// pct is the p-th percentile of ds (100: the greatest).
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	i := min(len(s)-1, (len(s)*p+99)/100-1)
	return s[max(i, 0)].Round(10 * time.Microsecond)
}

func fileSize(b *testing.B, path string) int64 {
	b.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// freeBytes is the database's free pages, in bytes.
func freeBytes(b *testing.B, path string) int64 {
	b.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var pages, size int64
	if err := db.QueryRow(`PRAGMA freelist_count`).Scan(&pages); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&size); err != nil {
		b.Fatal(err)
	}
	return pages * size
}
