package primectl_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

// Jobs of the comparison: A agrees, B and E are only live, C only
// primeflow's, D is newer in primeflow, F is inside business hours.
const (
	cmpJobA = "aaaaaaaa-0000-4000-8000-000000000001"
	cmpJobB = "bbbbbbbb-0000-4000-8000-000000000002"
	cmpJobC = "cccccccc-0000-4000-8000-000000000003"
	cmpJobD = "dddddddd-0000-4000-8000-000000000004"
	cmpJobE = "eeeeeeee-0000-4000-8000-000000000005"
	cmpJobF = "ffffffff-0000-4000-8000-000000000006"
)

// twoDatabases makes primeflow's database (a shadow run's) and a live one
// that differ in known ways, and returns their paths.
func twoDatabases(t *testing.T) (ours, live string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	ours, live = filepath.Join(dir, "primeflow.db"), filepath.Join(dir, "live.db")
	open := func(path string) store.Store {
		s, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	p, l := open(ours), open(live)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	job := func(s store.Store, id, number string, version int64, created time.Time) {
		t.Helper()
		_, err := s.UpsertJob(ctx, store.Job{JobID: id, JobNumber: number, Version: version, CreatedAt: created})
		must(err)
	}
	saturdayNight := time.Date(2026, 10, 3, 12, 14, 33, 0, time.UTC) // 22:14 in Melbourne
	tuesdayMorning := time.Date(2026, 10, 6, 0, 0, 0, 0, time.UTC)   // 11:00 in Melbourne (daylight saving)
	for _, s := range []store.Store{p, l} {
		job(s, cmpJobA, "J1", 1, saturdayNight)
		job(s, cmpJobF, "J6", 1, tuesdayMorning)
	}
	job(l, cmpJobB, "J2", 1, tuesdayMorning)
	job(p, cmpJobC, "J3", 1, tuesdayMorning)
	job(p, cmpJobD, "J4", 3, tuesdayMorning)
	job(l, cmpJobD, "J4", 2, tuesdayMorning)
	job(l, cmpJobE, "J5", 1, tuesdayMorning)
	_, err := p.InsertWebhookLog(ctx, store.NewWebhookLogRow{EventAction: "change-job-status", JobID: cmpJobE, Payload: "{}"})
	must(err)
	job(p, "99999999-0000-4000-8000-000000000009", "J9", 1, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)) // before the period: not compared

	// F has a Make Safe on both sides; A's reached primeflow only, which
	// raised its call.
	for _, s := range []store.Store{p, l} {
		_, err = s.SaveAllocation(ctx, store.Allocation{AllocationID: "f1f1f1f1-0000-4000-8000-000000000006", JobID: cmpJobF, AllocationType: "make safe", Version: 1})
		must(err)
	}
	_, err = p.SaveAllocation(ctx, store.Allocation{AllocationID: "a1a1a1a1-0000-4000-8000-000000000001", JobID: cmpJobA, AllocationType: "Make Safe", Version: 1})
	must(err)
	out, err := p.UpsertMakeSafePhoneCallFromJob(ctx, store.MakesafeDetection{JobID: cmpJobA, SMSRecipient: "+61400000000"})
	must(err)
	if !out.Raised {
		t.Fatal("no call raised for job A")
	}
	// The live system raised one for F, which primeflow reads as created in
	// business hours.
	db, err := sql.Open("sqlite", live)
	must(err)
	defer db.Close()
	_, err = db.ExecContext(ctx, `INSERT INTO makesafePhoneCall (PrimeJobID, RaisedUTC, State) VALUES (?, '2026-10-06 00:01:00.000', 'Raised')`, cmpJobF)
	must(err)

	// Orders: O1 agrees, O2 was refused by OptimoRoute in primeflow's run,
	// O3 is a day later live.
	order := func(s store.Store, no, date string) {
		t.Helper()
		must(s.UpsertOrder(ctx, store.OptimoOrder{OrderNo: no, AppointmentID: no, JobID: cmpJobA, Version: 1, OrderDate: date, State: store.OrderActive}))
	}
	const o1, o2, o3 = "01010101-0000-4000-8000-000000000001", "02020202-0000-4000-8000-000000000002", "03030303-0000-4000-8000-000000000003"
	for _, s := range []store.Store{p, l} {
		order(s, o1, "2026-10-04")
	}
	order(l, o2, "2026-10-07")
	must(p.RecordOrderFailure(ctx, store.OptimoOrder{OrderNo: o2, AppointmentID: o2, Version: 1, ErrorText: "ERR_LOC_GEOCODING: no such address"}))
	order(p, o3, "2026-10-05")
	order(l, o3, "2026-10-06")
	_, err = p.SetPlanStatus(ctx, store.PlanStatusWrite{PlanDate: "2026-10-04", Status: store.PlanRoutesCompleted})
	must(err)

	// The live database has no appointments table of primeflow's kind.
	_, err = db.ExecContext(ctx, `DROP TABLE primeAppointments`)
	must(err)
	return ours, live
}

