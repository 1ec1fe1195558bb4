package resolver

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// FuzzPayload feeds webhook bodies to the resolver's reading of them: the
// numeric job reference is jobId's own positive integer (a number or a
// string of digits); every GUID found is its property's text, canonical and
// in lower case, preferred names first; and the lane is the reference's,
// else jobId's GUID's, else the row's own.
func FuzzPayload(f *testing.F) {
	for _, seed := range []string{
		`{"eventAction":"change-job-status","jobId":259047,"jobStatusId":"0F8E3C1A-5B7D-4E2F-9A6C-1D3E5F7A9B01"}`,
		`{"eventAction":"create-appointment","jobId":"259047","appointmentTypeId":"1a2b3c4d-6e7f-4a8b-9c0d-2e3f4a5b6c02"}`,
		`{"jobId":"0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01","x":"2b3c4d5e-7f8a-4b9c-8d1e-3f4a5b6c7d03"}`,
		`{"jobId":-3}`, `{"jobId":2.5e5}`, `{"jobId":"0259047"}`, `{"jobId":9223372036854775808}`, `{"jobId":"\"7\""}`,
		`{"jobId":null}`, `[]`, ``, `{"jobId":" 12 "}`, `{"jobId":true}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := parsePayload(string(body))
		ref := p.numericRef()
		if ref > 0 {
			var n json.Number
			var s string
			raw := p["jobId"]
			ok := json.Unmarshal(raw, &n) == nil && n.String() == strconv.FormatInt(ref, 10) ||
				json.Unmarshal(raw, &s) == nil && strings.TrimLeft(strings.TrimSpace(s), "0") == strconv.FormatInt(ref, 10)
			if !ok {
				t.Fatalf("jobId %s read as the reference %d", raw, ref)
			}
		}
		gs := p.guids("jobStatusId", "appointmentTypeId")
		for i, g := range gs {
			var s string
			if json.Unmarshal(p[g.name], &s) != nil || strings.ToLower(s) != g.id {
				t.Fatalf("%s: %s read as the GUID %s", g.name, p[g.name], g.id)
			}
			if i > 0 && g.preferred && !gs[i-1].preferred {
				t.Fatalf("preferred %s after %s", g.name, gs[i-1].name)
			}
		}
		lane := laneKey(body, "7")
		switch {
		case ref > 0 && lane != "ref:"+strconv.FormatInt(ref, 10),
			ref == 0 && strings.HasPrefix(lane, "ref:"),
			!strings.HasPrefix(lane, "ref:") && !strings.HasPrefix(lane, "job:") && lane != "log:7":
			t.Fatalf("body %s (reference %d) in the lane %q", body, ref, lane)
		}
	})
}
