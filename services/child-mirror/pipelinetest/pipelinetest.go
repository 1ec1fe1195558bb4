// Package pipelinetest starts the front of the pipeline for the tests and
// benchmarks that drive it the way Prime does, with webhooks over HTTP:
// ingest, the resolver, job-mirror and child-mirror on a flowtest.Env.
package pipelinetest

import (
	"net/http/httptest"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/service"
	childmirror "github.com/ethosbuilding/primeflow/services/child-mirror"
	"github.com/ethosbuilding/primeflow/services/ingest"
	jobmirror "github.com/ethosbuilding/primeflow/services/job-mirror"
	"github.com/ethosbuilding/primeflow/services/resolver"
)

// StartFront runs ingest (with its default configuration and apiKey as the
// webhook key, served over HTTP), the resolver, job-mirror and child-mirror
// on env until the test ends, and returns the webhook's URL.
func StartFront(env *flowtest.Env, apiKey string) (webhookURL string) {
	tb := env.T
	tb.Helper()
	d := env.Deps
	icfg := ingest.DefaultConfig()
	icfg.APIKey = apiKey
	r := service.NewRouter(opshttp.Credentials{})
	in, err := ingest.New(icfg, d, r)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler(d))
	tb.Cleanup(srv.Close)
	env.Run("ingest", in)
	rc := resolver.DefaultConfig()
	rc.Lanes, rc.LaneWait, rc.Backoff = 16, 20*time.Second, retry.Backoff{100 * time.Millisecond}
	res, err := resolver.New(rc, d, env.Prime)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("resolver", res)
	mc := jobmirror.DefaultConfig()
	mc.Workers, mc.EnsureTimeout = 4, 10*time.Second
	mc.JobsSweepEvery = jobmirror.SweepOff // no jobs-by-date sweep behind the test's back
	jm, err := jobmirror.New(mc, d, env.Prime, jobmirror.LogInvites{Log: d.Log})
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("job-mirror", jm)
	cc := childmirror.DefaultConfig()
	cc.Workers, cc.EnsureTimeout, cc.ContactSyncTimeout, cc.AISummaryNudgeTimeout = 4, 10*time.Second, 10*time.Second, time.Second
	cm, err := childmirror.New(cc, d, env.Prime)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("child-mirror", cm)
	return srv.URL + ingest.WebhookPath
}