func TestCompare(t *testing.T) {
	is := is.New(t)
	ours, live := twoDatabases(t)
	w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours}}
	out, _, err := w.run("", "compare", "--live", "sqlite:"+live, "--since", "2026-10-01", "--until", "2026-10-08", "--days-ahead", "0")
	is.True(errors.Is(err, primectl.ErrDifferences)) // they differ
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"jobs created in the period (primeJobs): 4 in primeflow, 5 live, 4 differences",
		"only live " + cmpJobB + " jobNumber J2, version 1 why: no webhook for this job reached primeflow",
		"only primeflow " + cmpJobC + " jobNumber J3, version 1 why: the live system has not mirrored it",
		"differs " + cmpJobD + " version 3 in primeflow, 2 live why: primeflow holds the later version",
		"only live " + cmpJobE + " jobNumber J5, version 1 why: primeflow has 1 webhook rows for it but no mirror row",
		"not compared: the live database has no table primeAppointments",
		"their allocations (primeAllocations): 2 in primeflow, 1 live, 1 differences",
		"make-safe calls raised for them (makesafePhoneCall): 1 in primeflow, 1 live, 2 differences",
		"only primeflow " + cmpJobA + " why: primeflow raised it: the job was created outside business hours (Sat 2026-10-03 22:14 Melbourne) and has a Make Safe allocation; the live mirror holds no Make Safe allocation for the job; the live system raised none",
		"only live " + cmpJobF + " why: primeflow raised none: the job was created inside business hours (Tue 2026-10-06 11:00 Melbourne)",
		"orders of the period's days (optimoRouteOrder): 2 in primeflow, 3 live, 2 differences",
		"only live 02020202-0000-4000-8000-000000000002 orderDate 2026-10-07, state Active why: primeflow recorded it as not sent: ERR_LOC_GEOCODING: no such address",
		"differs 03030303-0000-4000-8000-000000000003 orderDate 2026-10-05 in primeflow, 2026-10-06 live why: the order is on another day",
		"differs 2026-10-04 PlanStatus RoutesCompleted in primeflow, NotPlanned live",
		"only primeflow 2026-10-05 PlanStatus NotPlanned why: the live system has no plan row for the day",
		"only live 2026-10-06 PlanStatus NotPlanned why: primeflow wrote no order for the day",
		"only live 2026-10-07 PlanStatus NotPlanned",
		"13 differences",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the comparison lacks %q:\n%s", want, out)
		}
	}
	is.True(!strings.Contains(flat, cmpJobF+" jobNumber")) // F's job agrees
	is.True(!strings.Contains(out, "f1f1f1f1"))            // and so does its allocation
	is.True(!strings.Contains(out, "99999999"))            // a job before the period is not compared
	is.True(!strings.Contains(out, "01010101"))            // nor is an order that agrees
}

