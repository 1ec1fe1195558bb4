package mailintake_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/ethosbuilding/primeflow/pkg/store"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	"github.com/matryer/is"
)

// A Prime outage — 5xx, or no answer — while an email waits is a wait: it
// counts no attempt however many polls it lasts, and the email is worked
// once Prime answers (§7: the mail stays for the next poll). Only Prime's
// 404 (TestUnknownJobFailsAndCanBeTriedAgain) or no JobID uses attempts.
func TestPrimeOutageIsAWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults primesim.Faults
	}{
		{"5xx", primesim.Faults{FailNext: 1 << 20, FailStatus: http.StatusServiceUnavailable}},
		{"no answer", primesim.Faults{Latency: 2 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			e := startWith(t, func(c *prime.Config) { c.Timeout = 300 * time.Millisecond })
			cfg := e.config()
			e.intake(cfg, nil, nil)
			j := e.Sim.NewJob()
			e.Sim.SetFaults(tc.faults)
			msg := e.email(j)
			flowtest.Eventually(t, "Prime asked for the job more often than MAIL_MAX_ATTEMPTS", func() bool {
				return e.jobGets() > int64(cfg.MaxAttempts)+2
			})
			r := e.receipt(msg)
			is.Equal(r.Attempts, 0) // a wait counts no attempt
			is.Equal(r.Outcome, store.EmailPending)
			is.Equal(len(e.graph.Messages(failedFolder)), 0) // and never sends the email to the failed folder
			is.Equal(len(e.graph.Messages(inFolder)), 1)     // it stays for the next poll
			is.True(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "ensure_failed"}) > float64(cfg.MaxAttempts))

			e.Sim.SetFaults(primesim.Faults{}) // Prime answers again
			r = e.filed(msg, store.EmailProcessed)
			e.pipelineOnce(j.ID)
			is.Equal(r.Attempts, 0)
			is.Equal(r.PrimeJobID, j.ID) // counted in coverage
		})
	}
}

// An email whose Graph calls are not answered (its body, its move) waits a
// bounded time; the poll goes on to the emails behind it, and comes back to
// it.
func TestOneEmailNeverHoldsUpTheOthers(t *testing.T) {
	is := is.New(t)
	e := start(t)
	first := e.Sim.NewJob()
	stuck, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + first.JobNumber, ContentType: "text",
		Body: fmt.Sprintf(`{ "JobID": '%d', "JobNumber": '%s' }`, first.Ref, first.JobNumber)})
	is.NoErr(err)
	e.graph.SetFaults(graphsim.Faults{Path: "/messages/" + stuck.ID, FailNext: 1 << 20, FailStatus: http.StatusServiceUnavailable})
	var behind []string
	var jobs []primesim.Job
	for range 2 {
		j := e.Sim.NewJob()
		jobs, behind = append(jobs, j), append(behind, e.email(j))
	}
	e.intake(e.config(), nil, nil)
	for i, msg := range behind {
		e.filed(msg, store.EmailProcessed) // not held up by the first
		e.pipelineOnce(jobs[i].ID)
	}
	is.Equal(e.receipt(stuck.InternetMessageID).Attempts, 0) // the first waits, no attempt counted
	is.Equal(len(e.graph.Messages(inFolder)), 1)
	is.True(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "graph"}) >= 1)

	e.graph.SetFaults(graphsim.Faults{})
	r := e.filed(stuck.InternetMessageID, store.EmailProcessed) // and is worked once Graph answers for it
	e.pipelineOnce(first.ID)
	is.Equal(r.Attempts, 0)
}

