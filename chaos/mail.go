package chaos

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// mailService is the binary the mail scenario runs beside Services.
const mailService = "mail-intake"

// The folders of the Graph simulator's mailbox the intake reads and files in.
var (
	mailFolder      = graphsim.DefaultFolders[0]
	processedFolder = graphsim.DefaultFolders[1]
	failedFolder    = graphsim.DefaultFolders[2]
)

// mailEnv is mail-intake's environment in the mail scenario: the Graph
// simulator's mailbox, polled every second, two attempts for an email's own
// fault (so that an outage counted as attempts would fail emails within
// its seconds), and no jobs-by-date sweep, so that only the emails bring
// the jobs that only they tell of.
func mailEnv(ext *externals) []string {
	g := ext.graph.ClientConfig(ext.url + "/graph")
	return []string{
		"GRAPH_TENANT_ID=" + g.TenantID, "GRAPH_CLIENT_ID=" + g.ClientID, "GRAPH_CLIENT_SECRET=" + g.ClientSecret,
		"GRAPH_API_URL=" + g.APIURL, "GRAPH_TOKEN_URL=" + g.TokenURL, "GRAPH_TIMEOUT=5s",
		"MAIL_USER=" + ext.graph.User(), "MAIL_FOLDER=" + mailFolder, "MAIL_PROCESSED_FOLDER=" + processedFolder,
		"MAIL_FAILED_FOLDER=" + failedFolder, "MAIL_ALLOWED_SENDERS=" + graphsim.DefaultFrom,
		"MAIL_POLL_INTERVAL=1s", "MAIL_MAX_ATTEMPTS=2", "MAIL_WAIT_BACKOFF=1s,2s,5s", "MAIL_MAX_BODY_BYTES=2097152",
		"JOBS_SWEEP_EVERY=off",
	}
}

// mailOutages are the mail scenario's faults, at fixed points of the fault
// phase while the emails arrive, apart from each other and from the
// database lock (at a third), so that each meets the intake at work:
// Prime answering 503 to every call at 10%, for 20 s; Graph not answering
// at 45%; every move failing 503 at 60%; Prime not answering (past
// PRIME_TIMEOUT) at 70%; Graph throttling at 80% and Prime's 429 at 85%;
// and the processed folder deleted at 90% and made again 8 s later, once
// mail-intake has found its folders. While it is deleted, mail-intake is
// not killed: started into a folder that is
// not there, it refuses to start, naming the setting, as it must for a
// folder misnamed (the one it runs with looks the folder up again).
func (f *faults) mailOutages(at func(float64, func(context.Context))) {
	at(0.1, func(ctx context.Context) {
		f.primeStorm(ctx, "outage", primesim.Faults{Latency: primeLatency, FailNext: 1 << 30, FailStatus: 503}, 20*time.Second)
	})
	at(0.45, func(ctx context.Context) { f.graphStorm(ctx, "no answer", graphsim.Faults{Down: true}, 12*time.Second) })
	at(0.6, func(ctx context.Context) {
		f.graphStorm(ctx, "503 on every move", graphsim.Faults{Path: "/move", FailNext: 1 << 30, FailStatus: 503}, 10*time.Second)
	})
	at(0.7, func(ctx context.Context) {
		f.primeStorm(ctx, "no answer", primesim.Faults{Latency: 12 * time.Second}, 12*time.Second)
	})
	at(0.8, func(ctx context.Context) {
		f.graphStorm(ctx, "throttling", graphsim.Faults{ThrottleNext: 40, RetryAfter: graphsim.Duration(2 * time.Second)}, 10*time.Second)
	})
	at(0.85, func(ctx context.Context) {
		f.primeStorm(ctx, "429", primesim.Faults{Latency: primeLatency, RateLimitFor: 8 * time.Second, RetryAfter: 2 * time.Second}, 8*time.Second)
	})
	at(0.9, func(ctx context.Context) {
		release, ok := f.spare(ctx, mailService)
		if !ok {
			return
		}
		defer release()
		if !f.mailReading(ctx) {
			return
		}
		f.storm(ctx, "Graph: "+processedFolder+" deleted", 8*time.Second, func() {
			gone, err := f.ext.graph.DeleteFolder(processedFolder)
			if err != nil {
				f.logf("delete %s: %v", processedFolder, err)
			}
			f.mail.deletedByHand(gone)
			f.logf("Graph: %d emails deleted with %s", len(gone), processedFolder)
		}, func() {
			if err := f.ext.graph.MakeFolder(processedFolder); err != nil {
				f.logf("make %s: %v", processedFolder, err)
			}
		})
	})
}

