package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/cputime"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// insertLogReturningSQL is the webhook log insert as it was: the id through
// RETURNING.
var insertLogReturningSQL = prepare(insertLogSQL + ` RETURNING id`)

// BenchmarkInsertRowAgainstReturning measures a webhook log row inserted as
// ingest inserts it — 8 rows a transaction, one durable commit — with the id
// read off the result (insertRow), against the same insert with RETURNING id
// measured in the same run. It prints CPU and wall time a row for both.
func BenchmarkInsertRowAgainstReturning(b *testing.B) {
	ctx := context.Background()
	for range b.N {
		base := insertRows(b, func(tx *Store, row store.NewWebhookLogRow) (id int64, err error) {
			err = tx.w().QueryRowContext(ctx, insertLogReturningSQL, insertLogArgs(row)...).Scan(&id)
			return id, err
		})
		got := insertRows(b, func(tx *Store, row store.NewWebhookLogRow) (int64, error) {
			return tx.InsertWebhookLog(ctx, row)
		})
		fmt.Fprintf(os.Stdout, "\nwebhook log insert, 8 rows a commit (baseline: RETURNING id)\n")
		fmt.Fprintf(os.Stdout, "  %-10s %12s %12s\n", "", "CPU/row", "wall/row")
		fmt.Fprintf(os.Stdout, "  %-10s %12s %12s\n", "RETURNING", base.cpu.Round(100*time.Nanosecond), base.wall.Round(100*time.Nanosecond))
		fmt.Fprintf(os.Stdout, "  %-10s %12s %12s\n", "rowid", got.cpu.Round(100*time.Nanosecond), got.wall.Round(100*time.Nanosecond))
		fmt.Fprintf(os.Stdout, "  CPU ratio rowid/RETURNING: %.2f\n", float64(got.cpu)/float64(base.cpu))
		b.ReportMetric(float64(got.cpu)/float64(base.cpu), "cpu-ratio")
		b.ReportMetric(float64(got.cpu.Nanoseconds()), "cpu-ns/row")
	}
}

type perRow struct{ cpu, wall time.Duration }

// insertRows inserts 8,000 rows with insert into a new database, 8 a
// transaction, checks that each got the next id, and measures them.
func insertRows(b *testing.B, insert func(*Store, store.NewWebhookLogRow) (int64, error)) perRow {
	b.Helper()
	const rows, group = 8000, 8
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "primeflow.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	row := store.NewWebhookLogRow{ReceivedUTC: time.Now(), EventAction: "change-job-status", JobID: "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10",
		Payload:  `{"eventAction":"change-job-status","jobId":259047,"jobStatusId":"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`,
		Headers:  `{"Api-Key":["(redacted)"],"Content-Length":["106"],"Content-Type":["application/json"],"Host":["127.0.0.1:8080"]}`,
		RemoteIP: "127.0.0.1", IsAuthenticated: true}
	var want int64 = 1
	cpu0, start := cputime.Process(), time.Now()
	for range rows / group {
		err := s.InTx(ctx, func(tx store.Store) error {
			for range group {
				id, err := insert(tx.(*Store), row)
				if err != nil {
					return err
				}
				if id != want {
					return fmt.Errorf("inserted row got id %d, want %d", id, want)
				}
				want++
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return perRow{cpu: (cputime.Process() - cpu0) / rows, wall: time.Since(start) / rows}
}