// Graph may take a call and never answer it. An email's call that hangs so
// is cut at the bound of one email's calls, not at GRAPH_TIMEOUT (an hour
// here): the emails behind it are filed while its calls hang, each try of
// it cut the same way, and it is filed once Graph answers for it.
func TestAHangingCallHoldsUpNoOther(t *testing.T) {
	is := is.New(t)
	e := start(t)
	cfg := e.config()
	cfg.Graph.Timeout = time.Hour
	first := e.Sim.NewJob()
	stuck, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + first.JobNumber, ContentType: "text",
		Body: fmt.Sprintf(`{ "JobID": '%d', "JobNumber": '%s' }`, first.Ref, first.JobNumber)})
	is.NoErr(err)
	e.control(http.MethodPost, "/_sim/faults", `{"hang":true,"path":"/messages/`+stuck.ID+`"}`)
	var behind []string
	var jobs []primesim.Job
	for range 2 {
		j := e.Sim.NewJob()
		jobs, behind = append(jobs, j), append(behind, e.email(j))
	}
	mailbox, err := graph.New(cfg.Graph, nil)
	is.NoErr(err)
	in, err := mailintake.New(cfg, e.Deps, mailbox)
	is.NoErr(err)
	in.SetMessageWait(100 * time.Millisecond)
	e.Run("mail-intake", in)
	for i, msg := range behind {
		e.filed(msg, store.EmailProcessed) // not held up by the first
		e.pipelineOnce(jobs[i].ID)
	}
	flowtest.Eventually(t, "the first email tried again, and cut again", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "graph"}) >= 2
	})
	is.Equal(e.receipt(stuck.InternetMessageID).Attempts, 0) // each try cut, no attempt counted
	is.Equal(len(e.graph.Messages(inFolder)), 1)
	is.True(strings.Contains(e.Logs.String(), "no answer within 100ms")) // the log says why it waits

	e.control(http.MethodDelete, "/_sim/faults", "") // Graph answers again
	r := e.filed(stuck.InternetMessageID, store.EmailProcessed)
	e.pipelineOnce(first.ID)
	is.Equal(r.Attempts, 0)
}

// Two emails in a row whose calls Graph did not answer end a poll (Graph
// is out), and only in a row: an email filed between them is Graph
// answering, and the count starts again. Here the first and third emails'
// calls are refused (503), the second and fourth filed; the poll goes to
// the end, and the two waiting emails, held (MAIL_WAIT_BACKOFF), end none
// after it.
func TestAFiledEmailResetsGraphsSilences(t *testing.T) {
	is := is.New(t)
	e := start(t)
	at := time.Now().Add(-time.Hour)
	var stuck []string
	var emails []graphsim.Message
	var jobs []primesim.Job
	for i := range 4 {
		j := e.Sim.NewJob()
		m, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + j.JobNumber, ContentType: "text", ReceivedDateTime: at.Add(time.Duration(i) * time.Minute),
			Body: fmt.Sprintf(`{ "JobID": '%d', "JobNumber": '%s' }`, j.Ref, j.JobNumber)})
		is.NoErr(err)
		if i%2 == 0 {
			stuck = append(stuck, m.ID)
		}
		emails, jobs = append(emails, m), append(jobs, j)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, id := range stuck {
			if strings.Contains(r.URL.EscapedPath(), "/messages/"+url.PathEscape(id)) {
				http.Error(w, `{"error":{"code":"ServiceUnavailable"}}`, http.StatusServiceUnavailable)
				return
			}
		}
		e.graph.ServeHTTP(w, r)
	}))
	defer srv.Close()
	cfg := e.config()
	cfg.Graph, cfg.WaitBackoff = e.graph.ClientConfig(srv.URL), retry.Backoff{time.Hour}
	mailbox, err := graph.New(cfg.Graph, nil)
	is.NoErr(err)
	in, err := mailintake.New(cfg, e.Deps, mailbox)
	is.NoErr(err)
	in.SetMessageWait(100 * time.Millisecond) // each refused email's calls given up on sooner
	e.Run("mail-intake", in)
	for _, i := range []int{1, 3} {
		e.filed(emails[i].InternetMessageID, store.EmailProcessed)
		e.pipelineOnce(jobs[i].ID)
	}
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_polls_total", map[string]string{"result": "failed"}), 0.0) // no poll ended early
	is.True(!strings.Contains(e.Logs.String(), "in a row"))                                                                       // nor said it did
	is.Equal(len(e.graph.Messages(inFolder)), 2)                                                                                  // the two refused wait
}

// Bodies are fetched one at a time within MAIL_MAX_BODY_BYTES, not listed
// a page at a time: 48 emails of 1.4 MB, which made one listing page of
// 67 MB, over what the client reads of an answer, are worked like any
// other, and one larger than the cap goes to the failed folder with its
// reason, holding up nothing.
func TestLargeEmails(t *testing.T) {
	is := is.New(t)
	e := start(t)
	cfg := e.config()
	cfg.MaxBodyBytes = 2 << 20
	var msgs []string
	var jobs []primesim.Job
	for range 48 {
		j := e.Sim.NewJob()
		m, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job " + j.JobNumber, PadTo: 1_400_000,
			Body: fmt.Sprintf(`<p>{ &quot;JobID&quot;: &#39;%d&#39;, &quot;JobNumber&quot;: &#39;%s&#39; }</p>`, j.Ref, j.JobNumber)})
		is.NoErr(err)
		jobs, msgs = append(jobs, j), append(msgs, m.InternetMessageID)
	}
	huge, err := e.graph.Deliver(graphsim.NewMessage{Subject: "New Job J0", Body: "<p>JobID: 2262480</p>", PadTo: 3 << 20})
	is.NoErr(err)
	e.intake(cfg, nil, nil)
	for i, msg := range msgs {
		r := e.filed(msg, store.EmailProcessed)
		is.Equal(r.PrimeJobID, jobs[i].ID)
	}
	r := e.filed(huge.InternetMessageID, store.EmailFailed)
	is.True(strings.Contains(r.LastError, "too large"))           // the receipt says why
	is.True(strings.Contains(r.LastError, "MAIL_MAX_BODY_BYTES")) // naming the setting
	is.Equal(r.JobID, "")                                         // unread
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "failed"}), 1.0)
	is.Equal(e.jobGets(), int64(48)) // none for the one not read
}

