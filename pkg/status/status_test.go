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
	srv := httptest.NewServer(status.Page(func(context.Context) (status.Report, error) { return rep, nil }))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	is.NoErr(err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	page := string(b)
	is.Equal(res.StatusCode, http.StatusOK)
	is.True(strings.Contains(page, "&lt;script&gt;alert")) // the error, as text
	is.True(!strings.Contains(page, "<script>"))           // never as markup
	is.True(strings.Contains(page, "Needs a person"))      // a standing error waits for a person
	is.True(strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'"))
}

// Prime not answering is a wait the page shows, with no attempt counted,
// and nothing for a person: the page says both.
func TestPageShowsPrimeUnreachableAsAWait(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	since := at.Add(-7 * time.Minute)
	rep := status.Report{At: at, Log: status.Log{Unprocessed: 12}, PrimeBudget: &status.Budget{Source: "this process's Prime client", UnreachableSince: &since}}
	is.Equal(len(rep.Waits()), 1)                                                                                // one wait
	is.True(strings.Contains(rep.Waits()[0], "Prime has not answered for 7m0s (since 2026-12-01 11:53:00 UTC)")) // since when, and for how long
	is.True(rep.Healthy())                                                                                       // nothing for a person
	srv := httptest.NewServer(status.Page(func(context.Context) (status.Report, error) { return rep, nil }))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	is.NoErr(err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	page := string(b)
	is.True(strings.Contains(page, "Waiting, no attempt counted:</strong> Prime has not answered")) // the wait, at the top
	is.True(strings.Contains(page, "Prime unreachable since"))                                      // and in the budget's table
	is.True(strings.Contains(page, "Nothing waits for a person."))                                  // not a person's job
	is.True(!strings.Contains(page, "Needs a person"))
}
