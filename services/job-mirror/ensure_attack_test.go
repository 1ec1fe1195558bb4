package jobmirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/prime"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/matryer/is"
	"github.com/prometheus/client_golang/prometheus"
)

// What one leaked NATS credential of a service that asks job-mirror to
// ensure a job (child-mirror's, mail-intake's) could do through the request,
// tried on every subject the roles may publish to job-mirror (issue 27 §2).
// job-mirror believes the subject — which only the role may publish — and
// Prime; nothing the body says about the job.

// ensureSubjects are the subjects a service's role may ask job-mirror on.
func ensureSubjects() []string {
	var out []string
	for _, r := range events.ServiceRoles {
		for _, s := range r.Requests {
			served := slices.ContainsFunc(events.RoleJobMirror.Serves, func(e events.Endpoint) bool { return e.Subject == s })
			if served && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// ask sends a raw request body on subject, as a forger would.
func (e *env) ask(subject, body string) {
	e.T.Helper()
	if _, err := e.NC.Request(subject, []byte(body), 10*time.Second); err != nil {
		e.T.Fatalf("%s: %v", subject, err)
	}
}

// A job a caller sends with its request is never mirrored: not its
// attributes, and not a version no answer of Prime's could ever overwrite.
func TestEnsureMirrorsNoForgedJob(t *testing.T) {
	e := start(t, options{})
	for _, subject := range ensureSubjects() {
		t.Run(subject, func(t *testing.T) {
			is := is.New(t)
			j := e.Sim.NewJob()
			logID := e.childEvent(events.ActionCreateAppointment) // for a subject that wants one
			forged, err := json.Marshal(map[string]any{"jobNumber": "FORGED", "description": "forged by a caller", "version": int64(1) << 53})
			is.NoErr(err)
			e.ask(subject, fmt.Sprintf(`{"jobId":%q,"logId":%d,"fetched":{"type":"jobs","id":%q,"attributes":%s}}`, j.ID, logID, j.ID, forged))
			if row, found, err := e.Store.GetJob(context.Background(), j.ID); err == nil && found {
				is.True(row.Description != "forged by a caller") // if mirrored at all, then Prime's job
				is.True(row.Version < int64(1)<<53)              // at Prime's version
			}

			// Prime's next change of the job reaches the mirror.
			_, err = e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.Description = "Prime's own" })
			is.NoErr(err)
			e.WaitProcessed(e.Fire("change-job-status", j.ID))
			is.Equal(e.job(j.ID).Description, "Prime's own")
		})
	}
}

// mailIntakeSubjects are the ensure subjects mail-intake's role may publish.
func mailIntakeSubjects() []string {
	return slices.DeleteFunc(slices.Clone(events.RoleMailIntake.Requests), func(s string) bool { return !slices.Contains(ensureSubjects(), s) })
}

// mail-intake's credential cannot pass an email's job off as a webhook's:
// not the path, not a log row, not make-safe priority for its Prime call.
func TestEnsureByEmailIsTheEmailsPath(t *testing.T) {
	e := start(t, options{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(e.Prime); err != nil {
		t.Fatal(err)
	}
	calls := func(priority string) float64 {
		return flowtest.Counter(t, reg, "prime_client_calls_total", map[string]string{"caller": "job-mirror", "priority": priority})
	}
	known := e.Sim.NewJob()
	webhookRow := e.Fire("change-job-status", known.ID)
	e.WaitProcessed(webhookRow)
	is.New(t).True(len(mailIntakeSubjects()) > 0) // mail-intake asks job-mirror
	for _, subject := range mailIntakeSubjects() {
		t.Run(subject, func(t *testing.T) {
			is := is.New(t)
			j := e.Sim.NewJob()
			makesafe, drain := calls("makesafe"), calls("drain")
			e.ask(subject, fmt.Sprintf(`{"jobId":%q,"via":"webhook","logId":%d,"priority":"makesafe"}`, j.ID, webhookRow))
			e.ask(subject, fmt.Sprintf(`{"jobId":%q}`, j.ID))
			fs, found := e.firstSeen(j.ID)
			is.True(found)                            // the job was made sure of
			is.Equal(fs.Via, store.ViaEmail)          // seen first by the email, as the subject says
			is.Equal(fs.LogID, int64(0))              // on behalf of no log row
			is.Equal(calls("makesafe")-makesafe, 0.0) // no make-safe call
			is.Equal(calls("drain")-drain, 1.0)       // one in the mail intake's class
		})
	}
}

// A caller cannot map a numeric reference to a job of its choosing (§4.1:
// the mapping is for good): the mapping is what Prime says the reference is.
func TestEnsureMapsAReferenceAsPrimeDoes(t *testing.T) {
	e := start(t, options{})
	for _, subject := range ensureSubjects() {
		t.Run(subject, func(t *testing.T) {
			is := is.New(t)
			victim, other := e.Sim.NewJob(), e.Sim.NewJob()
			body := `{"jobId":%q,"numericRef":%d}`
			if subject == events.RoleChildMirror.Requests[0] { // child-mirror's child events', which name their log row
				body = `{"jobId":%q,"numericRef":%d,"logId":` + strconv.FormatInt(e.childEvent(events.ActionCreateEstimate), 10) + `}`
			}
			e.ask(subject, fmt.Sprintf(body, other.ID, victim.Ref)) // the victim's reference, another job
			mapped, found, err := e.Store.GetJobIDByReference(context.Background(), victim.Ref)
			is.NoErr(err)
			is.True(!found || mapped == victim.ID) // never mapped to the other job
		})
	}
}

// childEvent is the log row of an event of action that no stage is
// handling yet (not published): what a child-mirror asking job-mirror on an
// event's behalf names.
func (e *env) childEvent(action string) int64 {
	e.T.Helper()
	id, err := e.Store.InsertWebhookLog(context.Background(), store.NewWebhookLogRow{
		ReceivedUTC: time.Now().UTC(), EventAction: action, Payload: "{}", IsAuthenticated: true})
	if err != nil {
		e.T.Fatal(err)
	}
	return id
}

// A job mirrored at a version Prime never gave — 2^53, as a forged answer
// left it on `make run` before shared answers were believed by their
// writer — held the row for good: a real change-job-status afterwards left
// it at 2^53 (issue 27). Prime's answer to a call sent after the row was
// written gainsays the version, and is mirrored over it.
func TestAForgedVersionDoesNotHoldTheMirror(t *testing.T) {
	is := is.New(t)
	e := start(t, options{})
	ctx := context.Background()
	j := e.Sim.NewJob()
	_, err := e.Store.UpsertJob(ctx, store.Job{JobID: j.ID, JobNumber: "FORGED", StatusID: j.StatusID, Version: 1 << 53})
	is.NoErr(err)
	_, err = e.Store.SaveJobReference(ctx, j.Ref, j.ID)
	is.NoErr(err) // a known job, as far as the mirror says
	_, err = e.Sim.UpdateJob(j.ID, func(pj *prime.Job) { pj.StatusID = statusICM })
	is.NoErr(err)
	// The hosts' clocks may differ by prime.AnswerSkew: a call is taken to
	// be sent after the row once it is that much later.
	time.Sleep(prime.AnswerSkew + 100*time.Millisecond)

	e.WaitProcessed(e.Fire("change-job-status", j.ID))
	got := e.job(j.ID)
	is.Equal(got.JobNumber, j.JobNumber) // Prime's job
	is.Equal(got.StatusID, statusICM)    // with its new status
	is.True(got.Version < 1<<53)         // and its version
}
