package primesim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/ethosbuilding/primeflow/pkg/events"
)

// actionShape is, per action (events.Actions), the property Prime puts the record's GUID
// under (mislabelled, §4.2) and the collection the GUID belongs to.
func actionShape(action string) (property string, k Kind, ok bool) {
	switch action {
	case events.ActionChangeJobStatus:
		return "jobStatusId", KindJobs, true
	case events.ActionCreateAppointment:
		return "appointmentTypeId", KindAppointments, true
	case events.ActionCompleteAppointment:
		return "appointmentId", KindAppointments, true
	case events.ActionChangeCustomFormStatus:
		return "customFormStatusId", KindSiteForms, true
	case events.ActionCreateEstimate:
		return "estimateId", KindEstimates, true
	case events.ActionCreateAllocation:
		return "allocationTypeId", KindAllocations, true
	}
	return "", "", false
}

// Webhook is one event as Prime sends it.
type Webhook struct {
	// Action is the eventAction.
	Action string `json:"action"`
	// JobRef is sent as jobId: the job's numeric reference, never its GUID
	// (§4.1). Zero leaves jobId out.
	JobRef int64 `json:"jobId,omitempty"`
	// ID is the GUID the event is about, sent under the action's property.
	ID string `json:"id,omitempty"`
	// Property overrides the property ID is sent under, to play Prime
	// renaming one (§4.2). An action with no known property uses "id".
	Property string `json:"property,omitempty"`
}

// Body is the JSON Prime would post, e.g.
// {"eventAction":"change-job-status","jobId":259047,"jobStatusId":"<job guid>"}.
func (w Webhook) Body() ([]byte, error) {
	body := map[string]any{"eventAction": w.Action}
	if w.JobRef != 0 {
		body["jobId"] = w.JobRef
	}
	if w.ID != "" {
		prop := w.Property
		if prop == "" {
			prop, _, _ = actionShape(w.Action)
		}
		if prop == "" {
			prop = "id"
		}
		body[prop] = w.ID
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("primesim: webhook body: %w", err)
	}
	return b, nil
}

// Webhook builds the event Prime would send for action about the record id,
// with the numeric reference of the record's job.
func (s *Sim) Webhook(action, id string) (Webhook, error) {
	_, k, ok := actionShape(action)
	if !ok {
		return Webhook{}, fmt.Errorf("primesim: webhook: unknown action %q", action)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.store.get(k, id)
	if !ok {
		return Webhook{}, fmt.Errorf("primesim: webhook %s: no %s with id %s", action, k, id)
	}
	jobID := e.jobID
	if k == KindJobs {
		jobID = e.id
	}
	ref, ok := s.store.jobRe[jobID]
	if !ok {
		return Webhook{}, fmt.Errorf("primesim: webhook %s: %s %s has no job with a numeric reference", action, k, id)
	}
	return Webhook{Action: action, JobRef: ref, ID: id}, nil
}

// WebhookBody is the body of the event Prime would send for action about
// the record id (Webhook, then its Body).
func (s *Sim) WebhookBody(action, id string) ([]byte, error) {
	w, err := s.Webhook(action, id)
	if err != nil {
		return nil, err
	}
	return w.Body()
}

// WebhookError is a non-2xx answer from the webhook receiver.
type WebhookError struct{ StatusCode int }

// Error gives the receiver's status.
func (e *WebhookError) Error() string {
	return fmt.Sprintf("primesim: webhook: receiver answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// FireWebhook posts ev to target the way Prime does, with the webhook's
// identifier in the API-Key header. A non-2xx answer is a *WebhookError.
// Neither the key nor the URL appear in errors.
func (s *Sim) FireWebhook(ctx context.Context, target, apiKey string, ev Webhook) error {
	status, err := s.fire(ctx, target, apiKey, ev)
	if err != nil {
		return err
	}
	if status < 200 || status > 299 {
		return &WebhookError{StatusCode: status}
	}
	return nil
}

func (s *Sim) fire(ctx context.Context, target, apiKey string, ev Webhook) (int, error) {
	body, err := ev.Body()
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("primesim: webhook %s: %w", ev.Action, withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("API-Key", apiKey)
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("primesim: webhook %s: %w", ev.Action, withoutURL(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // drained so the connection is reused
	s.stats.webhookFired()
	return resp.StatusCode, nil
}

func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
