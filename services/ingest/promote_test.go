package ingest

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
)

func FuzzPromote(f *testing.F) {
	for _, seed := range []string{
		`{"eventAction":"change-job-status","jobId":259047,"jobStatusId":"0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`,
		`{"eventAction":"create-appointment","jobId":"0B6A3C52-3E0F-4A57-9A39-2F1D7C1E4B10"}`,
		`{"eventAction":"change-job-status","jobId":"{0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10}"}`,
		`{"eventAction":"change-job-status","jobId":"urn:uuid:0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"}`,
		`{"eventAction":null,"jobId":null}`,
		`{"eventAction":["x"],"jobStatusId":7}`,
		`{"eventAction":"` + strings.Repeat("x", 150) + `"}`,
		`{"eventAction":"\xff\xfe"}`,
		`[]`, `"x"`, `null`, ``, `not json`, `{}`, ` { } `, `{"a":{"eventAction":"x"},"b":["}",{"]":"\""}]}`,
		`{"eventAction":"first","eventAction":"second"}`, `{"event\u0041ction":"escaped","jobId" : "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10" }`,
		`{"eventAction":true,"x":-1.5e3,"jobId":null}`, `{"eventAction":"x"} trailing`, "\ufeff{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		action, jobID := promote(body)
		if refAction, refJobID := promoteThroughAMap(body); action != refAction || jobID != refJobID {
			t.Fatalf("promote(%q) = %q, %q; through a map: %q, %q", body, action, jobID, refAction, refJobID)
		}
		if !utf8.ValidString(action) || utf8.RuneCountInString(action) > maxActionLen {
			t.Fatalf("action %q: not valid UTF-8 or longer than %d", action, maxActionLen)
		}
		if jobID != "" {
			id, err := uuid.Parse(jobID)
			if err != nil || id.String() != jobID {
				t.Fatalf("jobId %q is not a canonical lower-case GUID", jobID)
			}
			if !strings.Contains(strings.ToLower(string(body)), jobID) {
				t.Fatalf("jobId %q does not come from the body %q", jobID, body)
			}
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(body, &obj) != nil {
			if action != "" || jobID != "" {
				t.Fatalf("a body that is not a JSON object promoted %q, %q", action, jobID)
			}
			return
		}
		var s string
		if raw, ok := obj["eventAction"]; ok && json.Unmarshal(raw, &s) == nil && utf8.ValidString(s) && utf8.RuneCountInString(s) <= maxActionLen {
			if action != s {
				t.Fatalf("eventAction %q promoted as %q", s, action)
			}
		}
		if jobID != "" && action != "change-job-status" {
			var v string
			if json.Unmarshal(obj["jobId"], &v) != nil || !strings.EqualFold(v, jobID) {
				t.Fatalf("jobId %q promoted from somewhere other than jobId for %q", jobID, action)
			}
		}
	})
}

// promoteThroughAMap is promote reading the body into a map, as it was
// first written: the reference for promotedFields.
func promoteThroughAMap(body []byte) (action, jobID string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return "", ""
	}
	return promoteValues(obj["eventAction"], obj["jobId"], obj["jobStatusId"])
}
