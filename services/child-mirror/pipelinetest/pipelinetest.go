// Package pipelinetest starts the front of the pipeline for the tests and
// benchmarks that drive it the way Prime does, with webhooks over HTTP:
// ingest, the resolver, job-mirror and child-mirror on a flowtest.Env.
package pipelinetest

import (
	"net/http/httptest"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/opshttp"
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
	var icfg ingest.Config
	if err := config.Parse(func(k string) string {
		if k == "PRIME_WEBHOOK_API_KEY" {
			return apiKey
		}
		return ""
	}, &icfg); err != nil {
		tb.Fatal(err)
	}
	r := service.NewRouter(opshttp.Credentials{})
	in, err := ingest.New(icfg, d, r)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(r.Handler(d))
	tb.Cleanup(srv.Close)
	env.Run("ingest", in)
	res, err := resolver.New(resolver.Config{Lanes: 16, LaneWait: 20 * time.Second, Backoff: []time.Duration{100 * time.Millisecond}}, d, env.Prime)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("resolver", res)
	jm, err := jobmirror.New(jobmirror.Config{Workers: 4, EnsureTimeout: 10 * time.Second}, d, env.Prime)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("job-mirror", jm)
	cm, err := childmirror.New(childmirror.Config{Workers: 4, EnsureTimeout: 10 * time.Second, ContactSyncTimeout: 10 * time.Second,
		AISummaryNudgeTimeout: time.Second}, d, env.Prime)
	if err != nil {
		tb.Fatal(err)
	}
	env.Run("child-mirror", cm)
	return srv.URL + ingest.WebhookPath
}
