package prime

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzJSONAPI feeds Prime's answers to the decoders of every record type:
// a single-resource document, a page of a list and an errors document.
// None may panic; a decoded record keeps the resource's id and its
// attributes as JSON, and a page holds one record a resource.
func FuzzJSONAPI(f *testing.F) {
	for _, seed := range []string{
		`{"data":{"type":"Job","id":"0f8e3c1a-5b7d-4e2f-9a6c-1d3e5f7a9b01","attributes":{"jobNumber":"J012001","createdAt":"2025-02-07 04:14:33","version":3,"authorisedTotalIncludingTax":700.8,"address":{"suburb":"Coburg"}}}}`,
		`{"data":{"type":"Appointment","id":"a1","attributes":{"jobId":"j1","startDate":"2026-03-02T09:00:00+11:00","endDate":"","status":"Scheduled"}}}`,
		`{"data":{"type":"Allocation","id":"x","attributes":{"allocationType":"Make  safe","createdAt":null}}}`,
		`{"data":{"type":"Estimate","id":"e","attributes":{"total":"2068.00","categories":[{"name":"Make Safe","items":[{"total":12}]}]}}}`,
		`{"data":[{"type":"Contact","id":"c1","attributes":{"firstName":"Ann"}},{"type":"Contact","id":"c2","attributes":null}],"meta":{"pagination":{"total":3,"count":2,"per_page":2,"current_page":1,"total_pages":2}}}`,
		`{"data":[],"meta":{}}`, `{"data":null}`, `{"data":{"id":"x","attributes":"not an object"}}`,
		`{"errors":[{"status":"404","code":"ErrorInvalidIdMalformed","title":"Not found","detail":"no job"}]}`,
		`{"errors":[{"status":429,"code":7}]}`, `{"error":"invalid_grant","error_description":"bad password"}`, `{"message":"Server Error"}`,
		`{"data":{"id":"x","attributes":{"createdAt":"yesterday"}}}`, `{"data":{"id":"x","attributes":{"version":"3"}}}`,
		`[]`, `null`, ``, `<html>502</html>`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeErrors(body)
		decodeEach[Appointment](t, body)
		decodeEach[Allocation](t, body)
		decodeEach[SiteForm](t, body)
		decodeEach[Estimate](t, body)
		decodeEach[Contact](t, body)
		decodeEach[ContactRelationship](t, body)
		decodeEach[StatusHistory](t, body)
		job, err := decodeOne[Job]("fuzz", body)
		if err != nil {
			return
		}
		var doc struct {
			Data struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if json.Unmarshal(body, &doc) != nil || job.ID != doc.Data.ID {
			t.Fatalf("job %q decoded from a document whose id is %q", job.ID, doc.Data.ID)
		}
		if !json.Valid(job.Raw) {
			t.Fatalf("job %s keeps attributes that are not JSON: %q", job.ID, job.Raw)
		}
	})
}

// decodeEach decodes body as a document and as a page of T.
func decodeEach[T any, PT recordPtr[T]](t *testing.T, body []byte) {
	t.Helper()
	decodeOne[T, PT]("fuzz", body)
	p, err := decodePage[T, PT]("fuzz", 1, body)
	if err != nil {
		return
	}
	items := p.Records
	var doc struct {
		Data []json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Data) != len(items) {
		t.Fatalf("a page of %d resources decoded as %d records", len(doc.Data), len(items))
	}
}

// FuzzRateLimitHeaders holds a budget's reading of Prime's rate-limit
// headers to what it may do: a 429 always holds the calls, for as long as
// the headers say but never past maxHold (Prime's longest window, a day); no
// other answer holds them; a minute Prime says is spent has the calls wait
// for its reset, within the same bound; no reading is negative.
func FuzzRateLimitHeaders(f *testing.F) {
	for _, seed := range []struct {
		status                    int
		retryAfter, remaining, at string
	}{
		{429, "30", "", ""}, {429, "", "0", "12"}, {429, "", "", ""}, {429, "Wed, 21 Oct 2015 07:28:00 GMT", "", ""},
		{200, "", "0", "1738901733"}, {200, "", "59", "60"}, {200, "", "0", ""}, {429, "0.5", "", ""},
		{429, "-3", "", "-1"}, {429, "1e300", "", ""}, {429, "NaN", "", ""}, {429, "Inf", "0", "1e300"},
		{200, "", " 0 ", "1e18"}, {429, "Fri, 31 Dec 9999 23:59:59 GMT", "", ""}, {503, "10", "", ""},
	} {
		f.Add(seed.status, seed.retryAfter, seed.remaining, seed.at)
	}
	t0 := time.Date(2025, 2, 7, 4, 14, 33, 0, time.UTC)
	f.Fuzz(func(t *testing.T, status int, retryAfter, remaining, reset string) {
		b := NewLocalBudget(60, 1, 1, fixedClock{t0})
		h := http.Header{}
		for k, v := range map[string]string{headerRetryAfter: retryAfter, headerMinuteRemaining: remaining, headerMinuteReset: reset} {
			if v != "" {
				h.Set(k, v)
			}
		}
		p, _, err := b.Admit(context.Background(), Turn{})
		if err != nil {
			t.Fatal(err)
		}
		got := p.Done(status, h)
		held := b.Held()
		switch {
		case held < 0 || held > maxHold:
			t.Fatalf("status %d, headers %v: a hold of %s", status, h, held)
		case status == http.StatusTooManyRequests && (got <= 0 || held != got):
			t.Fatalf("429, headers %v: Done says %s, the hold is %s", h, got, held)
		case status != http.StatusTooManyRequests && (got != 0 || held != 0):
			t.Fatalf("status %d: Done says %s, the hold is %s", status, got, held)
		}
		l := ReadLimits(status, h, t0)
		switch {
		case l.Spent < 0 || l.Spent > maxHold:
			t.Fatalf("status %d, headers %v: a wait for the minute's reset of %s", status, h, l.Spent)
		case l.Spent > 0 && (status == http.StatusTooManyRequests || !spent(remaining)):
			t.Fatalf("status %d, %q calls left this minute: a wait for the reset of %s", status, remaining, l.Spent)
		}
	})
}

// spent reports whether x-ratelimit-minute-remaining says no call is left.
func spent(remaining string) bool {
	n, err := strconv.Atoi(strings.TrimSpace(remaining))
	return err == nil && n <= 0
}

// FuzzTokenAnswer: the token endpoint's answer gives a token that lives,
// and is refreshed, a positive time from now, whatever expires_in says.
func FuzzTokenAnswer(f *testing.F) {
	for _, seed := range []string{
		`{"access_token":"abc","token_type":"Bearer","expires_in":21600}`, `{"access_token":"abc","expires_in":"3600"}`,
		`{"access_token":"abc"}`, `{"access_token":"abc","expires_in":0.5}`, `{"access_token":"abc","expires_in":1e300}`,
		`{"access_token":"abc","expires_in":-5}`, `{"access_token":""}`, `{"error":"invalid_client"}`, `not json`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		token, lifetime, err := decodeToken(body)
		if err != nil {
			return
		}
		if token == "" || lifetime <= 0 || lifetime-tokenRefreshMargin(lifetime) <= 0 {
			t.Fatalf("%s: token %q living %s, refreshed after %s", body, token, lifetime, lifetime-tokenRefreshMargin(lifetime))
		}
	})
}
