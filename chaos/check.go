package chaos

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/optimoroute"
	"github.com/ethosbuilding/primeflow/pkg/sms"
	"github.com/ethosbuilding/primeflow/pkg/store"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
)

// report is the invariants as they stand. Each list names what breaks one;
// the figures go in the summary.
type report struct {
	lost, duplicated, unprocessed, capped, resent int

	lostRows         []string // accepted webhooks whose row is missing or holds another body
	unprocessedRows  []string // rows not processed (at the cap or not)
	unfinishedJobs   []string // jobs whose webhooks were never all accepted
	pipelinePending  []string // jobs whose new-job pipeline has not completed
	pipelineTwice    []string // jobs whose pipeline completed more than once
	phoneCallMissing []string // after-hours make-safe jobs without their call or SMS
	phoneCallWrong   []string // calls raised for jobs that must not have one
	inviteMissing    []string // jobs in Initial Contact Made whose triage invite was not sent to the endpoint
	inviteTwice      []string // invites queued for a status change another invite of the job answers
	orderMissing     []string // appointments without their order at their date
	orderExtra       []string // orders no appointment accounts for
	dateUnplanned    []string // dates not planned after their last order write
	exits            []string // processes that exited on their own
	attempted        []string // rows that counted an attempt
	// noAttempts: no row may count an attempt (a scenario whose only
	// fault of Prime is an outage, which is a wait).
	noAttempts bool

	mailReport // the mail scenario's (mail.go)
}

// settled is every invariant that more time can make true holding: the
// pipeline has caught up.
func (r report) settled() bool {
	return len(r.unprocessedRows)+len(r.unfinishedJobs)+len(r.pipelinePending)+len(r.phoneCallMissing)+
		len(r.inviteMissing)+len(r.orderMissing)+len(r.dateUnplanned) == 0 && r.mailReport.settled()
}

// lines are a report's lines: what is still awaited, or what is broken.
type lines []string

// waiting adds what, and the first of items, when there are any.
func (l *lines) waiting(what string, items []string) {
	if len(items) > 0 {
		*l = append(*l, fmt.Sprintf("%d %s (%s)", len(items), what, strings.Join(items[:min(3, len(items))], ", ")))
	}
}

// broken adds an invariant, and the first of the items that break it,
// when there are any.
func (l *lines) broken(invariant string, items []string) {
	if len(items) > 0 {
		*l = append(*l, fmt.Sprintf("%s: %d: %s", invariant, len(items), strings.Join(items[:min(10, len(items))], "; ")))
	}
}

// waitingFor says what the pipeline has not caught up with.
func (r report) waitingFor() []string {
	var out lines
	add := out.waiting
	add("rows unprocessed", r.unprocessedRows)
	add("jobs whose webhooks were not all accepted", r.unfinishedJobs)
	add("pipelines pending", r.pipelinePending)
	add("make-safe calls or SMS missing", r.phoneCallMissing)
	add("orders missing or stale", r.orderMissing)
	add("dates not planned since their last order write", r.dateUnplanned)
	r.mailReport.waitingFor(&out)
	if len(out) == 0 {
		return []string{"nothing left to wait for"}
	}
	return out
}

// violations are the invariants that do not hold, each with its cases.
func (r report) violations() []string {
	var out lines
	add := out.broken
	add("every accepted webhook is stored", r.lostRows)
	add("every stored webhook is processed (capped or not)", r.unprocessedRows)
	add("every webhook is accepted", r.unfinishedJobs)
	add("the new-job pipeline completes for every job", r.pipelinePending)
	add("the new-job pipeline runs once a job", r.pipelineTwice)
	add("an after-hours make-safe job has its phone call and its SMS", r.phoneCallMissing)
	add("no other job has a phone call", r.phoneCallWrong)
	add("every job in Initial Contact Made has its triage invite sent", r.inviteMissing)
	add("one triage invite a status change", r.inviteTwice)
	add("every appointment has its order, at its date", r.orderMissing)
	add("one order an appointment", r.orderExtra)
	add("every date is planned after its last order write", r.dateUnplanned)
	add("no process exits on its own", r.exits)
	if r.noAttempts {
		add("no row counts an attempt: Prime's outage is a wait", r.attempted)
	}
	r.mailReport.violations(&out)
	return out
}

