package status_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/matryer/is"
)

// Each action's failures are its stage's: the consumer that takes its
// resolved events; an action no stage takes is the resolver's.
func TestStageOf(t *testing.T) {
	is := is.New(t)
	is.Equal(status.StageOf(events.ActionChangeJobStatus), "job-mirror")
	is.Equal(status.StageOf(events.ActionCreateAllocation), "child-mirror")
	is.Equal(status.StageOf("made-up-action"), "resolver")
	is.Equal(status.StageOf(""), "resolver")
}

// The page shows stored text as text: an error holding markup is escaped.
func TestPageEscapesStoredText(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rep := status.Report{At: at, LastErrors: []status.StageError{{Stage: "child-mirror", What: "log row 7",
		Error: `<script>alert("x")</script>`, At: &at}}}
	page, res := getPage(t, rep)
	is.Equal(res.StatusCode, http.StatusOK)
	is.True(strings.Contains(page, "&lt;script&gt;alert")) // the error, as text
	is.True(!strings.Contains(page, "<script>"))           // never as markup
	is.True(strings.Contains(page, "Needs a person"))      // a standing error waits for a person
	is.True(strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'"))
}

// An SMS that has waited long to be sent (its endpoint not taking posts)
// is not Failed, and uses no attempt, but needs a person all the same: the
// on-call may not know. A short wait does not.
func TestALongSMSWaitNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		waiting time.Duration
		healthy bool
	}{
		{"a short wait", 2 * time.Minute, true},
		{"a long wait", 40 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			queued := at.Add(-tc.waiting)
			rep := status.Report{At: at, SMS: status.SMS{ByState: map[string]int{"Queued": 1}, OldestWaitingUTC: &queued}}
			is.Equal(rep.Healthy(), tc.healthy) // needs a person only after status.SMSWaitTooLong
			problems := strings.Join(rep.Problems(), "\n")
			is.Equal(strings.Contains(problems, "an SMS has waited 40m0s to be sent"), !tc.healthy) // saying how long
			page, _ := getPage(t, rep)
			is.True(strings.Contains(page, "oldest SMS not sent</th><td>queued "+queued.Format("2006-01-02 15:04:05"))) // the page shows since when
		})
	}
}

// getPage serves rep as the status page and gets it.
func getPage(t *testing.T, rep status.Report) (string, *http.Response) {
	t.Helper()
	srv := httptest.NewServer(status.Page(func(context.Context) (status.Report, error) { return rep, nil }))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), res
}
