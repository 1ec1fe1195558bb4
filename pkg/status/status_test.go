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
