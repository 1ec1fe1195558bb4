package primesim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/ethosbuilding/primeflow/pkg/events"
)

// maxControlBody bounds a control request body.
const maxControlBody = 8 << 20

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxControlBody)).Decode(v); err != nil && err != io.EOF {
		writeControlError(w, http.StatusBadRequest, fmt.Errorf("body: %w", err))
		return false
	}
	return true
}

func writeControlError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, "application/json", map[string]string{"error": err.Error()})
}

func kindOf(w http.ResponseWriter, r *http.Request) (Kind, bool) {
	k := Kind(r.PathValue("kind"))
	if !validKind(k) {
		writeControlError(w, http.StatusNotFound, fmt.Errorf("unknown collection %q", k))
		return "", false
	}
	return k, true
}

func (s *Sim) handleStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, "application/json", s.Stats())
	})
}

func (s *Sim) handleResetStats() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleReset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.Reset(); err != nil {
			writeControlError(w, http.StatusInternalServerError, err)
			return
		}
		s.log.InfoContext(r.Context(), "primesim reset")
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleLoadFixture() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := LoadFixture(io.LimitReader(r.Body, maxControlBody))
		if err == nil {
			err = s.Load(f)
		}
		if err != nil {
			writeControlError(w, http.StatusBadRequest, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleGetFaults() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, "application/json", s.Faults())
	})
}

// handleSetFaults replaces the faults; the body is Faults in JSON
// ({"failNext":2,"latency":"50ms"}), {} clears them.
func (s *Sim) handleSetFaults() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f Faults
		if !decodeBody(w, r, &f) {
			return
		}
		s.SetFaults(f)
		s.log.InfoContext(r.Context(), "primesim faults set", "faults", f.toJSON())
		writeJSON(w, http.StatusOK, "application/json", s.Faults())
	})
}

func (s *Sim) handleClearFaults() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.SetFaults(Faults{})
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Sim) handleGetRateLimit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, "application/json", s.RateLimit())
	})
}

// handleSetRateLimit switches the budget: {"perMinute":60,"perDay":5000,
// "maxConcurrent":5}; {} turns it off.
func (s *Sim) handleSetRateLimit() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rl RateLimit
		if !decodeBody(w, r, &rl) {
			return
		}
		s.SetRateLimit(rl)
		writeJSON(w, http.StatusOK, "application/json", s.RateLimit())
	})
}

func (s *Sim) handleRevokeTokens() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.RevokeTokens()
		w.WriteHeader(http.StatusNoContent)
	})
}

// webhookRequest is the body of POST /_sim/webhooks. The job is named as
// elsewhere in the control API, by its GUID, or by the numeric reference
// Prime's webhooks carry: jobId may be either (without it, the reference of
// the record's job), and so may a change-job-status's id.
type webhookRequest struct {
	URL      string     `json:"url"`
	APIKey   string     `json:"apiKey"`
	Action   string     `json:"action"`
	JobID    identifier `json:"jobId"`
	ID       identifier `json:"id"`
	Property string     `json:"property"`
}

// identifier is a record's GUID or a job's numeric reference, given as a
// JSON string or number.
type identifier string

func (v *identifier) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = identifier(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a GUID or a numeric reference, got %s", b)
	}
	*v = identifier(n)
	return nil
}

// reference reports whether v is a numeric reference, and which.
func (v identifier) reference() (int64, bool) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// webhook is the event the request asks for: the record's GUID, and the
// numeric reference of the job it names (or of the record's job).
func (s *Sim) webhook(req webhookRequest) (Webhook, error) {
	ev := Webhook{Action: req.Action, ID: string(req.ID), Property: req.Property}
	if ref, ok := req.JobID.reference(); ok && ref == 0 {
		req.JobID = "" // as Webhook reads it: zero is none
	}
	if ref, ok := req.ID.reference(); ok {
		if req.Action != events.ActionChangeJobStatus {
			return Webhook{}, fmt.Errorf("id %s: want the GUID of the %s's record", req.ID, req.Action)
		}
		job, ok := s.Job(strconv.FormatInt(ref, 10))
		if !ok {
			return Webhook{}, fmt.Errorf("id %s: no job has that numeric reference", req.ID)
		}
		ev.ID = job.ID
	}
	switch ref, isRef := req.JobID.reference(); {
	case req.JobID == "" && ev.ID != "":
		built, err := s.Webhook(ev.Action, ev.ID)
		if err != nil {
			return Webhook{}, err
		}
		ev.JobRef = built.JobRef
	case isRef:
		ev.JobRef = ref // sent as given, a reference no job has too
	case req.JobID != "":
		job, ok := s.Job(string(req.JobID))
		if !ok {
			return Webhook{}, fmt.Errorf("jobId %s: no such job", req.JobID)
		}
		ev.JobRef = job.Ref
	}
	return ev, nil
}