// recordingMailbox notes the calls that list a page and that move an email,
// in order.
type recordingMailbox struct {
	*graph.Client
	mu    sync.Mutex
	calls []string
}

func (m *recordingMailbox) note(call string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, call)
}

func (m *recordingMailbox) ListPage(ctx context.Context, user, folderID string, top int, link string) (graph.Page, error) {
	m.note(fmt.Sprintf("list %t", link != ""))
	return m.Client.ListPage(ctx, user, folderID, top, link)
}

func (m *recordingMailbox) Move(ctx context.Context, user, messageID, destinationID string) error {
	m.note("move")
	return m.Client.Move(ctx, user, messageID, destinationID)
}

// A page's emails are worked before the next page is listed.
func TestPagesHandledAsTheyArrive(t *testing.T) {
	is := is.New(t)
	e := start(t)
	cfg := e.config()
	cfg.PageSize, cfg.PollInterval = 2, time.Hour // one poll
	var msgs []string
	for range 5 {
		msgs = append(msgs, e.email(e.Sim.NewJob()))
	}
	client, err := graph.New(cfg.Graph, nil)
	is.NoErr(err)
	mb := &recordingMailbox{Client: client}
	e.intake(cfg, mb, nil)
	for _, msg := range msgs {
		e.filed(msg, store.EmailProcessed) // all in the one poll
	}
	mb.mu.Lock()
	defer mb.mu.Unlock()
	// Filing a page's emails moves the later ones up under the next page's
	// $skip: the folder is listed from the top again.
	is.Equal(mb.calls[:4], []string{"list false", "move", "move", "list false"}) // the first page worked, then the next listed
}

// A folder the intake files in, deleted while it runs, answers a move with
// 404 as a message gone would: the message is found still in the folder,
// waits for the folder (nothing recorded as moved) and is filed once the
// folder is made again.
func TestDeletedFolder(t *testing.T) {
	is := is.New(t)
	e := start(t)
	e.intake(e.config(), nil, nil) // the folders resolved at start
	flowtest.Eventually(t, "the intake polling", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_polls_total", map[string]string{"result": "ok"}) >= 1
	})
	e.control(http.MethodDelete, "/_sim/folders?path=Inbox/Prime%20Jobs/Processed", "") // a person deletes the folder
	j := e.Sim.NewJob()
	msg := e.email(j)
	flowtest.Eventually(t, "the intake waiting for the folder", func() bool {
		return flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_waits_total", map[string]string{"reason": "folder_missing"}) >= 3
	})
	r := e.receipt(msg)
	is.Equal(r.Outcome, store.EmailProcessed) // the job is made sure of
	is.True(r.MovedUTC.IsZero())              // but the email is not recorded as moved
	is.Equal(r.MovedTo, "")
	is.Equal(len(e.graph.Messages(inFolder)), 1) // it is still in the folder
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "reopened"}), 0.0)
	is.True(strings.Contains(e.Logs.String(), "MAIL_PROCESSED_FOLDER")) // the log names the folder's setting

	e.control(http.MethodPost, "/_sim/folders", `{"path":"Inbox/Prime Jobs/Processed"}`) // made again
	r = e.filed(msg, store.EmailProcessed)
	e.waitIn(processedFolder, 1)
	e.waitIn(inFolder, 0)
	e.pipelineOnce(j.ID)
	is.Equal(r.Attempts, 0)
}

