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
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
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

// render serves rep as the page does and gets it.
func render(t *testing.T, rep status.Report) (*http.Response, string) {
	t.Helper()
	srv := httptest.NewServer(status.Page(func(context.Context) (status.Report, error) { return rep, nil }))
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// The page shows stored text as text: an error holding markup is escaped.
func TestPageEscapesStoredText(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rep := status.Report{At: at, LastErrors: []status.StageError{{Stage: "child-mirror", What: "log row 7",
		Error: `<script>alert("x")</script>`, At: &at}}}
	res, page := render(t, rep)
	is.Equal(res.StatusCode, http.StatusOK)
	is.True(strings.Contains(page, "&lt;script&gt;alert")) // the error, as text
	is.True(!strings.Contains(page, "<script>"))           // never as markup
	is.True(strings.Contains(page, "Needs a person"))      // a standing error waits for a person
	is.True(strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'"))
}

// The page shows the day's forecast, and marks one that runs into the
// reserve before Prime's day ends.
func TestPageShowsTheDaysForecast(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	reserveAt, minute := at.Add(3*time.Hour), 42.0
	rep := status.Report{At: at, PrimeBudget: &status.Budget{Source: "the deployment's budget in NATS", Minute: &minute,
		Forecast: &primebudget.Forecast{Start: at.Add(-12 * time.Hour), End: at.Add(12 * time.Hour), Calls: 2750, PerHour: 650,
			Left: 2200, Reserve: 250, ReserveAt: &reserveAt, Short: true}}}
	_, page := render(t, rep)
	for _, want := range []string{
		`<tr><th>calls today</th><td class="n">2750</td></tr>`,                                               // the day's calls
		`<tr><th>pace, calls an hour</th><td class="n">650</td></tr>`,                                        // their pace
		`<tr><th>down to the reserve (250) at this pace</th><td class="n bad">2026-12-01 15:00:00</td></tr>`, // before the day ends: marked
		`<tr><th>Prime's day ends</th><td class="n">2026-12-02 00:00:00</td></tr>`,                           // when it ends
	} {
		is.True(strings.Contains(page, want)) // want
	}
}
