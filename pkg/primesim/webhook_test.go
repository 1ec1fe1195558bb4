package primesim_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/matryer/is"
)

// receiver is an httptest webhook endpoint that keeps what it got.
type receiver struct {
	mu     sync.Mutex
	status int
	got    []received
}

type received struct {
	method, path, apiKey, contentType string
	body                              map[string]any
}

func newReceiver(t *testing.T, status int) (*receiver, string) {
	t.Helper()
	rc := &receiver{status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body) // a bad body shows up as nil in the assertion
		rc.mu.Lock()
		rc.got = append(rc.got, received{r.Method, r.URL.Path, r.Header.Get("API-Key"), r.Header.Get("Content-Type"), body})
		rc.mu.Unlock()
		w.WriteHeader(rc.status)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.URL + "/api/prime/webhook"
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func TestFireWebhook(t *testing.T) {
	sim, _ := serve(t, primesim.Options{})
	job := sim.NewJob()
	appt := sim.NewAppointment(job.ID)
	alloc := sim.NewMakeSafeAllocation(job.ID)
	form := sim.NewSiteForm(job.ID)
	est := sim.NewEstimate(job.ID)
	ref := float64(job.Ref) // JSON numbers decode as float64

	tests := []struct {
		action, id string
		want       map[string]any
	}{
		{events.ActionChangeJobStatus, job.ID, map[string]any{"eventAction": "change-job-status", "jobId": ref, "jobStatusId": job.ID}},
		{events.ActionCreateAppointment, appt.ID, map[string]any{"eventAction": "create-appointment", "jobId": ref, "appointmentTypeId": appt.ID}},
		{events.ActionCompleteAppointment, appt.ID, map[string]any{"eventAction": "complete-appointment", "jobId": ref, "appointmentId": appt.ID}},
		{events.ActionCreateAllocation, alloc.ID, map[string]any{"eventAction": "create-allocation", "jobId": ref, "allocationTypeId": alloc.ID}},
		{events.ActionChangeCustomFormStatus, form.ID, map[string]any{"eventAction": "change-custom-form-status", "jobId": ref, "customFormStatusId": form.ID}},
		{events.ActionCreateEstimate, est.ID, map[string]any{"eventAction": "create-estimate", "jobId": ref, "estimateId": est.ID}},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			is := is.New(t)
			rc, target := newReceiver(t, http.StatusOK)
			ev, err := sim.Webhook(tt.action, tt.id)
			is.NoErr(err)                // the event is built from the records
			is.Equal(ev.JobRef, job.Ref) // with the job's numeric reference
			is.NoErr(sim.FireWebhook(context.Background(), target, "webhook-identifier", ev))
			got := rc.all()
			is.Equal(len(got), 1)                            // one POST
			is.Equal(got[0].method, http.MethodPost)         // a POST
			is.Equal(got[0].path, "/api/prime/webhook")      // to the URL given
			is.Equal(got[0].apiKey, "webhook-identifier")    // with the API-Key header
			is.Equal(got[0].contentType, "application/json") // as JSON
			is.Equal(got[0].body, tt.want)                   // shaped like Prime's (§5)
		})
	}

	t.Run("renamed property", func(t *testing.T) {
		is := is.New(t)
		rc, target := newReceiver(t, http.StatusOK)
		ev := primesim.Webhook{Action: events.ActionCreateAppointment, JobRef: job.Ref, ID: appt.ID, Property: "appointmentId"}
		is.NoErr(sim.FireWebhook(context.Background(), target, "k", ev))
		is.Equal(rc.all()[0].body["appointmentId"], appt.ID) // the GUID under the property Prime renamed it to (§4.2)
		_, old := rc.all()[0].body["appointmentTypeId"]
		is.True(!old) // and not under the old one
	})

	t.Run("receiver refuses", func(t *testing.T) {
		is := is.New(t)
		_, target := newReceiver(t, http.StatusUnauthorized)
		err := sim.FireWebhook(context.Background(), target, "secret-key", primesim.Webhook{Action: "x"})
		var we *primesim.WebhookError
		is.True(errors.As(err, &we))                             // a WebhookError
		is.Equal(we.StatusCode, http.StatusUnauthorized)         // with the status
		is.True(!strings.Contains(err.Error(), "secret-key"))    // without the key
		is.Equal(sim.Stats().WebhooksFired, int64(len(tests)+2)) // every sent webhook counted
	})

	t.Run("unknown record or action", func(t *testing.T) {
		is := is.New(t)
		_, err := sim.Webhook(events.ActionCreateAppointment, job.ID)
		is.True(err != nil) // a job is not an appointment
		_, err = sim.Webhook("delete-everything", job.ID)
		is.True(err != nil) // an action Prime does not send
	})
}

