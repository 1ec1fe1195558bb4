package resolver

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/events"
)

// payload is a webhook body as the resolver reads it: top-level properties
// only, since Prime's bodies are flat (§5).
type payload map[string]json.RawMessage

// parsePayload reads a stored body; one that is not a JSON object has no
// properties.
func parsePayload(body string) payload {
	var p payload
	if json.Unmarshal([]byte(body), &p) != nil {
		return payload{}
	}
	return p
}

// numericRef is the numeric job reference in jobId (§4.1): a JSON number,
// or a string of digits; 0 when there is none.
func (p payload) numericRef() int64 {
	raw, ok := p["jobId"]
	if !ok {
		return 0
	}
	s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// guidProp is a property whose value is a GUID.
type guidProp struct {
	name, id  string
	preferred bool
}

// guids collects every GUID-valued property (§4.2 step 1): the preferred
// names first, in the order given, then every other in name order.
func (p payload) guids(preferred ...string) []guidProp {
	var out []guidProp
	seen := map[string]bool{}
	for _, name := range preferred {
		if id := events.PayloadGUID(p[name]); id != "" {
			out = append(out, guidProp{name: name, id: id, preferred: true})
			seen[name] = true
		}
	}
	names := make([]string, 0, len(p))
	for name := range p {
		if !seen[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if id := events.PayloadGUID(p[name]); id != "" {
			out = append(out, guidProp{name: name, id: id})
		}
	}
	return out
}

// laneKey is the job an event is about, as far as the raw payload tells:
// Prime sends the numeric reference in jobId with every action (§5), so
// one job's events share a lane. Events without one get a lane of their own.
func laneKey(body []byte, logID string) string {
	p := parsePayload(string(body))
	if ref := p.numericRef(); ref > 0 {
		return "ref:" + strconv.FormatInt(ref, 10)
	}
	if id := events.PayloadGUID(p["jobId"]); id != "" {
		return "job:" + id
	}
	return "log:" + logID
}