func TestCompareAgreeing(t *testing.T) {
	is := is.New(t)
	ours, _ := twoDatabases(t)
	w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours}}
	out, _, err := w.run("", "compare", "--live", "sqlite:"+ours, "--since", "2026-10-01", "--until", "2026-10-08")
	is.NoErr(err)                                     // a database agrees with itself
	is.True(strings.Contains(out, "\n0 differences")) // and says so
}

func TestCompareUsage(t *testing.T) {
	ours, _ := twoDatabases(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no live database", []string{"compare"}},
		{"the period backwards", []string{"compare", "--live", "sqlite:" + ours, "--since", "2026-10-08", "--until", "2026-10-01"}},
		{"no such file", []string{"compare", "--live", "sqlite:" + ours + ".missing"}},
		{"not a database URL", []string{"compare", "--live", "mysql://x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours}}
			_, _, err := w.run("", tc.args...)
			is.True(err != nil)                               // refused
			is.True(!errors.Is(err, primectl.ErrDifferences)) // before comparing anything
		})
	}
}

// The live database may come from the environment or a file, not only
// the command line, where ps shows any user of the host its password
// (issue 27 §8): LIVE_DATABASE_URL or LIVE_DATABASE_URL_FILE, and
// LIVE_DATABASE_PASSWORD(_FILE) for the password of its user.
func TestCompareLiveFromTheEnvironment(t *testing.T) {
	ours, live := twoDatabases(t)
	urlFile := filepath.Join(t.TempDir(), "live-url")
	if err := os.WriteFile(urlFile, []byte("sqlite:"+live+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	period := []string{"compare", "--since", "2026-10-01", "--until", "2026-10-08", "--days-ahead", "0"}
	for name, env := range map[string]map[string]string{
		"LIVE_DATABASE_URL":      {"LIVE_DATABASE_URL": "sqlite:" + live},
		"LIVE_DATABASE_URL_FILE": {"LIVE_DATABASE_URL_FILE": urlFile},
	} {
		t.Run(name, func(t *testing.T) {
			is := is.New(t)
			env["DATABASE_URL"] = "sqlite:" + ours
			w := &world{t: t, env: env}
			out, _, err := w.run("", period...)
			is.True(errors.Is(err, primectl.ErrDifferences)) // compared
			is.True(strings.Contains(out, "13 differences")) // as with --live
		})
	}

	t.Run("both ways at once", func(t *testing.T) {
		is := is.New(t)
		w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours, "LIVE_DATABASE_URL": "sqlite:" + live}}
		_, _, err := w.run("", append(period, "--live", "sqlite:"+live)...)
		is.True(err != nil && strings.Contains(err.Error(), "both set")) // refused
	})

	t.Run("a password for SQLite", func(t *testing.T) {
		is := is.New(t)
		w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours, "LIVE_DATABASE_URL": "sqlite:" + live, "LIVE_DATABASE_PASSWORD": "pw"}}
		_, _, err := w.run("", period...)
		is.True(err != nil && strings.Contains(err.Error(), "LIVE_DATABASE_PASSWORD") && strings.Contains(err.Error(), "is set but LIVE_DATABASE_URL is not a sqlserver:// URL")) // refused, naming both
	})

	t.Run("a password on the command line", func(t *testing.T) {
		is := is.New(t)
		w := &world{t: t, env: map[string]string{"DATABASE_URL": "sqlite:" + ours}}
		_, stderr, err := w.run("", append(period, "--live", "sqlserver://reader:s3cret@127.0.0.1:1?database=live&dial+timeout=1")...)
		is.True(err != nil)                                              // no server there
		is.True(strings.Contains(stderr, "LIVE_DATABASE_PASSWORD_FILE")) // told where the password belongs
		is.True(!strings.Contains(stderr+err.Error(), "s3cret"))         // never echoing it
	})
}