// mailReading waits until the running mail-intake has found its folders
// ("reading the mailbox"). Healthy is not enough: /healthz answers before
// the intake resolves them, and one killed just before the processed
// folder is deleted would start into the gap and refuse to run (seed
// 6915833250410304802: "MAIL_PROCESSED_FOLDER … not found", exits=1).
func (f *faults) mailReading(ctx context.Context) bool {
	f.mu.Lock()
	p := f.st.services[mailService]
	f.mu.Unlock()
	for !strings.Contains(p.IncarnationLog(p.Starts()), "reading the mailbox") {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return true
}

// graphStorm answers Graph's calls with fs for d.
func (f *faults) graphStorm(ctx context.Context, what string, fs graphsim.Faults, d time.Duration) {
	f.storm(ctx, "Graph "+what, d, func() { f.ext.graph.SetFaults(fs) }, func() { f.ext.graph.SetFaults(graphsim.Faults{}) })
}

// email is one email the mail workload drops into the mailbox, and what
// must become of it.
type email struct {
	msgID string
	kind  string
	// job is the job whose JobID it carries that Prime knows, from Prime's
	// sender: it must be mirrored, and the email filed as processed. ""
	// for the others, which must end in the failed folder.
	job string
	// refused: not Prime's, so its receipt must say Rejected (junk, for
	// nobody), where the others in the failed folder say Failed.
	refused bool
}

// mailWorkload drops Prime's new-job emails, and some that are not, into
// the mailbox.
type mailWorkload struct {
	ext *externals
	w   *workload
	rng *rand.Rand
	on  bool

	mu     sync.Mutex
	emails []email
	// deleted are the emails a person deleted with their folder, by
	// internetMessageId: the folder each was in.
	deleted map[string]string
}

func newMailWorkload(ext *externals, w *workload, rng *rand.Rand, on bool) *mailWorkload {
	return &mailWorkload{ext: ext, w: w, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), on: on, deleted: map[string]string{}}
}

// The kinds of email, and how many of each a run sends.
var mailKinds = []struct {
	kind string
	n    int
}{
	{"new job", 12},           // a job only the email tells of, as Prime's notification is
	{"large", 2},              // the same, 1.4 MB
	{"link only", 2},          // the job's GUID only in a link's href
	{"webhook job", 3},        // a job of the webhook workload: both paths
	{"unknown job", 1},        // a JobID Prime does not know: failed after its attempts
	{"no JobID", 1},           // failed after its attempts
	{"relayed", 1},            // Prime's, signed by its sending service's subdomain, no DMARC: aligned
	{"not Prime's sender", 1}, // a known job's JobID from another sender: refused unread
	{"spoofed", 1},            // from Prime's address, failing DMARC and DKIM: refused unread
	{"too large", 1},          // over MAIL_MAX_BODY_BYTES: failed unread
}

// run drops the emails, in a random order, spread over window.
func (m *mailWorkload) run(ctx context.Context, window time.Duration, logf func(string, ...any)) {
	if !m.on {
		return
	}
	var kinds []string
	for _, k := range mailKinds {
		for range k.n {
			kinds = append(kinds, k.kind)
		}
	}
	m.rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	start := time.Now()
	for i, kind := range kinds {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(window * time.Duration(i) / time.Duration(len(kinds))))):
		}
		e, err := m.send(kind)
		if err != nil {
			logf("email %s: %v", kind, err)
			continue
		}
		m.mu.Lock()
		m.emails = append(m.emails, e)
		m.mu.Unlock()
	}
}

// authResults is an Authentication-Results header as Exchange Online writes it.
func authResults(result string) graph.Header {
	return graph.Header{Name: "Authentication-Results", Value: fmt.Sprintf(
		"spf=%[1]s (sender IP is 198.51.100.7) smtp.mailfrom=primeeco.tech; dkim=%[1]s (signature was verified) header.d=primeeco.tech;dmarc=%[1]s action=none header.from=primeeco.tech;compauth=%[1]s reason=100", result)}
}

