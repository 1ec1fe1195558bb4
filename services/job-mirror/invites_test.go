package jobmirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/delivery"
	"github.com/ethosbuilding/primeflow/pkg/dryrun"
	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/matryer/is"
)

// inviteEndpoint is TRIAGE_INVITE_SEND_URL over real HTTP: it answers each
// post with the next status of a script (the last repeats), can hold a post
// unanswered, and records what it got.
type inviteEndpoint struct {
	mu       sync.Mutex
	statuses []int
	posts    []invitePost
	arrived  chan int64
	hold     chan struct{}
}

type invitePost struct {
	payload jobmirror.InvitePayload
	body    []byte
	header  http.Header
	key     string
	status  int
}

func (ep *inviteEndpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p jobmirror.InvitePayload
	body, err := io.ReadAll(r.Body)
	if err != nil || json.Unmarshal(body, &p) != nil {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if ep.arrived != nil {
		ep.arrived <- p.ID
	}
	if ep.hold != nil {
		select {
		case <-ep.hold:
		case <-r.Context().Done():
			return
		}
	}
	ep.mu.Lock()
	status := http.StatusOK
	if len(ep.statuses) > 0 {
		status = ep.statuses[min(len(ep.posts), len(ep.statuses)-1)]
	}
	ep.posts = append(ep.posts, invitePost{payload: p, body: body, header: r.Header.Clone(), key: r.Header.Get(delivery.IdempotencyKeyHeader), status: status})
	ep.mu.Unlock()
	w.WriteHeader(status)
}

func (ep *inviteEndpoint) got() []invitePost {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	return append([]invitePost(nil), ep.posts...)
}

// accepted are the posts answered 2xx.
func (ep *inviteEndpoint) accepted() []invitePost {
	var out []invitePost
	for _, p := range ep.got() {
		if p.status/100 == 2 {
			out = append(out, p)
		}
	}
	return out
}

func (ep *inviteEndpoint) sender(t *testing.T) *jobmirror.HTTPInvites {
	t.Helper()
	srv := httptest.NewServer(ep)
	t.Cleanup(srv.Close)
	s, err := jobmirror.NewHTTPInvites(delivery.HTTPConfig{URL: srv.URL + "/triage/invite"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// quickInvites retries an invite at once: the drainer's timing is not what
// these tests are about.
func quickInvites(c *jobmirror.Config) {
	c.InviteDrainer = delivery.Config{MaxAttempts: 5, Backoff: []time.Duration{50 * time.Millisecond}, Lease: time.Minute, Sweep: time.Minute, Workers: 2}
}

// twoAttempts is quickInvites with two attempts an invite.
func twoAttempts(c *jobmirror.Config) {
	quickInvites(c)
	c.InviteDrainer.MaxAttempts = 2
}

// icmJob is a job in Prime whose status is Initial Contact Made, with a
// primary contact, that the mirror holds; firing its change-job-status
// queues an invite.
func (e *env) icmJob(mirrorContact bool) (primeJob prime.Job, contact prime.Contact) {
	e.T.Helper()
	j := e.Sim.NewJob(func(pj *prime.Job) { pj.StatusID = statusICM })
	c, _ := e.Sim.NewContact(j.ID, func(c *prime.Contact) { c.Mobile = "0412 345 678"; c.Email = "olivia@example.com.au" })
	if mirrorContact {
		if err := e.Store.SaveContact(context.Background(), store.Contact{ContactID: c.ID, Name: c.Name, Mobile: c.Mobile, Email: c.Email}); err != nil {
			e.T.Fatal(err)
		}
	}
	pj, _ := e.Sim.Job(j.ID)
	return pj.Job, c
}

// invite waits for the job's one invite to reach a state and returns it.
func (e *env) invite(jobID string, want store.SendState) store.TriageInvite {
	e.T.Helper()
	var inv store.TriageInvite
	flowtest.Eventually(e.T, "the invite "+string(want), func() bool {
		got := e.invites(jobID)
		if len(got) != 1 {
			return false
		}
		inv = got[0]
		return inv.State == want
	})
	return inv
}

// §3.1: the commit that queued an invite sends it, with the job, its number,
// the primary contact from the mirror and the status; an endpoint that fails
// and then recovers gets it once, and the row says when it was sent.
func TestAQueuedInviteIsSentOnceToAFailingThenRecoveringEndpoint(t *testing.T) {
	is := is.New(t)
	ep := &inviteEndpoint{statuses: []int{http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusOK}}
	e := start(t, options{invites: ep.sender(t), config: quickInvites})
	j, c := e.icmJob(true)

	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	inv := e.invite(j.ID, store.SendSent)
	is.Equal(inv.Attempts, 3)                                            // two failures, then the send
	is.True(!inv.SentUTC.IsZero() && !inv.SentUTC.Before(inv.QueuedUTC)) // the sent time stamped
	is.True(strings.Contains(inv.LastError, "HTTP 500"))                 // the last failure stays on the row
	is.Equal(len(ep.got()), 3)                                           // three posts
	sent := ep.accepted()
	is.Equal(len(sent), 1) // accepted once
	want := jobmirror.InvitePayload{ID: inv.ID, Reference: fmt.Sprintf("primeflow-triage-invite-%d", inv.ID), JobID: j.ID,
		JobNumber: j.JobNumber, StatusID: statusICM,
		Contact: jobmirror.InviteContact{Name: c.Name, Phone: "0412 345 678", Email: "olivia@example.com.au"}}
	is.Equal(sent[0].payload, want)              // the job, its primary contact and the status
	is.Equal(sent[0].key, want.Reference)        // the same idempotency key on every attempt
	is.Equal(ep.got()[0].key, want.Reference)    //
	is.Equal(e.inviteCounter("sent_total"), 1.0) // counted sent
	is.Equal(e.inviteCounter("send_retries_total"), 2.0)
	is.Equal(flowtest.Counter(t, e.Deps.Metrics, "primeflow_triage_invites_queue", map[string]string{"state": "Sent"}), 1.0)
}

// An invite endpoint that is not taking posts (429, 502, 503, 504) for
// longer than TRIAGE_INVITE_MAX_ATTEMPTS attempts would last is waited
// out: the invite goes once it takes posts again, on its first attempt,
// and is never Failed for a person.
func TestAnInviteEndpointNotTakingPostsIsWaitedOut(t *testing.T) {
	is := is.New(t)
	const waits = 6
	ep := &inviteEndpoint{statuses: append(slices.Repeat([]int{http.StatusServiceUnavailable, http.StatusTooManyRequests}, waits/2), http.StatusOK)}
	e := start(t, options{invites: ep.sender(t), config: twoAttempts})
	j, _ := e.icmJob(true)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	inv := e.invite(j.ID, store.SendSent)
	is.Equal(inv.Attempts, 1)                                     // sent on its first attempt
	is.Equal(len(ep.got()), waits+1)                              // after three times its attempts' worth of waits
	is.Equal(len(ep.accepted()), 1)                               // once
	is.Equal(e.inviteCounter("send_waits_total"), float64(waits)) // each counted a wait
	is.Equal(e.inviteCounter("send_retries_total"), 0.0)          // none a failed attempt
	is.Equal(e.inviteCounter("failed_total"), 0.0)
	is.Equal(e.inviteCounter("oldest_waiting_seconds"), 0.0) // nothing waits now
}

func (e *env) inviteCounter(name string) float64 {
	return flowtest.Counter(e.T, e.Deps.Metrics, "primeflow_triage_invites_"+name, nil)
}

// A queued invite survives a restart: job-mirror stopped before it could send
// (the endpoint failing) and started again sends it, once. A post in flight
// when job-mirror stops finishes and is recorded, so the next job-mirror
// does not send it again.
func TestAnInviteIsSentOnceAcrossARestart(t *testing.T) {
	t.Run("queued, not sent yet", func(t *testing.T) {
		is := is.New(t)
		down := &inviteEndpoint{statuses: []int{http.StatusInternalServerError}}
		retryLater := func(c *jobmirror.Config) {
			quickInvites(c)
			c.InviteDrainer.Backoff = []time.Duration{3 * time.Second} // the restart comes first
		}
		e := start(t, options{invites: down.sender(t), config: retryLater})
		j, _ := e.icmJob(true)
		e.WaitProcessed(e.Fire("change-job-status", j.ID))
		flowtest.Eventually(t, "the first post failed", func() bool { return len(down.got()) == 1 })
		e.stopMirror() // before its retry
		inv := e.invite(j.ID, store.SendQueued)

		up := &inviteEndpoint{}
		e.Run("job-mirror after the restart", e.newMirror(up.sender(t), retryLater))
		got := e.invite(j.ID, store.SendSent)
		is.Equal(got.ID, inv.ID)        // the invite queued before the restart
		is.True(got.Attempts >= 2)      // after the failed one
		is.Equal(len(up.accepted()), 1) // sent once
		for _, p := range down.got() {
			is.Equal(p.status, http.StatusInternalServerError) // the failing endpoint took none
		}
	})

	t.Run("a post in flight at shutdown", func(t *testing.T) {
		is := is.New(t)
		held := &inviteEndpoint{arrived: make(chan int64, 1), hold: make(chan struct{})}
		answer := sync.OnceFunc(func() { close(held.hold) })
		t.Cleanup(answer)
		e := start(t, options{invites: held.sender(t), config: quickInvites})
		j, _ := e.icmJob(true)
		e.WaitProcessed(e.Fire("change-job-status", j.ID))
		select {
		case <-held.arrived: // the post reached the endpoint
		case <-time.After(20 * time.Second):
			t.Fatal("the invite was never posted")
		}
		stopped := make(chan struct{})
		go func() { defer close(stopped); e.stopMirror() }()
		select {
		case <-stopped:
			t.Fatal("job-mirror stopped with its post unanswered")
		case <-time.After(200 * time.Millisecond):
		}
		answer()
		<-stopped
		inv := e.invite(j.ID, store.SendSent) // recorded by the job-mirror that posted it
		is.Equal(inv.Attempts, 1)

		again := &inviteEndpoint{}
		is.NoErr(e.newMirror(again.sender(t), quickInvites).SendInvites(context.Background()))
		is.Equal(len(again.got()), 0)     // the next job-mirror sends nothing more
		is.Equal(len(held.accepted()), 1) // the endpoint had it once
	})
}

// A primary contact the mirror does not hold yet is queued for the contacts
// drain (handed on at once); the invite waits and goes out once the contact
// is mirrored.
func TestAnInviteWaitsForItsContact(t *testing.T) {
	is := is.New(t)
	ep := &inviteEndpoint{}
	e := start(t, options{invites: ep.sender(t), config: quickInvites})
	j, c := e.icmJob(false)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	flowtest.Eventually(t, "the job's contacts queued for a sync", func() bool {
		items, err := e.Store.ListSyncQueue(context.Background(), store.SyncQueueFilter{Object: store.TableContacts, JobID: j.ID})
		return err == nil && len(items) == 1
	})
	flowtest.Eventually(t, "and handed to the drains", func() bool {
		for _, b := range e.Published(events.StreamJob, events.SubjectSyncQueued) {
			var sq events.SyncQueued
			if json.Unmarshal(b, &sq) == nil && sq.JobID == j.ID && len(sq.Objects) == 1 && sq.Objects[0] == store.TableContacts {
				return true
			}
		}
		return false
	})
	is.Equal(len(ep.got()), 0) // nothing posted without the contact
	is.NoErr(e.Store.SaveContact(context.Background(), store.Contact{ContactID: c.ID, Name: c.Name, Mobile: c.Mobile, Email: c.Email}))
	inv := e.invite(j.ID, store.SendSent) // the drain mirrored it: the invite goes
	is.Equal(inv.Attempts, 1)             // on its first attempt: the waits used none
	is.Equal(len(ep.accepted()), 1)
	is.Equal(ep.accepted()[0].payload.Contact.Name, c.Name)
}

// A job with no primary contact has nobody to invite: the invite is Failed
// at once, for a person, and counted.
func TestAnInviteWithNobodyToInviteFails(t *testing.T) {
	is := is.New(t)
	ep := &inviteEndpoint{}
	e := start(t, options{invites: ep.sender(t), config: quickInvites})
	j := e.Sim.NewJob(func(pj *prime.Job) { pj.StatusID = statusICM })
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	inv := e.invite(j.ID, store.SendFailed)
	is.Equal(inv.Attempts, 1)                                   // refused for good
	is.True(strings.Contains(inv.LastError, "primary contact")) // saying why
	is.Equal(len(ep.got()), 0)                                  // nothing posted
	flowtest.Eventually(t, "counted failed", func() bool { return e.inviteCounter("failed_total") == 1 })
}

// A shadow run records invites instead of sending them, and the queue says
// so: Logged, never Sent, and counted logged, so that nothing counts a
// recorded invite as sent.
func TestAShadowRunRecordsTheInvites(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	dry := dryrun.Config{Send: true, Dir: dir}
	s, err := jobmirror.InviteSenderFor(delivery.HTTPConfig{URL: "http://127.0.0.1:9/never"}, dry, slog.New(slog.DiscardHandler))
	is.NoErr(err)
	e := start(t, options{invites: s, config: quickInvites})
	j, _ := e.icmJob(true)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	e.invite(j.ID, store.SendLogged)
	recs, err := dryrun.Read(filepath.Join(dir, "triage-invite.jsonl"))
	is.NoErr(err)
	is.Equal(len(recs), 1) // recorded, not sent
	flowtest.Eventually(t, "counted logged", func() bool { return e.inviteCounter("logged_total") == 1 })
	is.Equal(e.inviteCounter("sent_total"), 0.0) // never sent
}

// Every attempt under one Idempotency-Key is the same request, byte for
// byte (an endpoint that follows the IETF idempotency-key draft refuses a
// key reused with another body), though the contact changed in the mirror
// between the attempts; the attempt goes in a header, the same on a wait's
// post and the post after it.
func TestAnInviteIsTheSameRequestOnEveryAttempt(t *testing.T) {
	is := is.New(t)
	ep := &inviteEndpoint{statuses: []int{http.StatusServiceUnavailable, http.StatusRequestTimeout, http.StatusInternalServerError, http.StatusOK}}
	e := start(t, options{invites: ep.sender(t), config: quickInvites})
	j, c := e.icmJob(true)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	flowtest.Eventually(t, "the first post", func() bool { return len(ep.got()) >= 1 })
	is.NoErr(e.Store.SaveContact(context.Background(), store.Contact{ContactID: c.ID, Name: "Someone Else", Mobile: "0499 999 999"}))
	e.invite(j.ID, store.SendSent)
	posts := ep.got()
	is.Equal(len(posts), 4) // a wait, two failures, then the send
	for _, p := range posts {
		is.Equal(string(p.body), string(posts[0].body)) // the same body
		is.Equal(p.key, posts[0].key)                   // under the same key
	}
	for i, want := range []string{"1", "1", "2", "3"} {
		is.Equal(posts[i].header.Get(delivery.AttemptHeader), want) // the attempt beside it: a wait used none
	}
	is.Equal(posts[3].payload.Contact.Name, c.Name) // as the first attempt built it
}

// §10.4: a duplicate delivery, or a replay, of the change-job-status event
// whose invite went invites nobody again; the job leaving the status and
// coming back is a change of its own, and is invited.
func TestOneInviteAStatusChange(t *testing.T) {
	is := is.New(t)
	e, ep, j := invitedJob(t)
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // Prime delivers the same event again
	_, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.Description = "roof tiles" })
	is.NoErr(err)
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // and again, after another change of the job
	is.Equal(len(e.invites(j.ID)), 1)                  // one invite
	is.Equal(len(ep.accepted()), 1)                    // posted once
	is.Equal(e.invites(j.ID)[0].JobVersion, j.Version) // for the change it answers

	is.NoErr(e.setStatus(j.ID, statusOther))
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // the job leaves the status
	back, err := e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // and comes back
	flowtest.Eventually(t, "the second change's invite sent", func() bool { return len(ep.accepted()) == 2 })
	got := e.invites(j.ID)
	is.Equal(len(got), 2)
	is.True(!got[0].StatusLeftUTC.IsZero())               // the first change is over
	is.Equal(got[1].JobVersion, back.Version)             // the second answers the return
	is.True(ep.accepted()[1].key != ep.accepted()[0].key) // under a key of its own
}

// A job that leaves the status with no event job-mirror handles (the
// webhook lost, or handled after the return), and that the jobs-by-date
// backstop mirrors in its other status, is invited again when it comes
// back: the backstop's write closes the invite of its first arrival.
func TestAReturnTheBackstopSawIsInvited(t *testing.T) {
	is := is.New(t)
	e, ep, j := invitedJob(t)
	is.NoErr(e.setStatus(j.ID, statusOther))
	e.sweepJobs() // no webhook: the backstop mirrors the job in its new status
	is.True(!e.invites(j.ID)[0].StatusLeftUTC.IsZero())
	is.NoErr(e.setStatus(j.ID, statusICM))
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // the return
	flowtest.Eventually(t, "the return's invite sent", func() bool { return len(ep.accepted()) == 2 })
	e.WaitProcessed(e.Fire("change-job-status", j.ID)) // delivered again
	is.Equal(len(e.invites(j.ID)), 2)                  // one invite an arrival
	is.Equal(len(ep.accepted()), 2)
}

// statusOther is a status that is not Initial Contact Made.
const statusOther = "0d3c2b1a-9f8e-4d7c-8b6a-5f4e3d2c1b0a"

// invitedJob starts job-mirror with an invite endpoint and has it invite a
// job in Initial Contact Made, its contact mirrored: the invite is Sent.
func invitedJob(t *testing.T) (*env, *inviteEndpoint, prime.Job) {
	t.Helper()
	ep := &inviteEndpoint{}
	e := start(t, options{invites: ep.sender(t), config: quickInvites})
	j, _ := e.icmJob(true)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	e.invite(j.ID, store.SendSent)
	return e, ep, j
}

// setStatus moves the job to status in Prime, with no webhook.
func (e *env) setStatus(jobID, status string) error {
	_, err := e.Sim.UpdateJob(jobID, func(pj *prime.Job) { pj.StatusID = status })
	return err
}

// A primary contact the mirror does not hold yet is a wait, however long
// the contacts drain takes: the invite uses no attempt while it waits (here
// more waits than TRIAGE_INVITE_MAX_ATTEMPTS), and goes once the contact is
// mirrored.
func TestAnInviteWaitingForItsContactUsesNoAttempt(t *testing.T) {
	is := is.New(t)
	ep := &inviteEndpoint{}
	e := start(t, options{invites: ep.sender(t), config: twoAttempts})
	j, c := e.icmJob(false)
	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	waits := map[time.Time]bool{}
	flowtest.Eventually(t, "three waits", func() bool {
		inv := e.invites(j.ID)[0]
		if inv.State == store.SendFailed {
			t.Fatalf("the invite failed while its contact was not mirrored yet, after %d attempts: %s", inv.Attempts, inv.LastError)
		}
		if inv.State == store.SendQueued && inv.Attempts == 0 && inv.LastError != "" {
			waits[inv.NextAttemptUTC] = true
		}
		return len(waits) >= 3
	})
	is.Equal(len(ep.got()), 0)                                                                 // nothing posted without the contact
	is.True(strings.Contains(e.invites(j.ID)[0].LastError, "waiting for the primary contact")) // saying why it waits
	is.NoErr(e.Store.SaveContact(context.Background(), store.Contact{ContactID: c.ID, Name: c.Name, Mobile: c.Mobile, Email: c.Email}))
	inv := e.invite(j.ID, store.SendSent)
	is.Equal(inv.Attempts, 1) // its first attempt
	is.Equal(len(ep.accepted()), 1)
	is.Equal(e.inviteCounter("send_retries_total"), 0.0) // the waits were no failures
}

// An endpoint's Retry-After holds a wait (a 429), or the retry of a failed
// attempt (a 500), back as long as it asks.
func TestAnInviteRetriesWhenTheEndpointSays(t *testing.T) {
	for _, tc := range []struct {
		status   int
		attempts int
	}{
		{http.StatusTooManyRequests, 0},     // a wait
		{http.StatusInternalServerError, 1}, // a failed attempt
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			is := is.New(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(tc.status)
			}))
			t.Cleanup(srv.Close)
			s, err := jobmirror.NewHTTPInvites(delivery.HTTPConfig{URL: srv.URL}, nil)
			is.NoErr(err)
			e := start(t, options{invites: s, config: quickInvites})
			j, _ := e.icmJob(true)
			e.WaitProcessed(e.Fire("change-job-status", j.ID))
			var inv store.TriageInvite
			flowtest.Eventually(t, "the first post answered", func() bool {
				inv = e.invites(j.ID)[0]
				return inv.State == store.SendQueued && inv.LastError != ""
			})
			is.Equal(inv.Attempts, tc.attempts)                              // a wait counts none
			is.True(inv.NextAttemptUTC.Sub(inv.UpdatedUTC) >= 2*time.Minute) // not the 50 ms backoff
		})
	}
}
