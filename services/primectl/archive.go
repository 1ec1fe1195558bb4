package primectl

// primectl archive retires old rows without losing replay: the finished
// rows of the webhook log and of the queues no mirror reads once they are
// done (store.Archive) go to a gzip'd JSON-lines file, which is read back
// and checked, and only then are they deleted, a short batch at a time
// with a pause as long as the batch between, so ingest's inserts never
// wait for more than one batch. primectl replay --from-archive puts chosen
// log rows back, queued for replay under their own ids.
//
// The file: a header line, one line a row, a trailer line.
//
//	{"primeflowArchive":1,"before":"…","createdUTC":"…"}
//	{"table":"ethPrimeWebhookLog","row":{"id":42,"receivedUTC":"…",…}}
//	…
//	{"end":{"ethPrimeWebhookLog":{"rows":1,"sha256":"…"},…}}
//
// A row holds its table's columns by their names; a NULL is left out. The
// trailer gives each table's rows and the SHA-256 of their lines, in
// order, newline included, so the file can be checked whole (gzip checks
// its own bytes).

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// archiveVersion is the file format's version, in its header.
const archiveVersion = 1

type archiveHeader struct {
	Version    int       `json:"primeflowArchive"`
	Before     time.Time `json:"before"`
	CreatedUTC time.Time `json:"createdUTC"`
}

type archiveLine struct {
	Table store.ArchiveTable `json:"table"`
	Row   json.RawMessage    `json:"row"`
}

type archiveEnd struct {
	End map[store.ArchiveTable]archiveSum `json:"end"`
}

// archiveSum is a table's part of an archive: its rows and their lines'
// SHA-256.
type archiveSum struct {
	Rows   int    `json:"rows"`
	SHA256 string `json:"sha256"`
}

// sums adds up each table's lines as they are written or read.
type sums struct {
	rows   map[store.ArchiveTable]int
	hashes map[store.ArchiveTable]hash.Hash
}

func newSums() *sums {
	return &sums{rows: map[store.ArchiveTable]int{}, hashes: map[store.ArchiveTable]hash.Hash{}}
}

// add counts a line of t, without its newline (hashed with it).
func (s *sums) add(t store.ArchiveTable, line []byte) {
	h := s.hashes[t]
	if h == nil {
		h = sha256.New()
		s.hashes[t] = h
	}
	h.Write(line)
	h.Write([]byte{'\n'})
	s.rows[t]++
}

func (s *sums) end() map[store.ArchiveTable]archiveSum {
	out := map[store.ArchiveTable]archiveSum{}
	for t, n := range s.rows {
		out[t] = archiveSum{Rows: n, SHA256: hex.EncodeToString(s.hashes[t].Sum(nil))}
	}
	return out
}

// utcOrNil is a time as the file holds it: nil (left out) when zero.
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// webhookRecord is a row of ethPrimeWebhookLog as the file holds it.
type webhookRecord struct {
	ID              int64      `json:"id"`
	ReceivedUTC     time.Time  `json:"receivedUTC"`
	EventAction     string     `json:"eventAction,omitempty"`
	JobID           string     `json:"jobId,omitempty"`
	Payload         string     `json:"payload"`
	Headers         string     `json:"headers,omitempty"`
	RemoteIP        string     `json:"remoteIP,omitempty"`
	IsAuthenticated bool       `json:"isAuthenticated"`
	ProcessedUTC    *time.Time `json:"processedUTC,omitempty"`
	ProcessAttempts int        `json:"processAttempts"`
	ProcessStatus   string     `json:"processStatus,omitempty"`
	PublishedUTC    *time.Time `json:"publishedUTC,omitempty"`
	ReplayCount     int        `json:"replayCount"`
}

func webhookRecordOf(r store.WebhookLogRow) webhookRecord {
	return webhookRecord{ID: r.ID, ReceivedUTC: r.ReceivedUTC.UTC(), EventAction: r.EventAction, JobID: r.JobID, Payload: r.Payload,
		Headers: r.Headers, RemoteIP: r.RemoteIP, IsAuthenticated: r.IsAuthenticated, ProcessedUTC: utcOrNil(r.ProcessedUTC),
		ProcessAttempts: r.ProcessAttempts, ProcessStatus: r.ProcessStatus, PublishedUTC: utcOrNil(r.PublishedUTC), ReplayCount: r.ReplayCount}
}