// check reads the database, the simulators, the gateway and the logs.
func check(ctx context.Context, st *stack, ext *externals, pr *primeSender, w *workload, mw *mailWorkload) (report, error) {
	var r report
	db, err := sql.Open("sqlite", "file:"+st.db+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		return r, err
	}
	defer db.Close()
	jobs := w.snapshot()
	for _, j := range jobs {
		if !j.done {
			r.unfinishedJobs = append(r.unfinishedJobs, fmt.Sprintf("job %s: %v", j.id, j.err))
		}
	}
	for _, step := range []func(context.Context, *sql.DB, *report) error{
		func(ctx context.Context, db *sql.DB, r *report) error {
			return checkRows(ctx, db, pr.acceptedRows(), r)
		},
		func(ctx context.Context, db *sql.DB, r *report) error { return checkPipeline(ctx, db, st, jobs, r) },
		func(ctx context.Context, db *sql.DB, r *report) error {
			return checkMakesafe(ctx, db, ext.sms.received(), jobs, r)
		},
		func(ctx context.Context, db *sql.DB, r *report) error {
			return checkInvites(ctx, db, ext.invites.received(), jobs, r)
		},
		func(ctx context.Context, db *sql.DB, r *report) error { return checkOrders(ctx, db, ext, jobs, r) },
		func(ctx context.Context, db *sql.DB, r *report) error {
			return checkMail(ctx, db, ext, mw, &r.mailReport)
		},
	} {
		if err := step(ctx, db, &r); err != nil {
			return r, err
		}
	}
	r.duplicated = len(r.pipelineTwice) + len(r.orderExtra)
	return r, nil
}

// checkRows: every accepted webhook's row holds its body; every row is
// processed, and none is at the attempt cap.
func checkRows(ctx context.Context, db *sql.DB, acc []accepted, r *report) error {
	type row struct {
		payload   string
		processed bool
		attempts  int
		status    string
	}
	rows := map[int64]row{}
	err := query(ctx, db, `SELECT id, payload, processedUTC IS NOT NULL, processAttempts, COALESCE(processStatus, '') FROM ethPrimeWebhookLog`,
		func(sc *sql.Rows) error {
			var id int64
			var x row
			if err := sc.Scan(&id, &x.payload, &x.processed, &x.attempts, &x.status); err != nil {
				return err
			}
			rows[id] = x
			return nil
		})
	if err != nil {
		return err
	}
	for _, a := range acc {
		if x, ok := rows[a.id]; !ok || x.payload != a.body {
			r.lost++
			r.lostRows = append(r.lostRows, fmt.Sprintf("row %d (%s)", a.id, a.action))
		}
	}
	ids := make([]int64, 0, len(rows))
	for id := range rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		x := rows[id]
		if x.attempts > 0 {
			r.attempted = append(r.attempted, fmt.Sprintf("row %d: %d attempts, %s", id, x.attempts, x.status))
		}
		if x.processed {
			continue
		}
		r.unprocessed++
		what := fmt.Sprintf("row %d after %d attempts", id, x.attempts)
		if x.attempts >= store.MaxAttempts {
			r.capped++
			what = fmt.Sprintf("row %d capped: %s", id, x.status)
		}
		r.unprocessedRows = append(r.unprocessedRows, what)
	}
	return nil
}

