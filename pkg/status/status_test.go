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
	"github.com/ethosbuilding/primeflow/pkg/pipeline"
	"github.com/ethosbuilding/primeflow/pkg/primebudget"
	"github.com/ethosbuilding/primeflow/pkg/status"
	"github.com/ethosbuilding/primeflow/pkg/store"
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
		Error: `<script>alert("x")</script>`, At: &at}}, NeedsPerson: []string{"1 log row failed 5 times"}}
	res, page := served(t, rep)
	is.Equal(res.StatusCode, http.StatusOK)
	is.True(strings.Contains(page, "&lt;script&gt;alert")) // the error, as text
	is.True(!strings.Contains(page, "<script>"))           // never as markup
	is.True(strings.Contains(page, "Needs a person"))      // what waits for a person
	is.True(strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'"))
}

// A failing row's stage is the service its recorded error names; an error
// recorded without one is its action's stage's.
func TestStageOfRow(t *testing.T) {
	for _, tc := range []struct{ name, action, recorded, stage, err string }{
		{"a resolver's payload fault on a child-mirror action", events.ActionCreateAppointment,
			pipeline.RecordedError("resolver", "payload fault MissingIdentifier (create-appointment): no id"), "resolver",
			"payload fault MissingIdentifier (create-appointment): no id"},
		{"child-mirror's own failure", events.ActionCreateAppointment, pipeline.RecordedError("child-mirror", "prime: 503"), "child-mirror", "prime: 503"},
		{"recorded before services named themselves", events.ActionCreateAppointment, "prime: 503", "child-mirror", "prime: 503"},
		{"an action no stage takes", "made-up", "prime: 503", "resolver", "prime: 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			stage, err := status.StageOfRow(store.WebhookLogRow{EventAction: tc.action, ProcessStatus: tc.recorded})
			is.Equal(stage, tc.stage) // the service that met it
			is.Equal(err, tc.err)     // and its error
		})
	}
}

// What a report comes to: what could not be asked first, then what waits
// for a person.
func TestVerdict(t *testing.T) {
	is := is.New(t)
	is.Equal(status.Report{}.Verdict(), status.AllWell)
	is.Equal(status.Report{Unread: []string{"Prime budget: not known"}}.Verdict(), status.AllWell) // the budget unread is said, not a verdict
	is.Equal(status.Report{NeedsPerson: []string{"1 log row failed 5 times"}}.Verdict(), status.NeedsAPerson)
	is.Equal(status.Report{NeedsPerson: []string{"x"}, Unreachable: []string{"ingest: does not answer"}}.Verdict(), status.CannotTell)
}

// On the page a capped row is listed once under what needs a person: its
// error is the stage's last error, not a second line there.
func TestPageListsACappedRowOnce(t *testing.T) {
	is := is.New(t)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rep := status.Report{At: at, Log: status.Log{Capped: 1}, NeedsPerson: []string{"1 log row failed 5 times, not retried until replayed"},
		LastErrors: []status.StageError{{Stage: "resolver", What: "log row 7 (create-appointment), attempt 5 of 5", Error: "payload fault", At: &at}}}
	_, page := served(t, rep)
	is.Equal(strings.Count(page, "log row 7"), 1)                // the row once, among the last errors
	is.Equal(strings.Count(page, "1 log row failed 5 times"), 1) // and the count once, under what needs a person
}

// served is the page of rep, as a browser gets it.
func served(t *testing.T, rep status.Report) (*http.Response, string) {
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
	return res, string(b)
}

// overviewOnly is a store whose overview is o and which holds no setting
// (the instance pairing is not asked: no JS).
type overviewOnly struct{ o store.Overview }

func (f overviewOnly) StatusOverview(context.Context, store.OverviewQuery) (store.Overview, error) {
	return f.o, nil
}
func (overviewOnly) SetSetting(context.Context, string, string) error { return nil }
func (overviewOnly) GetSetting(context.Context, string) (string, bool, error) {
	return "", false, nil
}

// Junk refused unread is counted, on the page too, and needs nobody; an
// email given up on does.
func TestRejectedEmailsNeedNobody(t *testing.T) {
	is := is.New(t)
	rep, err := status.Gather(context.Background(), status.Sources{Store: overviewOnly{store.Overview{EmailsRejected: 3}}})
	is.NoErr(err)
	is.Equal(rep.Emails.Rejected, 3)
	is.Equal(len(rep.NeedsPerson), 0) // nothing for a person
	_, page := served(t, rep)
	is.True(strings.Contains(page, `emails rejected unread (not Prime's)</th><td class="n">3</td>`)) // shown, not marked bad

	rep, err = status.Gather(context.Background(), status.Sources{Store: overviewOnly{store.Overview{EmailsRejected: 3, EmailsFailed: 1}}})
	is.NoErr(err)
	is.Equal(len(rep.NeedsPerson), 1)                                                                        // the failed one only
	is.True(strings.HasPrefix(rep.NeedsPerson[0], "1 new-job email failed for good, in MAIL_FAILED_FOLDER")) // not the rejected ones
}

// An SMS that has waited long to be sent (its endpoint not taking posts)
// is not Failed, and uses no attempt, but needs a person all the same: the
// on-call may not know. A short wait does not.
func TestALongSMSWaitNeedsAPerson(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		waiting time.Duration
		needs   bool
	}{
		{"a short wait", 2 * time.Minute, false},
		{"a long wait", 40 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			queued := at.Add(-tc.waiting)
			o := store.Overview{SMS: store.SendCounts(), SMSOldestWaitingUTC: queued}
			o.SMS[store.SendQueued] = 1
			rep, err := status.Gather(context.Background(), status.Sources{Store: overviewOnly{o}, Now: func() time.Time { return at }})
			is.NoErr(err)
			is.True(rep.SMS.OldestWaitingUTC.Equal(queued)) // since when it waits
			needs := strings.Join(rep.NeedsPerson, "\n")
			is.Equal(strings.Contains(needs, "an SMS has waited 40m0s to be sent"), tc.needs) // a person, only after status.SMSWaitTooLong
			_, page := served(t, rep)
			is.True(strings.Contains(page, "oldest SMS not sent</th><td>queued "+queued.Format("2006-01-02 15:04:05"))) // the page shows since when
		})
	}
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
	_, page := served(t, rep)
	for _, want := range []string{
		`<tr><th>calls today</th><td class="n">2750</td></tr>`,                                               // the day's calls
		`<tr><th>pace, calls an hour</th><td class="n">650</td></tr>`,                                        // their pace
		`<tr><th>down to the reserve (250) at this pace</th><td class="n bad">2026-12-01 15:00:00</td></tr>`, // before the day ends: marked
		`<tr><th>Prime's day ends</th><td class="n">2026-12-02 00:00:00</td></tr>`,                           // when it ends
	} {
		is.True(strings.Contains(page, want)) // want
	}
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
	is.Equal(rep.Verdict(), status.AllWell)                                                                      // nothing for a person
	_, page := served(t, rep)
	is.True(strings.Contains(page, "Waiting, no attempt counted:</strong> Prime has not answered")) // the wait, at the top
	is.True(strings.Contains(page, "Prime unreachable since"))                                      // and in the budget's table
	is.True(strings.Contains(page, "Nothing waits for a person."))                                  // not a person's job
	is.True(!strings.Contains(page, "Needs a person"))
}
