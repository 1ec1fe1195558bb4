package makesafe_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/database"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/services/makesafe"
	"github.com/matryer/is"
)

// Main runs makesafe as its own process: configuration from the
// environment, its own Prime client, the HTTP SMS sender.
func TestMainRunsTheServiceFromTheEnvironment(t *testing.T) {
	is := is.New(t)
	env := flowtest.New(t, flowtest.Options{})
	ep := &smsEndpoint{}
	srv := httptest.NewServer(ep)
	defer srv.Close()
	dataDir := t.TempDir()
	prime := env.Sim.ClientConfig(env.SimURL)
	vars := env.MainVars(dataDir, map[string]string{
		"MAKESAFE_SMS_TO": onCall,
		"SMS_SEND_URL":    srv.URL + "/webhook/sms?key=k3y",
		"SMS_SEND_AUTH":   "Bearer s3cret",
	})

	for _, missing := range []string{"MAKESAFE_SMS_TO", "SMS_SEND_URL"} {
		t.Run("without "+missing, func(t *testing.T) {
			is := is.New(t)
			err := makesafe.Main(context.Background(), func(k string) string {
				if k == missing {
					return ""
				}
				return vars[k]
			}, &bytes.Buffer{})
			is.True(err != nil)                             // refuses to start
			is.True(strings.Contains(err.Error(), missing)) // naming what is missing
		})
	}

	// The store Main opens, opened here too to mirror a job as job-mirror would.
	st, err := sqlite.Open(context.Background(), filepath.Join(dataDir, database.DefaultFile))
	is.NoErr(err)
	defer st.Close()
	j := env.Sim.NewJob()
	_, err = st.UpsertJob(context.Background(), store.Job{JobID: strings.ToLower(j.ID), JobNumber: j.JobNumber, CreatedAt: saturdayNight, Version: 1})
	is.NoErr(err)
	_, err = st.SaveAllocation(context.Background(), store.Allocation{AllocationID: "a1000000-0000-4000-8000-0000000000aa",
		JobID: strings.ToLower(j.ID), AllocationType: "Make Safe", Version: 1})
	is.NoErr(err)

	logs, stop := env.RunMain(makesafe.Main, vars)
	r := &rig{Env: env}
	r.detect(j.ID, false, "main")
	flowtest.Eventually(t, "the SMS is posted", func() bool { return len(ep.accepted()) == 1 })
	is.True(strings.Contains(ep.accepted()[0].Message, j.JobNumber)) // the job's SMS
	stop()                                                           // Main stops cleanly when its context ends
	for _, secret := range []string{"k3y", "s3cret", prime.Password, prime.ClientSecret} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the logs show %q", secret)
		}
	}
}

// A shadow run's makesafe needs no SMS_SEND_URL: SEND_DRY_RUN records the
// SMS instead, and says so at start.
func TestMainWithSendDryRun(t *testing.T) {
	is := is.New(t)
	env := flowtest.New(t, flowtest.Options{})
	vars := env.MainVars(t.TempDir(), map[string]string{"MAKESAFE_SMS_TO": onCall, "SEND_DRY_RUN": "true", "DRY_RUN_DIR": t.TempDir()})
	logs, stop := env.RunMain(makesafe.Main, vars)
	flowtest.Eventually(t, "started", func() bool { return strings.Contains(logs.String(), "started") })
	stop()
	is.True(strings.Contains(logs.String(), "SEND_DRY_RUN is on: sms is recorded, NOT SENT")) // loudly
}