// notification is Prime's notification for a reference, as Outlook's HTML.
func notification(ref int64, number string) string {
	return fmt.Sprintf(`<html><body><p>{ &quot;JobID&quot;: &#39;%d&#39;, &quot;JobNumber&quot;: &#39;%s&#39; }</p></body></html>`, ref, number)
}

// send drops one email of a kind.
func (m *mailWorkload) send(kind string) (email, error) {
	sim := m.ext.prime
	n := graphsim.NewMessage{Folder: mailFolder, Subject: "New Job", Headers: []graph.Header{authResults("pass")}}
	e := email{kind: kind}
	switch kind {
	case "new job", "large", "relayed", "not Prime's sender":
		j := sim.NewJob()
		n.Subject, n.Body = "New Job "+j.JobNumber, notification(j.Ref, j.JobNumber)
		e.job = j.ID
		switch kind {
		case "large":
			n.PadTo = 1_400_000
		case "relayed":
			n.Headers = []graph.Header{{Name: "Authentication-Results", Value: "spf=pass (sender IP is 198.51.100.7) smtp.mailfrom=em1234.primeeco.tech; " +
				"dkim=pass (signature was verified) header.d=em1234.primeeco.tech;dmarc=none action=none header.from=primeeco.tech;compauth=pass reason=109"}}
		case "not Prime's sender":
			n.From, n.Headers, e.job, e.refused = "jobs@elsewhere.example", nil, "", true
		}
	case "link only":
		j := sim.NewJob()
		n.Body = fmt.Sprintf(`<p>A job was registered: <a href="https://www.primeeco.tech/jobs/%s">%s</a></p>`, j.ID, j.JobNumber)
		e.job = j.ID
	case "webhook job":
		var id string
		for _, j := range m.w.snapshot() {
			if j.id != "" && m.rng.IntN(2) == 0 {
				id = j.id
				break
			}
		}
		j, ok := sim.Job(id)
		if !ok {
			j = sim.NewJob() // no webhook job started yet
		}
		n.Body, e.job = notification(j.Ref, j.JobNumber), j.ID
	case "unknown job":
		n.Body = notification(99_000_000+m.rng.Int64N(999_999), "J999999")
	case "no JobID":
		n.Body = "<p>Thanks, we will be in touch.</p>"
	case "spoofed":
		j := sim.NewJob()
		n.Body, n.Headers = notification(j.Ref, j.JobNumber), []graph.Header{authResults("fail")}
		e.refused = true
	case "too large":
		n.Body, n.PadTo = "<p>See the attachment.</p>", 3<<20
	}
	msg, err := m.ext.graph.Deliver(n)
	e.msgID = msg.InternetMessageID
	return e, err
}

// failedOutcome is the receipt an email that is not filed as processed
// must end with: Rejected for one refused as not Prime's, Failed for the
// others.
func failedOutcome(e email) string {
	if e.refused {
		return store.EmailRejected
	}
	return store.EmailFailed
}

func (m *mailWorkload) sent() []email {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]email(nil), m.emails...)
}

// deletedByHand notes the emails a person deleted with their folder.
func (m *mailWorkload) deletedByHand(gone []graphsim.Message) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, g := range gone {
		m.deleted[g.InternetMessageID] = g.Folder
	}
}

// deletedIn is the folder an email was in when a person deleted it; "" for
// none.
func (m *mailWorkload) deletedIn(msgID string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deleted[msgID]
}

// mailReport is the mail scenario's invariants as they stand.
type mailReport struct {
	mailPending     []string // emails still in the folder
	mailLost        []string // emails in no folder, or in two
	mailFailedKnown []string // emails with a JobID Prime knows, from Prime, in the failed folder
	mailMisfiled    []string // emails that are not Prime's notification of a job it knows, in the processed folder
	mailReceipt     []string // receipts that do not say what became of the email
	mailJobPending  []string // jobs an email brought, not mirrored or their pipeline not completed
}

func (r mailReport) settled() bool {
	return len(r.mailPending)+len(r.mailJobPending)+len(r.mailReceipt) == 0
}