func (w webhookRecord) row() store.WebhookLogRow {
	return store.WebhookLogRow{ID: w.ID, ReceivedUTC: w.ReceivedUTC.UTC(), EventAction: w.EventAction, JobID: w.JobID, Payload: w.Payload,
		Headers: w.Headers, RemoteIP: w.RemoteIP, IsAuthenticated: w.IsAuthenticated, ProcessedUTC: timeOf(w.ProcessedUTC),
		ProcessAttempts: w.ProcessAttempts, ProcessStatus: w.ProcessStatus, PublishedUTC: timeOf(w.PublishedUTC), ReplayCount: w.ReplayCount}
}

// smsRecord is a row of smsQueue as the file holds it.
type smsRecord struct {
	ID              int64      `json:"ID"`
	Recipient       string     `json:"Recipient"`
	Body            string     `json:"Body"`
	Source          string     `json:"Source,omitempty"`
	DedupeKey       string     `json:"DedupeKey,omitempty"`
	State           string     `json:"State"`
	Attempts        int        `json:"Attempts"`
	NextAttemptUTC  *time.Time `json:"NextAttemptUTC,omitempty"`
	ClaimedUntilUTC *time.Time `json:"ClaimedUntilUTC,omitempty"`
	LastError       string     `json:"LastError,omitempty"`
	QueuedUTC       *time.Time `json:"QueuedUTC,omitempty"`
	SentUTC         *time.Time `json:"SentUTC,omitempty"`
	FailedUTC       *time.Time `json:"FailedUTC,omitempty"`
	UpdatedUTC      *time.Time `json:"UpdatedUTC,omitempty"`
}

func smsRecordOf(m store.SMSMessage) smsRecord {
	return smsRecord{ID: m.ID, Recipient: m.Recipient, Body: m.Body, Source: m.Source, DedupeKey: m.DedupeKey, State: string(m.State),
		Attempts: m.Attempts, NextAttemptUTC: utcOrNil(m.NextAttemptUTC), ClaimedUntilUTC: utcOrNil(m.ClaimedUntilUTC), LastError: m.LastError,
		QueuedUTC: utcOrNil(m.QueuedUTC), SentUTC: utcOrNil(m.SentUTC), FailedUTC: utcOrNil(m.FailedUTC), UpdatedUTC: utcOrNil(m.UpdatedUTC)}
}

// inviteRecord is a row of ethTriageInviteQueue as the file holds it.
type inviteRecord struct {
	ID              int64      `json:"id"`
	JobID           string     `json:"jobId"`
	StatusID        string     `json:"statusId,omitempty"`
	QueuedUTC       *time.Time `json:"queuedUTC,omitempty"`
	SentUTC         *time.Time `json:"sentUTC,omitempty"`
	State           string     `json:"state"`
	Attempts        int        `json:"attempts"`
	NextAttemptUTC  *time.Time `json:"nextAttemptUTC,omitempty"`
	ClaimedUntilUTC *time.Time `json:"claimedUntilUTC,omitempty"`
	LastError       string     `json:"lastError,omitempty"`
	FailedUTC       *time.Time `json:"failedUTC,omitempty"`
	UpdatedUTC      *time.Time `json:"updatedUTC,omitempty"`
	JobVersion      int64      `json:"jobVersion,omitempty"`
	StatusLeftUTC   *time.Time `json:"statusLeftUTC,omitempty"`
	Payload         string     `json:"payload,omitempty"`
	StatusHistoryID string     `json:"statusHistoryId,omitempty"`
	JobUpdatedAt    *time.Time `json:"jobUpdatedAt,omitempty"`
}

func inviteRecordOf(t store.TriageInvite) inviteRecord {
	return inviteRecord{ID: t.ID, JobID: t.JobID, StatusID: t.StatusID, QueuedUTC: utcOrNil(t.QueuedUTC), SentUTC: utcOrNil(t.SentUTC),
		State: string(t.State), Attempts: t.Attempts, NextAttemptUTC: utcOrNil(t.NextAttemptUTC), ClaimedUntilUTC: utcOrNil(t.ClaimedUntilUTC),
		LastError: t.LastError, FailedUTC: utcOrNil(t.FailedUTC), UpdatedUTC: utcOrNil(t.UpdatedUTC), JobVersion: t.JobVersion,
		StatusLeftUTC: utcOrNil(t.StatusLeftUTC), Payload: t.Payload, StatusHistoryID: t.StatusHistoryID, JobUpdatedAt: utcOrNil(t.JobUpdatedAt)}
}

