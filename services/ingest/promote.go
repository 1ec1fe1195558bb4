package ingest

import (
	"bytes"
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
	rawAction, rawJobID, rawJobStatusID, ok := promotedFields(body)
	if !ok {
		return "", ""
	}
	return promoteValues(rawAction, rawJobID, rawJobStatusID)
}

// promoteValues is promote's reading of the three raw values (nil when
// absent).
func promoteValues(rawAction, rawJobID, rawJobStatusID json.RawMessage) (action, jobID string) {
	if rawAction != nil {
		var s string
		if json.Unmarshal(rawAction, &s) == nil {
			action = s
		} else if string(rawAction) != "null" {
			action = string(rawAction)
		}
		action = clip(action, maxActionLen)
	}
	jobID = events.PayloadGUID(rawJobID)
	if jobID == "" && action == events.ActionChangeJobStatus {
		jobID = events.PayloadGUID(rawJobStatusID)
	}
	return action, jobID
}

// promotedFields returns the raw values of eventAction, jobId and
// jobStatusId in a JSON object, nil when absent — what decoding the body
// into a map[string]json.RawMessage gives (keys unescaped, the last of a
// repeated key wins) without building the map, which cost more than the
// rest of the webhook's handling. ok is false when body is not valid JSON
// or not an object.
func promotedFields(body []byte) (action, jobID, jobStatusID json.RawMessage, ok bool) {
	if !json.Valid(body) {
		return nil, nil, nil, false
	}
	// From here body is valid JSON, so the scan needs no error checks.
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return nil, nil, nil, false
	}
	i = skipSpace(body, i+1)
	for body[i] != '}' {
		keyEnd := stringEnd(body, i)
		key := body[i:keyEnd]
		i = skipSpace(body, skipSpace(body, keyEnd)+1) // past the colon
		end := valueEnd(body, i)
		switch keyName(key) {
		case "eventAction":
			action = body[i:end]
		case "jobId":
			jobID = body[i:end]
		case "jobStatusId":
			jobStatusID = body[i:end]
		}
		i = skipSpace(body, end)
		if body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return action, jobID, jobStatusID, true
}

// keyName is an object key's text: its bytes between the quotes, or, when
// it has escapes, the string they decode to.
func keyName(quoted []byte) string {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1 : len(quoted)-1])
	}
	var s string
	json.Unmarshal(quoted, &s) // valid JSON: cannot fail
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd is the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = stringEnd(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
			i++
		}
		return i
	}
}

// clip cuts s to at most n runes and makes it valid UTF-8.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