// checkPipeline: every job's pipeline completed (primeflowJobFirstSeen),
// and no newjob-pipeline process logged its completion twice for a job.
func checkPipeline(ctx context.Context, db *sql.DB, st *stack, jobs []jobState, r *report) error {
	completed := map[string]bool{}
	err := query(ctx, db, `SELECT jobId, pipelineCompletedUTC IS NOT NULL FROM primeflowJobFirstSeen`, func(sc *sql.Rows) error {
		var id string
		var done bool
		if err := sc.Scan(&id, &done); err != nil {
			return err
		}
		completed[id] = done
		return nil
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.id != "" && !completed[strings.ToLower(j.id)] {
			r.pipelinePending = append(r.pipelinePending, j.id)
		}
	}
	runs, err := logCounts(st.services["newjob-pipeline"].LogFile(), "new-job pipeline completed", "jobId")
	if err != nil {
		return err
	}
	for job, n := range runs {
		if n > 1 {
			r.pipelineTwice = append(r.pipelineTwice, fmt.Sprintf("job %s: %d times", job, n))
		}
	}
	slices.Sort(r.pipelineTwice)
	return nil
}

// checkMakesafe: each after-hours job has one phone call whose SMS was sent
// and reached the gateway; no other job has a call. SMS the gateway got more
// than once under one key are counted as resent.
func checkMakesafe(ctx context.Context, db *sql.DB, posts map[string]int, jobs []jobState, r *report) error {
	type call struct {
		smsID int64
		state string
	}
	calls := map[string]call{}
	err := query(ctx, db, `SELECT c.PrimeJobID, COALESCE(c.SmsQueueID, 0), COALESCE(s.State, '')
		FROM makesafePhoneCall c LEFT JOIN smsQueue s ON s.ID = c.SmsQueueID`, func(sc *sql.Rows) error {
		var job string
		var c call
		if err := sc.Scan(&job, &c.smsID, &c.state); err != nil {
			return err
		}
		calls[job] = c
		return nil
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.id == "" {
			continue
		}
		c, ok := calls[strings.ToLower(j.id)]
		switch {
		case !j.afterHours && ok:
			r.phoneCallWrong = append(r.phoneCallWrong, j.id)
		case !j.afterHours:
		case !ok:
			r.phoneCallMissing = append(r.phoneCallMissing, j.id+": no phone call")
		case c.state != string(store.SendSent):
			r.phoneCallMissing = append(r.phoneCallMissing, fmt.Sprintf("%s: SMS %d is %q", j.id, c.smsID, c.state))
		case posts[sms.Reference(c.smsID)] == 0:
			r.phoneCallMissing = append(r.phoneCallMissing, fmt.Sprintf("%s: SMS %d sent, but not to the gateway", j.id, c.smsID))
		}
	}
	for _, n := range posts {
		r.resent += n - 1
	}
	return nil
}

// checkInvites: each job whose webhooks were all accepted ended in the
// Initial-Contact-Made status, so it has a triage invite, Sent, which
// reached the endpoint (§3.1), and every invite of it did. An invite answers
// one arrival in the status (§10.4): a change-job-status event handled
// after the job's invite went (Prime's resend, or an earlier status change
// whose handling a kill held up) queues no second one, so a job has a later
// invite only after the mirror saw it leave the status of the one before. A
// post repeated under one key (a sender killed before it recorded the
// answer) is counted as resent, as the SMS are.
func checkInvites(ctx context.Context, db *sql.DB, posts map[string]int, jobs []jobState, r *report) error {
	type invite struct {
		id                 int64
		state              string
		queued, sent, left string // as the store writes them: they sort as times
	}
	invites := map[string][]invite{}
	err := query(ctx, db, `SELECT jobId, id, state, queuedUTC, COALESCE(sentUTC, ''), COALESCE(statusLeftUTC, '') FROM ethTriageInviteQueue ORDER BY jobId, id`, func(sc *sql.Rows) error {
		var job string
		var in invite
		if err := sc.Scan(&job, &in.id, &in.state, &in.queued, &in.sent, &in.left); err != nil {
			return err
		}
		invites[job] = append(invites[job], in)
		return nil
	})
	if err != nil {
		return err
	}
	for _, j := range jobs {
		if j.id == "" || !j.done {
			continue
		}
		ins := invites[strings.ToLower(j.id)]
		if len(ins) == 0 {
			r.inviteMissing = append(r.inviteMissing, j.id+": no invite")
			continue
		}
		for k, in := range ins {
			n := posts[jobmirror.InviteReference(in.id)]
			switch {
			case in.state != string(store.SendSent):
				r.inviteMissing = append(r.inviteMissing, fmt.Sprintf("%s: invite %d is %q", j.id, in.id, in.state))
			case n == 0:
				r.inviteMissing = append(r.inviteMissing, fmt.Sprintf("%s: invite %d sent, but not to the endpoint", j.id, in.id))
			case k > 0 && (ins[k-1].left == "" || in.queued < ins[k-1].left):
				r.inviteTwice = append(r.inviteTwice, fmt.Sprintf("%s: invite %d queued for the status change invite %d answers", j.id, in.id, ins[k-1].id))
			}
			r.resent += max(n-1, 0)
		}
	}
	return nil
}

// checkOrders: each appointment has one order in OptimoRoute at its
// current date; OptimoRoute holds no other; each date with orders had a
// start_planning after its last order write and is planned in
// optimoRoutePlan.
func checkOrders(ctx context.Context, db *sql.DB, ext *externals, jobs []jobState, r *report) error {
	want := map[string]string{} // order (the appointment) → date
	for _, j := range jobs {
		if j.appointment != "" {
			want[j.appointment] = j.date
		}
	}
	dates := map[string]bool{}
	for _, no := range ext.optimo.OrderNos("") {
		raw, _ := ext.optimo.Order(no)
		var o struct {
			Date string `json:"date"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return fmt.Errorf("order %s: %w", no, err)
		}
		dates[o.Date] = true
		date, ok := want[no]
		switch {
		case !ok:
			r.orderExtra = append(r.orderExtra, no)
		case date != o.Date:
			r.orderMissing = append(r.orderMissing, fmt.Sprintf("%s at %s, not %s", no, o.Date, date))
		}
		delete(want, no)
	}
	for no, date := range want {
		r.orderMissing = append(r.orderMissing, fmt.Sprintf("%s (%s): no order", no, date))
	}
	status := map[string]string{}
	err := query(ctx, db, `SELECT PlanDate, PlanStatus FROM optimoRoutePlan`, func(sc *sql.Rows) error {
		var d, s string
		if err := sc.Scan(&d, &s); err != nil {
			return err
		}
		status[d] = s
		return nil
	})
	if err != nil {
		return err
	}
	onDate := map[string]string{}
	for d := range dates {
		for _, no := range ext.optimo.OrderNos(d) {
			onDate[no] = d
		}
	}
	lastWrite, lastPlan := map[string]int{}, map[string]int{}
	for _, ev := range ext.optimo.Events() {
		if ev.Code != "" {
			continue
		}
		switch ev.Operation {
		case optimoroute.OpCreateOrder, optimoroute.OpCreateOrUpdateOrders:
			for _, no := range ev.OrderNos {
				if d, ok := onDate[no]; ok {
					lastWrite[d] = max(lastWrite[d], ev.Seq)
				}
			}
		case optimoroute.OpStartPlanning:
			lastPlan[ev.Date] = max(lastPlan[ev.Date], ev.Seq)
		}
	}
	for d := range dates {
		s := status[d]
		switch {
		case lastPlan[d] < lastWrite[d]:
			r.dateUnplanned = append(r.dateUnplanned, fmt.Sprintf("%s: last order write #%d, last start_planning #%d (%s)", d, lastWrite[d], lastPlan[d], s))
		case s != store.PlanPlanningCompleted && s != store.PlanRoutesCompleted:
			r.dateUnplanned = append(r.dateUnplanned, fmt.Sprintf("%s is %q", d, s))
		}
	}
	slices.Sort(r.orderMissing)
	slices.Sort(r.dateUnplanned)
	return nil
}

func query(ctx context.Context, db *sql.DB, q string, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// logCounts counts the JSON log lines of file whose msg is msg, by the
// value of key.
func logCounts(file, msg, key string) (map[string]int, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), msg) {
			continue
		}
		var rec map[string]any
		if json.Unmarshal(line, &rec) != nil || rec["msg"] != msg {
			continue
		}
		if v, ok := rec[key].(string); ok {
			counts[v]++
		}
	}
	return counts, sc.Err()
}