// control calls the Graph simulator's control API, over HTTP.
func (e *env) control(method, path, body string) {
	e.T.Helper()
	req, err := http.NewRequest(method, e.graphURL+path, strings.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	simcontrol.Authorize(req, e.graph.ControlToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		e.T.Fatalf("%s %s: %d", method, path, resp.StatusCode)
	}
}

// Only Prime's mail is read: mail from another sender, or from Prime's
// address that Exchange says failed DMARC and DKIM, goes to the failed
// folder unread — no body fetched, no Prime call — its receipt Rejected,
// which primectl status counts and asks nobody to clear.
func TestOnlyPrimesMailIsWorked(t *testing.T) {
	is := is.New(t)
	e := start(t)
	known, good, relayed, plain := e.Sim.NewJob(), e.Sim.NewJob(), e.Sim.NewJob(), e.Sim.NewJob()
	body := func(j primesim.Job) string {
		return fmt.Sprintf(`{ "JobID": '%d', "JobNumber": '%s' }`, j.Ref, j.JobNumber)
	}
	authResults := func(v string) graph.Header { return graph.Header{Name: "Authentication-Results", Value: v} }
	deliver := func(n graphsim.NewMessage) string {
		n.ContentType = "text"
		m, err := e.graph.Deliver(n)
		is.NoErr(err)
		return m.InternetMessageID
	}
	stranger := deliver(graphsim.NewMessage{Subject: "New Job", From: "jobs@elsewhere.example", Body: body(known)})
	spoofed := deliver(graphsim.NewMessage{Subject: "New Job", From: graphsim.DefaultFrom, Body: body(known), Headers: []graph.Header{
		authResults("spf=fail (sender IP is 203.0.113.9) smtp.mailfrom=elsewhere.example; dkim=none (message not signed) header.d=none;dmarc=fail action=quarantine header.from=primeeco.tech;compauth=fail reason=000"),
		authResults("dkim=pass header.d=primeeco.tech; dmarc=pass header.from=primeeco.tech"), // the sender's own, below Exchange's: not believed
	}})
	signed := deliver(graphsim.NewMessage{Subject: "New Job", From: "NoReply@PrimeECO.tech", Body: body(good), Headers: []graph.Header{
		authResults("spf=pass (sender IP is 198.51.100.7) smtp.mailfrom=primeeco.tech; dkim=pass (signature was verified) header.d=primeeco.tech;dmarc=pass action=none header.from=primeeco.tech;compauth=pass reason=100"),
	}})
	// Signed by the sending service as a subdomain, and no DMARC record:
	// aligned all the same (RFC 7489's relaxed alignment).
	viaService := deliver(graphsim.NewMessage{Subject: "New Job", From: graphsim.DefaultFrom, Body: body(relayed), Headers: []graph.Header{
		authResults("spf=pass (sender IP is 198.51.100.7) smtp.mailfrom=em1234.primeeco.tech; dkim=pass (signature was verified) header.d=em1234.primeeco.tech;dmarc=none action=none header.from=primeeco.tech;compauth=pass reason=109"),
	}})
	unsaid := deliver(graphsim.NewMessage{Subject: "New Job", Body: body(plain)}) // no Authentication-Results: the sender is all there is
	e.intake(e.config(), nil, nil)

	for _, msg := range []string{signed, viaService, unsaid} {
		e.filed(msg, store.EmailProcessed)
	}
	for msg, why := range map[string]string{stranger: "not in MAIL_ALLOWED_SENDERS", spoofed: "passed neither DMARC nor DKIM"} {
		r := e.filed(msg, store.EmailFailed)        // in the failed folder
		is.Equal(r.Outcome, store.EmailRejected)    // refused, not failed
		is.True(strings.Contains(r.LastError, why)) // the receipt says why
		is.Equal(r.JobID, "")                       // unread
		is.Equal(r.Attempts, 0)
	}
	_, mirrored, err := e.Store.GetJob(context.Background(), known.ID)
	is.NoErr(err)
	is.True(!mirrored)                                       // the job the refused mail named was never asked for
	is.Equal(e.jobGets(), int64(3))                          // Prime was asked for the jobs of Prime's mail only
	is.Equal(e.graph.Stats().ByOp["messages.get"], int64(3)) // and only their bodies were read
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "rejected"}), 2.0)
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_mailintake_messages_total", map[string]string{"outcome": "failed"}), 0.0)
	rep, err := status.Gather(context.Background(), status.Sources{Store: e.Store})
	is.NoErr(err)
	is.Equal(rep.Emails.Rejected, 2)      // counted
	is.Equal(rep.Emails.Failed, 0)        // not as failed
	is.Equal(rep.NeedsPerson, []string{}) // and nobody is asked to look
}