func (r mailReport) waitingFor(out *lines) {
	out.waiting("emails still in "+mailFolder, r.mailPending)
	out.waiting("jobs of emails not mirrored or their pipeline pending", r.mailJobPending)
	out.waiting("email receipts not final", r.mailReceipt)
}

func (r mailReport) violations(out *lines) {
	out.broken("no email in the failed folder had a JobID Prime knows", r.mailFailedKnown)
	out.broken("every email is worked and filed", r.mailPending)
	out.broken("every email is in one folder", r.mailLost)
	out.broken("only Prime's notifications of jobs it knows are filed as processed", r.mailMisfiled)
	out.broken("every email's receipt says what became of it", r.mailReceipt)
	out.broken("every job an email brought is mirrored, its pipeline completed", r.mailJobPending)
}

// checkMail: every email is in one folder — Prime's notifications of jobs
// Prime knows in the processed folder, never the failed one, their receipts
// Processed with the job's GUID and their jobs mirrored with their
// pipelines completed; the others in the failed folder, their receipts
// saying why.
func checkMail(ctx context.Context, db *sql.DB, ext *externals, mw *mailWorkload, r *mailReport) error {
	emails := mw.sent()
	if len(emails) == 0 {
		return nil
	}
	where := map[string][]string{}
	for _, folder := range []string{mailFolder, processedFolder, failedFolder} {
		for _, m := range ext.graph.Messages(folder) {
			where[m.InternetMessageID] = append(where[m.InternetMessageID], folder)
		}
	}
	type receipt struct{ outcome, jobID, lastError string }
	receipts := map[string]receipt{}
	err := query(ctx, db, `SELECT internetMessageId, outcome, COALESCE(primeJobId, ''), COALESCE(lastError, '') FROM PrimeEmailJobRegistered`,
		func(sc *sql.Rows) error {
			var id string
			var x receipt
			if err := sc.Scan(&id, &x.outcome, &x.jobID, &x.lastError); err != nil {
				return err
			}
			receipts[id] = x
			return nil
		})
	if err != nil {
		return err
	}
	done := map[string]string{} // job → "mirrored", "completed"
	err = query(ctx, db, `SELECT j.jobId, f.pipelineCompletedUTC IS NOT NULL FROM primeJobs j LEFT JOIN primeflowJobFirstSeen f ON f.jobId = j.jobId`,
		func(sc *sql.Rows) error {
			var id string
			var completed bool
			if err := sc.Scan(&id, &completed); err != nil {
				return err
			}
			done[id] = "mirrored"
			if completed {
				done[id] = "completed"
			}
			return nil
		})
	if err != nil {
		return err
	}
	for _, e := range emails {
		what := fmt.Sprintf("%s (%s)", e.msgID, e.kind)
		places := where[e.msgID]
		if in := mw.deletedIn(e.msgID); in != "" && len(places) == 0 {
			places = []string{in} // filed there, and deleted with the folder by a person
		}
		rc := receipts[e.msgID]
		switch {
		case len(places) != 1:
			r.mailLost = append(r.mailLost, fmt.Sprintf("%s in %v", what, places))
			continue
		case places[0] == mailFolder:
			r.mailPending = append(r.mailPending, what)
			continue
		case e.job != "" && places[0] == failedFolder:
			r.mailFailedKnown = append(r.mailFailedKnown, fmt.Sprintf("%s: %q", what, rc.lastError))
		case e.job == "" && places[0] == processedFolder:
			r.mailMisfiled = append(r.mailMisfiled, what)
		}
		switch {
		case e.job != "" && (rc.outcome != store.EmailProcessed || rc.jobID != strings.ToLower(e.job)):
			r.mailReceipt = append(r.mailReceipt, fmt.Sprintf("%s: %s, job %q", what, rc.outcome, rc.jobID))
		case e.job == "" && (rc.outcome != failedOutcome(e) || rc.lastError == ""):
			r.mailReceipt = append(r.mailReceipt, fmt.Sprintf("%s: %s %q, want %s", what, rc.outcome, rc.lastError, failedOutcome(e)))
		}
		if e.job != "" && done[strings.ToLower(e.job)] != "completed" {
			r.mailJobPending = append(r.mailJobPending, fmt.Sprintf("%s: job %s %s", what, e.job, cmp.Or(done[strings.ToLower(e.job)], "not mirrored")))
		}
	}
	return nil
}