func (s *Sim) handleFireWebhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req webhookRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if req.URL == "" || req.Action == "" {
			writeControlError(w, http.StatusBadRequest, fmt.Errorf("url and action are required"))
			return
		}
		ev, err := s.webhook(req)
		if err != nil {
			writeControlError(w, http.StatusBadRequest, err)
			return
		}
		status, err := s.fire(r.Context(), req.URL, req.APIKey, ev)
		if err != nil {
			writeControlError(w, http.StatusBadGateway, err)
			return
		}
		body, err := ev.Body()
		if err != nil {
			writeControlError(w, http.StatusInternalServerError, err)
			return
		}
		writeJSON(w, http.StatusOK, "application/json", map[string]any{"status": status, "body": json.RawMessage(body)})
	})
}

// handleChangeJobStatus moves the path's job to {"statusId":"…"}
// (ChangeJobStatus) and answers the job as a Record.
func (s *Sim) handleChangeJobStatus() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			StatusID string `json:"statusId"`
		}
		if !decodeBody(w, r, &req) {
			return
		}
		if req.StatusID == "" {
			writeControlError(w, http.StatusBadRequest, fmt.Errorf("statusId is required"))
			return
		}
		if _, ok := s.Job(r.PathValue("id")); !ok {
			writeControlError(w, http.StatusNotFound, fmt.Errorf("no job %s", r.PathValue("id")))
			return
		}
		j, err := s.ChangeJobStatus(r.PathValue("id"), req.StatusID)
		if err != nil {
			writeControlError(w, http.StatusInternalServerError, err)
			return
		}
		rec, _ := s.Get(KindJobs, j.ID)
		writeJSON(w, http.StatusOK, "application/json", rec)
	})
}

// generateRequest is the body of POST /_sim/{kind}: the job to attach the
// record to, and attributes that override the generated ones.
type generateRequest struct {
	JobID      string          `json:"jobId"`
	Attributes json.RawMessage `json:"attributes"`
}

// handleGenerate makes a realistic record of the collection (a job, or a
// child of jobId) and answers it as a Record.
func (s *Sim) handleGenerate() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := kindOf(w, r)
		if !ok {
			return
		}
		var req generateRequest
		if !decodeBody(w, r, &req) {
			return
		}
		if k != KindJobs && k != KindContacts && req.JobID == "" {
			writeControlError(w, http.StatusBadRequest, fmt.Errorf("jobId is required for %s", k))
			return
		}
		var id string
		switch k {
		case KindJobs:
			id = s.NewJob().ID
		case KindAppointments:
			id = s.NewAppointment(req.JobID).ID
		case KindAllocations:
			id = s.NewAllocation(req.JobID, "Assessment Report").ID
		case KindSiteForms:
			id = s.NewSiteForm(req.JobID).ID
		case KindEstimates:
			id = s.NewEstimate(req.JobID).ID
		case KindContacts:
			c, _ := s.NewContact(req.JobID)
			id = c.ID
		case KindContactRelationships:
			_, rel := s.NewContact(req.JobID)
			id = rel.ID
		case KindStatusHistories:
			job, _ := s.Job(req.JobID)
			id = s.NewStatusHistory(req.JobID, job.StatusID).ID
		}
		rec, ok := s.Get(k, id)
		if len(req.Attributes) > 0 {
			var err error
			if rec, err = s.Patch(k, id, req.Attributes); err != nil {
				writeControlError(w, http.StatusBadRequest, err)
				return
			}
		} else if !ok {
			writeControlError(w, http.StatusInternalServerError, fmt.Errorf("generated %s %s is gone", k, id))
			return
		}
		writeJSON(w, http.StatusCreated, "application/json", rec)
	})
}

func (s *Sim) handleGetRecord() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := kindOf(w, r)
		if !ok {
			return
		}
		rec, ok := s.Get(k, r.PathValue("id"))
		if !ok {
			writeControlError(w, http.StatusNotFound, fmt.Errorf("no %s with id %s", k, r.PathValue("id")))
			return
		}
		writeJSON(w, http.StatusOK, "application/json", rec)
	})
}

// handlePutRecord stores {"numericReference"?, "attributes":{…}} under the
// path's id.
func (s *Sim) handlePutRecord() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := kindOf(w, r)
		if !ok {
			return
		}
		var rec Record
		if !decodeBody(w, r, &rec) {
			return
		}
		rec.ID = r.PathValue("id")
		if err := s.Put(k, rec); err != nil {
			writeControlError(w, http.StatusBadRequest, err)
			return
		}
		stored, _ := s.Get(k, rec.ID)
		writeJSON(w, http.StatusOK, "application/json", stored)
	})
}

func (s *Sim) handleDeleteRecord() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, ok := kindOf(w, r)
		if !ok {
			return
		}
		if !s.Delete(k, r.PathValue("id")) {
			writeControlError(w, http.StatusNotFound, fmt.Errorf("no %s with id %s", k, r.PathValue("id")))
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
