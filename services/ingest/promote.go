package ingest

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/events"
)

// maxActionLen is the width of ethPrimeWebhookLog.eventAction.
const maxActionLen = 100

// promote reads the two values §2 promotes to columns: eventAction, and jobId
// only when it is a GUID (for change-job-status also taken from jobStatusId,
// Prime's label for the job's own id). A body that is not a JSON object
// promotes nothing. A non-string eventAction is kept as its JSON text so an
// odd event still says what it was.
func promote(body []byte) (action, jobID string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return "", ""
	}
	if raw, ok := obj["eventAction"]; ok {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			action = s
		} else if string(raw) != "null" {
			action = string(raw)
		}
		action = clip(action, maxActionLen)
	}
	jobID = events.PayloadGUID(obj["jobId"])
	if jobID == "" && action == "change-job-status" {
		jobID = events.PayloadGUID(obj["jobStatusId"])
	}
	return action, jobID
}

// clip cuts s to at most n runes and makes it valid UTF-8.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