// receiptRecord is a row of PrimeEmailJobRegistered as the file holds it.
type receiptRecord struct {
	ID                int64      `json:"id"`
	InternetMessageID string     `json:"internetMessageId,omitempty"`
	Subject           string     `json:"subject,omitempty"`
	ReceivedDateTime  *time.Time `json:"receivedDateTime,omitempty"`
	FromAddress       string     `json:"fromAddress,omitempty"`
	BodyPreview       string     `json:"bodyPreview,omitempty"`
	JobID             string     `json:"JobID,omitempty"`
	JobIDKind         string     `json:"JobIDKind,omitempty"`
	NumericReference  int64      `json:"NumericReference,omitempty"`
	JobNumber         string     `json:"JobNumber,omitempty"`
	PrimeJobID        string     `json:"primeJobId,omitempty"`
	Outcome           string     `json:"outcome"`
	LastError         string     `json:"lastError,omitempty"`
	Attempts          int        `json:"attempts"`
	MovedUTC          *time.Time `json:"movedUTC,omitempty"`
	MovedTo           string     `json:"movedTo,omitempty"`
	RegisteredUTC     *time.Time `json:"registeredUTC,omitempty"`
	UpdatedUTC        *time.Time `json:"updatedUTC,omitempty"`
}

func receiptRecordOf(r store.EmailReceipt) receiptRecord {
	return receiptRecord{ID: r.ID, InternetMessageID: r.InternetMessageID, Subject: r.Subject, ReceivedDateTime: utcOrNil(r.ReceivedUTC),
		FromAddress: r.From, BodyPreview: r.BodyPreview, JobID: r.JobID, JobIDKind: r.JobIDKind, NumericReference: r.NumericReference,
		JobNumber: r.JobNumber, PrimeJobID: r.PrimeJobID, Outcome: r.Outcome, LastError: r.LastError, Attempts: r.Attempts,
		MovedUTC: utcOrNil(r.MovedUTC), MovedTo: r.MovedTo, RegisteredUTC: utcOrNil(r.RegisteredUTC), UpdatedUTC: utcOrNil(r.UpdatedUTC)}
}

// archivePage is one page of a table's finished rows: their records and
// ids, oldest first.
type archivePage func(ctx context.Context, st store.Store, before time.Time, after int64) (records []any, ids []int64, err error)

// pageOf makes an archivePage of a store's list method.
func pageOf[T, R any](list func(store.Store) func(context.Context, time.Time, int64, int) ([]T, error), record func(T) R, id func(R) int64) archivePage {
	return func(ctx context.Context, st store.Store, before time.Time, after int64) ([]any, []int64, error) {
		rows, err := list(st)(ctx, before, after, store.MaxArchiveBatch)
		if err != nil {
			return nil, nil, err
		}
		records, ids := make([]any, len(rows)), make([]int64, len(rows))
		for i, r := range rows {
			rec := record(r)
			records[i], ids[i] = rec, id(rec)
		}
		return records, ids, nil
	}
}

// archivePages are the tables' pages, each as its table's list method reads them.
var archivePages = map[store.ArchiveTable]archivePage{
	store.ArchiveWebhookLog: pageOf(func(st store.Store) func(context.Context, time.Time, int64, int) ([]store.WebhookLogRow, error) {
		return st.ListArchivableWebhookLog
	}, webhookRecordOf, func(r webhookRecord) int64 { return r.ID }),
	store.ArchiveSMS: pageOf(func(st store.Store) func(context.Context, time.Time, int64, int) ([]store.SMSMessage, error) {
		return st.ListArchivableSMS
	}, smsRecordOf, func(r smsRecord) int64 { return r.ID }),
	store.ArchiveTriageInvites: pageOf(func(st store.Store) func(context.Context, time.Time, int64, int) ([]store.TriageInvite, error) {
		return st.ListArchivableTriageInvites
	}, inviteRecordOf, func(r inviteRecord) int64 { return r.ID }),
	store.ArchiveEmailReceipts: pageOf(func(st store.Store) func(context.Context, time.Time, int64, int) ([]store.EmailReceipt, error) {
		return st.ListArchivableEmailReceipts
	}, receiptRecordOf, func(r receiptRecord) int64 { return r.ID }),
}

