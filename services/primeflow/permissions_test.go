package primeflow_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/ethosbuilding/primeflow/pkg/optimosim"
	"github.com/ethosbuilding/primeflow/pkg/primesim"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	newjobpipeline "github.com/ethosbuilding/primeflow/services/newjob-pipeline"
	optimocreate "github.com/ethosbuilding/primeflow/services/optimo-create"
	optimoplan "github.com/ethosbuilding/primeflow/services/optimo-plan"
	"github.com/ethosbuilding/primeflow/services/resolver"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
)

// TestEachServiceAsItsOwnNATSUser runs every service through its own Main,
// each logged in as its own NATS user of compose/nats/users.conf (pkg/natsauth),
// against a nats-server that has only those users, and drives the tour of
// `make run` through them: a job, an appointment planned in OptimoRoute, an
// after-hours Make Safe whose SMS is sent, the appointment sweep asked for
// as optimo-create asks it. Every service is allowed all it does — no
// permissions violation in any log — and the pipeline works end to end.
func TestEachServiceAsItsOwnNATSUser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every service: not with -short")
	}
	is := is.New(t)
	ns := natstest.ServerWithUsers(t)
	natstest.ApplyAsOperators(t, ns) // the operators' step, before any service

	fx, err := primesim.DefaultFixture()
	is.NoErr(err)
	sim, err := primesim.New(primesim.Options{Fixture: fx, ControlToken: simToken})
	is.NoErr(err)
	primeSrv := httptest.NewServer(sim)
	t.Cleanup(primeSrv.Close)
	mailbox := graphsim.New(graphsim.Options{})
	mailboxSrv := httptest.NewServer(mailbox)
	t.Cleanup(mailboxSrv.Close)
	gc := mailbox.ClientConfig(mailboxSrv.URL)
	optimo := optimosim.New(optimosim.Options{})
	optimoSrv := httptest.NewServer(optimo)
	t.Cleanup(optimoSrv.Close)
	var smsSent atomic.Int64
	smsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		smsSent.Add(1)
	}))
	t.Cleanup(smsSrv.Close)

	dir := t.TempDir()
	pc := sim.ClientConfig(primeSrv.URL)
	common := map[string]string{
		"NATS_URL":              ns.ClientURL(),
		"DATABASE_URL":          "sqlite:" + filepath.Join(dir, "primeflow.db"),
		"HTTP_ADDR":             "127.0.0.1:0",
		"ADMIN_USER":            admin,
		"ADMIN_PASSWORD":        password,
		"PRIME_API_URL":         pc.URL,
		"PRIME_CLIENT_ID":       pc.ClientID,
		"PRIME_CLIENT_SECRET":   pc.ClientSecret,
		"PRIME_USERNAME":        pc.Username,
		"PRIME_PASSWORD":        pc.Password,
		"PRIME_RATE_PER_MINUTE": "100000",
		"PRIME_RATE_BURST":      "100",
		"OPTIMOROUTE_API_URL":   optimoSrv.URL,
		"OPTIMOROUTE_API_KEY":   optimosim.DefaultAPIKey,
	}
	ingestAddr := flowtest.FreeAddr(t)
	type main func(ctx context.Context, getenv func(string) string, stderr io.Writer) error
	logs := map[string]*flowtest.Buffer{}
	for _, svc := range []struct {
		role  events.Role
		main  main
		extra map[string]string
	}{
		// Ingest first: the others bind ports of the kernel's choosing, one
		// of which could be ingestAddr until ingest holds it.
		{events.RoleIngest, ingest.Main, map[string]string{"HTTP_ADDR": ingestAddr, "PRIME_WEBHOOK_API_KEY": apiKey}},
		{events.RoleJobMirror, jobmirror.Main, map[string]string{"TRIAGE_INITIAL_CONTACT_MADE_STATUS_ID": "3c1f4e2a-7b6d-4c8e-9a0f-1d2e3f4a5b6c",
			"TRIAGE_INVITE_SEND_URL": smsSrv.URL}},
		{events.RoleChildMirror, childmirror.Main, map[string]string{"AI_SUMMARY_NUDGE_URL": childmirror.NudgeOff}},
		{events.RoleNewJobPipeline, newjobpipeline.Main, nil},
		{events.RoleMakesafe, makesafe.Main, map[string]string{"MAKESAFE_SMS_TO": "+61400000000", "SMS_SEND_URL": smsSrv.URL}},
		{events.RoleOptimoCreate, optimocreate.Main, nil},
		{events.RoleOptimoPlan, optimoplan.Main, nil},
		{events.RoleResolver, resolver.Main, nil},
		{events.RoleMailIntake, mailintake.Main, map[string]string{"GRAPH_TENANT_ID": gc.TenantID, "GRAPH_CLIENT_ID": gc.ClientID,
			"GRAPH_CLIENT_SECRET": gc.ClientSecret, "GRAPH_API_URL": gc.APIURL, "GRAPH_TOKEN_URL": gc.TokenURL, "MAIL_USER": mailbox.User(),
			"MAIL_FOLDER": graphsim.DefaultFolders[0], "MAIL_PROCESSED_FOLDER": graphsim.DefaultFolders[1],
			"MAIL_FAILED_FOLDER": graphsim.DefaultFolders[2], "MAIL_POLL_INTERVAL": "100ms", "MAIL_ALLOWED_SENDERS": graphsim.DefaultFrom}},
	} {
		env := maps.Clone(common)
		env["NATS_USER"], env["NATS_PASSWORD"] = svc.role.Name, svc.role.Name // natstest's passwords
		maps.Copy(env, svc.extra)
		var stderr flowtest.Buffer
		logs[svc.role.Name] = &stderr
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- svc.main(ctx, func(k string) string { return env[k] }, &stderr) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s stopped with: %v", svc.role.Name, err)
			}
			if t.Failed() {
				t.Logf("%s logs:\n%s", svc.role.Name, stderr.String())
			}
		})
		flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, svc.role.Name+" started", func() bool {
			return strings.Contains(stderr.String(), "started")
		})
	}

	fire := func(action, id string) {
		post(t, primeSrv.URL+"/_sim/webhooks", fmt.Sprintf(`{"url":"http://%s/api/prime/webhook","apiKey":"%s","action":%q,"id":%q}`, ingestAddr, apiKey, action, id))
	}
	fire("change-job-status", fixtureJob)
	tomorrow := time.Now().UTC().Add(24 * time.Hour).Format(time.DateOnly)
	appt := post(t, primeSrv.URL+"/_sim/appointments", fmt.Sprintf(`{"jobId":%q,"attributes":{"startDate":"%s 01:00:00","endDate":"%s 02:00:00"}}`, fixtureJob, tomorrow, tomorrow))
	fire("create-appointment", appt["id"].(string))
	fire("create-allocation", fixtureAllocation)

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "primeflow.db"))
	is.NoErr(err)
	defer st.Close()
	flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, "three webhooks processed", func() bool {
		n, err := st.CountWebhookLog(context.Background(), store.LogFilter{State: store.Processed})
		return err == nil && n == 3
	})
	flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, "planning started in OptimoRoute", func() bool {
		return optimo.Stats().Calls["start_planning"] > 0
	})
	flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, "the make-safe SMS sent", func() bool { return smsSent.Load() > 0 })

	// optimo-create asks child-mirror for the sweep (§8.1) in the weekday
	// band only: asked here as its user would, from its own inbox.
	nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo(events.RoleOptimoCreate.Name, events.RoleOptimoCreate.Name),
		nats.CustomInboxPrefix(events.RoleOptimoCreate.InboxPrefix()))
	is.NoErr(err)
	defer nc.Close()
	from := time.Now().UTC().Truncate(24 * time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sweep, err := events.Request[events.SweepReply](ctx, nc, events.SubjectSweepAppointments,
		events.SweepRequest{FromUTC: from, ToUTC: from.Add(8 * 24 * time.Hour), Source: "test"})
	is.NoErr(err)             // child-mirror answers optimo-create
	is.Equal(sweep.Error, "") // having swept

	// A new-job email through the mail intake, which asks job-mirror as its user.
	_, err = mailbox.Deliver(graphsim.NewMessage{Subject: "New Job J012346", Body: `{ "JobID": '2410965', "JobNumber": 'J012346' }`, ContentType: "text"})
	is.NoErr(err)
	flowtest.Poll(t, 60*time.Second, 20*time.Millisecond, "the emailed job seen first by the email", func() bool {
		f, found, err := st.GetFirstSeen(context.Background(), fixtureJob2)
		return err == nil && found && f.Via == store.ViaEmail
	})

	for name, l := range logs {
		if strings.Contains(strings.ToLower(l.String()), "permissions violation") {
			t.Errorf("%s was refused something it does: its role in pkg/events lacks it\n%s", name, l.String())
		}
	}
}