func TestFireWebhookThroughControlAPI(t *testing.T) {
	is := is.New(t)
	sim, base := serve(t, primesim.Options{})
	rc, target := newReceiver(t, http.StatusAccepted)
	alloc := sim.NewMakeSafeAllocation(fixtureJob)

	body, err := json.Marshal(map[string]any{"url": target, "apiKey": "k-123", "action": "create-allocation", "id": alloc.ID})
	is.NoErr(err)
	res := do(t, base, call{method: http.MethodPost, path: "/_sim/webhooks", body: string(body)})
	is.Equal(res.status, http.StatusOK) // fired
	var out struct {
		Status int
		Body   map[string]any
	}
	is.NoErr(json.Unmarshal(res.body, &out))
	is.Equal(out.Status, http.StatusAccepted) // the receiver's answer is reported
	got := rc.all()
	is.Equal(len(got), 1)                                  // one POST
	is.Equal(got[0].apiKey, "k-123")                       // with the key
	is.Equal(got[0].body["jobId"], float64(fixtureJobRef)) // the numeric reference filled in
	is.Equal(got[0].body["allocationTypeId"], alloc.ID)    // the allocation under Prime's label
	is.Equal(out.Body, got[0].body)                        // and the body sent is reported

	res = do(t, base, call{method: http.MethodPost, path: "/_sim/webhooks", body: `{"url":"` + target + `","action":"create-allocation","id":"nope"}`})
	is.Equal(res.status, http.StatusBadRequest) // an unknown record is refused
}

// /_sim/webhooks names the job as the rest of the control API does, by its
// GUID, or by the numeric reference Prime sends: a jobId given as a GUID is
// sent as the job's reference, and a change-job-status's id given as the
// reference is sent as the job's GUID.
func TestFireWebhookNamesTheJobEitherWay(t *testing.T) {
	_, base := serve(t, primesim.Options{})
	rc, target := newReceiver(t, http.StatusOK)
	for _, tc := range []struct {
		name, body string
		status     int
		jobID      any // the body's jobId, as JSON decodes it
		property   string
		id         string
	}{
		{"jobId a GUID", `"action":"create-appointment","jobId":"` + fixtureJob + `","id":"` + fixtureAppt + `"`, http.StatusOK,
			float64(fixtureJobRef), "appointmentTypeId", fixtureAppt},
		{"jobId a number", `"action":"change-job-status","jobId":` + strconv.FormatInt(fixtureJobRef, 10) + `,"id":"` + fixtureJob + `"`, http.StatusOK,
			float64(fixtureJobRef), "jobStatusId", fixtureJob},
		{"jobId a number in a string", `"action":"change-job-status","jobId":"` + strconv.FormatInt(fixtureJobRef, 10) + `","id":"` + fixtureJob + `"`, http.StatusOK,
			float64(fixtureJobRef), "jobStatusId", fixtureJob},
		{"the job's id its reference", `"action":"change-job-status","id":` + strconv.FormatInt(fixtureJobRef, 10), http.StatusOK,
			float64(fixtureJobRef), "jobStatusId", fixtureJob},
		{"a jobId no job has", `"action":"change-job-status","jobId":"9d9d9d9d-0000-4000-8000-000000000000","id":"` + fixtureJob + `"`, http.StatusBadRequest,
			nil, "", ""},
		{"a child's id a number", `"action":"create-appointment","id":12`, http.StatusBadRequest, nil, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			before := len(rc.all())
			res := do(t, base, call{method: http.MethodPost, path: "/_sim/webhooks", body: `{"url":"` + target + `",` + tc.body + `}`})
			is.Equal(res.status, tc.status) // fired, or refused
			got := rc.all()[before:]
			if tc.status != http.StatusOK {
				is.Equal(len(got), 0) // nothing sent
				return
			}
			is.Equal(len(got), 1)
			is.Equal(got[0].body["jobId"], tc.jobID)  // the numeric reference, as Prime sends it
			is.Equal(got[0].body[tc.property], tc.id) // and the record's GUID
		})
	}
}

func TestPrimeWebhookActionsAreDistinct(t *testing.T) {
	is := is.New(t)
	seen := map[string]bool{}
	for _, a := range []string{events.ActionChangeJobStatus, events.ActionCreateAppointment, events.ActionCompleteAppointment,
		events.ActionChangeCustomFormStatus, events.ActionCreateEstimate, events.ActionCreateAllocation} {
		b, err := primesim.Webhook{Action: a, JobRef: 1, ID: "g"}.Body()
		is.NoErr(err)
		var m map[string]any
		is.NoErr(json.Unmarshal(b, &m))
		is.Equal(len(m), 3) // eventAction, jobId and the GUID property
		for k := range m {
			if k != "eventAction" && k != "jobId" {
				is.True(!seen[k]) // each action has its own property
				seen[k] = true
			}
		}
	}
	b, err := primesim.Webhook{Action: "other"}.Body()
	is.NoErr(err)
	is.Equal(string(b), `{"eventAction":"other"}`) // no jobId or GUID when none is given
}