// streamKeeps says how long JetStream keeps a stream's messages
// (streams/NAME.json), and so what of the archive only SQL held.
func streamKeeps(name string) (string, error) {
	cfgs, err := events.StreamConfigs(0)
	if err != nil {
		return "", err
	}
	for _, cfg := range cfgs {
		if cfg.Name != name {
			continue
		}
		size := "no size limit"
		if cfg.MaxBytes > 0 {
			size = fmt.Sprintf("at most %d bytes", cfg.MaxBytes)
		}
		if cfg.MaxAge <= 0 {
			return fmt.Sprintf("%s keeps its messages with no age limit (%s, streams/%s.json).", name, size, name), nil
		}
		return fmt.Sprintf("%s keeps each event %s (%s, streams/%s.json): archived rows received before then are in this file only; "+
			"a nats pub replay of one finds no row (the resolver drops it): replay --from-archive puts it back.", name, days(cfg.MaxAge), size, name), nil
	}
	return "", fmt.Errorf("no stream %s in streams/", name)
}

// days is d in days when it is whole days.
func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// defaultDeleteBatch is how many rows a delete batch takes (--batch).
const defaultDeleteBatch = 250

func (c *cli) archive(ctx context.Context, args []string) error {
	fs := c.flags("archive")
	beforeFlag := fs.String("before", "", "archive the rows finished before T (required)")
	out := fs.String("out", "", "the archive file to write (default primeflow-archive-<T>.jsonl.gz here); never overwritten")
	batch := fs.Int("batch", defaultDeleteBatch, fmt.Sprintf("rows a delete takes, at most %d: one short transaction each", store.MaxArchiveBatch))
	yes := fs.Bool("yes", false, "do not ask before archiving and deleting")
	pos, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || *beforeFlag == "" {
		fmt.Fprintln(c.stderr, "primectl archive: give --before T, and no arguments")
		return ErrUsage
	}
	now := c.now()
	before, err := parseTime(*beforeFlag, now)
	if err != nil {
		return fmt.Errorf("--before: %w", err)
	}
	if before.After(now) {
		return fmt.Errorf("--before %s is to come: only rows finished before now can be archived", before.Format(time.RFC3339))
	}
	if *batch <= 0 || *batch > store.MaxArchiveBatch {
		return fmt.Errorf("--batch %d: want 1 to %d", *batch, store.MaxArchiveBatch)
	}
	path := *out
	if path == "" {
		path = "primeflow-archive-" + before.UTC().Format("20060102T150405Z") + ".jsonl.gz"
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("archive file %s exists: an archive is never overwritten (--out names another)", path)
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	counts, err := st.CountArchivable(ctx, before)
	if err != nil {
		return err
	}
	total := 0
	fmt.Fprintf(c.stdout, "rows finished before %s UTC:\n", before.Format(timeLayout))
	for _, t := range store.ArchiveTables() {
		fmt.Fprintf(c.stdout, "  %-24s %d\n", t, counts[t])
		total += counts[t]
	}
	if total == 0 {
		fmt.Fprintln(c.stdout, "Nothing to archive.")
		return nil
	}
	if kept, err := streamKeeps(events.StreamWebhook); err == nil {
		fmt.Fprintln(c.stdout, kept)
	}
	if ok, err := c.confirm(*yes, fmt.Sprintf("Write %s to %s, check it, then delete them from the database?", count(total, "row"), path),
		"Nothing archived."); !ok {
		return err
	}
	a := archiver{st: st, before: before, batch: *batch, now: now}
	start := time.Now()
	written, err := a.write(ctx, path)
	if err == nil {
		err = verifyArchive(path, written)
	}
	if err != nil {
		if !errors.Is(err, os.ErrExist) {
			os.Remove(path) // a file that is not the archive it should be
		}
		return fmt.Errorf("%w; nothing deleted", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	rows := 0
	for _, s := range written {
		rows += s.Rows
	}
	fmt.Fprintf(c.stdout, "%s written to %s and checked (%d bytes, %.0f a row)\n", count(rows, "row"), path, fi.Size(), float64(fi.Size())/float64(max(rows, 1)))
	deleted, err := a.deleteArchived(ctx, path)
	for _, t := range store.ArchiveTables() {
		if n := written[t].Rows; n > 0 {
			fmt.Fprintf(c.stdout, "  %-24s %d archived, %d deleted", t, n, deleted[t])
			if kept := n - deleted[t]; kept > 0 && err == nil {
				fmt.Fprintf(c.stdout, ", %d kept: changed since they were read (a row replayed, an email moved back)", kept)
			}
			fmt.Fprintln(c.stdout)
		}
	}
	if err != nil {
		return fmt.Errorf("%w (what was deleted is in %s; archive again, into another --out, to take the rest)", err, path)
	}
	elapsed := time.Since(start)
	fmt.Fprintf(c.stdout, "done in %s (%.0f rows/s); replay: primectl replay --from-archive %s [filters]\n",
		elapsed.Round(time.Millisecond), float64(rows)/elapsed.Seconds(), path)
	return nil
}

// archiver writes and deletes one archive.
type archiver struct {
	st     store.Store
	before time.Time
	batch  int
	now    time.Time
}

// write writes every table's finished rows to a new file at path, synced,
// and returns what it wrote.
func (a archiver) write(ctx context.Context, path string) (map[store.ArchiveTable]archiveSum, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("archive file: %w", err)
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	zw := gzip.NewWriter(bw)
	sum := newSums()
	writeLine := func(v any) ([]byte, error) {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if _, err := zw.Write(append(b, '\n')); err != nil {
			return nil, err
		}
		return b, nil
	}
	if _, err := writeLine(archiveHeader{Version: archiveVersion, Before: a.before.UTC(), CreatedUTC: a.now.UTC()}); err != nil {
		return nil, err
	}
	for _, t := range store.ArchiveTables() {
		for after := int64(0); ; {
			records, ids, err := archivePages[t](ctx, a.st, a.before, after)
			if err != nil {
				return nil, err
			}
			for _, rec := range records {
				row, err := json.Marshal(rec)
				if err != nil {
					return nil, err
				}
				line, err := writeLine(archiveLine{Table: t, Row: row})
				if err != nil {
					return nil, fmt.Errorf("archive file: %w", err)
				}
				sum.add(t, line)
			}
			if len(ids) < store.MaxArchiveBatch {
				break
			}
			after = ids[len(ids)-1]
		}
	}
	written := sum.end()
	if _, err := writeLine(archiveEnd{End: written}); err != nil {
		return nil, fmt.Errorf("archive file: %w", err)
	}
	if err := errors.Join(zw.Close(), bw.Flush(), f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("archive file: %w", err)
	}
	return written, nil
}

// readArchive reads an archive file through, checking it whole: its
// header, every line's table and JSON, the gzip stream, and each table's
// rows and checksum against its trailer (and against want, when given). It
// calls row for each row, in the file's order.
func readArchive(path string, want map[store.ArchiveTable]archiveSum, row func(store.ArchiveTable, json.RawMessage) error) (archiveHeader, error) {
	var h archiveHeader
	f, err := os.Open(path)
	if err != nil {
		return h, fmt.Errorf("archive file: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return h, fmt.Errorf("archive %s: not a gzip'd archive: %w", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20) // a payload may be large; a line holds one
	bad := func(n int, why string) error { return fmt.Errorf("archive %s: line %d: %s", path, n, why) }
	sum := newSums()
	var end *archiveEnd
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		switch {
		case n == 1:
			if json.Unmarshal(line, &h) != nil || h.Version != archiveVersion {
				return h, bad(n, "not a primeflow archive's header")
			}
			continue
		case end != nil:
			return h, bad(n, "a line after the trailer")
		case bytes.HasPrefix(line, []byte(`{"end":`)):
			end = &archiveEnd{}
			if err := json.Unmarshal(line, end); err != nil {
				return h, bad(n, "a trailer that is not JSON")
			}
			continue
		}
		var l archiveLine
		if err := json.Unmarshal(line, &l); err != nil || archivePages[l.Table] == nil || !json.Valid(l.Row) {
			return h, bad(n, "not a row of a table the archive holds")
		}
		sum.add(l.Table, line)
		if row != nil {
			if err := row(l.Table, l.Row); err != nil {
				return h, bad(n, err.Error())
			}
		}
	}
	if err := sc.Err(); err != nil {
		return h, fmt.Errorf("archive %s: %w", path, err)
	}
	if end == nil {
		return h, fmt.Errorf("archive %s: no trailer: the file is cut short", path)
	}
	got := sum.end()
	if !maps.Equal(got, end.End) {
		return h, fmt.Errorf("archive %s: its rows are not what its trailer says (%v, the trailer %v)", path, got, end.End)
	}
	if want != nil && !maps.Equal(got, want) {
		return h, fmt.Errorf("archive %s: it holds %v, not the %v written", path, got, want)
	}
	return h, nil
}

// verifyArchive reads the file back and checks it holds what was written.
func verifyArchive(path string, written map[store.ArchiveTable]archiveSum) error {
	_, err := readArchive(path, written, func(t store.ArchiveTable, row json.RawMessage) error {
		if t == store.ArchiveWebhookLog {
			var r webhookRecord
			return json.Unmarshal(row, &r) // replay reads it so
		}
		return nil
	})
	return err
}

// rowID is the id of a row as the file holds it, under either spelling.
func rowID(row json.RawMessage) (int64, error) {
	var ids struct {
		Lower *int64 `json:"id"`
		Upper *int64 `json:"ID"`
	}
	if err := json.Unmarshal(row, &ids); err != nil {
		return 0, err
	}
	switch {
	case ids.Lower != nil:
		return *ids.Lower, nil
	case ids.Upper != nil:
		return *ids.Upper, nil
	}
	return 0, errors.New("a row without an id")
}

// deleteArchived deletes the rows the checked file holds, a batch at a
// time, and pauses after each batch as long as it took: the database is
// free at least half the time, so ingest's inserts wait for one batch at
// the most. It returns how many rows of each table it deleted.
func (a archiver) deleteArchived(ctx context.Context, path string) (map[store.ArchiveTable]int, error) {
	deleted := map[store.ArchiveTable]int{}
	pending := map[store.ArchiveTable][]int64{}
	flush := func(t store.ArchiveTable) error {
		ids := pending[t]
		if len(ids) == 0 {
			return nil
		}
		start := time.Now()
		n, err := a.st.DeleteArchived(ctx, t, a.before, ids)
		if err != nil {
			return err
		}
		deleted[t] += n
		pending[t] = ids[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Since(start)):
		}
		return nil
	}
	_, err := readArchive(path, nil, func(t store.ArchiveTable, row json.RawMessage) error {
		id, err := rowID(row)
		if err != nil {
			return err
		}
		pending[t] = append(pending[t], id)
		if len(pending[t]) < a.batch {
			return nil
		}
		return flush(t)
	})
	if err != nil {
		return deleted, err
	}
	for _, t := range slices.Sorted(maps.Keys(pending)) {
		if err := flush(t); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// replayFromArchive puts the archived log rows f selects back, queued for
// replay under their own ids (store.Archive.RestoreWebhookLog): the file
// is read once to count them and make sure of any row named, and again to
// restore them a batch at a time.
func (c *cli) replayFromArchive(ctx context.Context, path string, f store.LogFilter, yes, now bool) error {
	chosen := func(each func(store.WebhookLogRow) error) (archiveHeader, error) {
		return readArchive(path, nil, func(t store.ArchiveTable, row json.RawMessage) error {
			if t != store.ArchiveWebhookLog {
				return nil
			}
			var rec webhookRecord
			if err := json.Unmarshal(row, &rec); err != nil {
				return err
			}
			if r := rec.row(); f.Matches(r) {
				return each(r)
			}
			return nil
		})
	}
	n := 0
	found := map[int64]bool{}
	h, err := chosen(func(r store.WebhookLogRow) error {
		n++
		if len(f.IDs) > 0 {
			found[r.ID] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range f.IDs {
		if !found[id] {
			missing = append(missing, fmt.Sprint(id))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("replay: no row %s in %s; nothing restored", strings.Join(missing, ", "), path)
	}
	fmt.Fprintf(c.stdout, "%s of %s (rows finished before %s UTC) would be put back and queued for replay\n",
		count(n, "row"), path, h.Before.Format(timeLayout))
	if n == 0 {
		return nil
	}
	st, err := c.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if now {
		if err := c.reachIngest(ctx); err != nil {
			return fmt.Errorf("%w; nothing restored", err)
		}
	}
	if ok, err := c.confirm(yes, fmt.Sprintf("Put back %s?", count(n, "row")), "Nothing restored."); !ok {
		return err
	}
	restored, present := 0, 0
	var batch []store.WebhookLogRow
	restore := func() error {
		ids, err := st.RestoreWebhookLog(ctx, batch)
		restored, present, batch = restored+len(ids), present+len(batch)-len(ids), batch[:0]
		return err
	}
	_, err = chosen(func(r store.WebhookLogRow) error {
		if batch = append(batch, r); len(batch) == store.MaxArchiveBatch {
			return restore()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = restore()
	}
	fmt.Fprintf(c.stdout, "%s put back: ingest's relay publishes them again\n", count(restored, "row"))
	if present > 0 {
		fmt.Fprintf(c.stdout, "%s already in the log, left as they are (primectl replay ID… resets them)\n", count(present, "row"))
	}
	if err != nil {
		return err
	}
	if now && restored > 0 {
		return c.processNow(ctx)
	}
	return nil
}
