package mailintake_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/graphsim"
	mailintake "github.com/ethosbuilding/primeflow/services/mail-intake"
	"github.com/matryer/is"
)

// Wrong configuration refuses to start, naming the variable: one not set,
// and a folder the mailbox does not have (resolved once, at start).
func TestMainRefusesWrongConfiguration(t *testing.T) {
	e := start(t)
	graphVars := func(extra map[string]string) map[string]string {
		g := e.graph.ClientConfig(e.graphURL)
		vars := e.MainVars(t.TempDir(), map[string]string{
			"GRAPH_TENANT_ID": g.TenantID, "GRAPH_CLIENT_ID": g.ClientID, "GRAPH_CLIENT_SECRET": g.ClientSecret,
			"GRAPH_API_URL": g.APIURL, "GRAPH_TOKEN_URL": g.TokenURL,
			"MAIL_USER": e.graph.User(), "MAIL_FOLDER": inFolder, "MAIL_PROCESSED_FOLDER": processedFolder, "MAIL_FAILED_FOLDER": failedFolder,
			"MAIL_ALLOWED_SENDERS": graphsim.DefaultFrom,
		})
		for k, v := range extra {
			vars[k] = v
		}
		return vars
	}
	for _, tc := range []struct {
		name  string
		vars  map[string]string
		names []string
	}{
		{"no mailbox", map[string]string{"MAIL_USER": "", "MAIL_FAILED_FOLDER": ""}, []string{"MAIL_USER", "MAIL_FAILED_FOLDER"}},
		{"no app registration", map[string]string{"GRAPH_CLIENT_SECRET": ""}, []string{"GRAPH_CLIENT_SECRET"}},
		{"a folder that is not there", map[string]string{"MAIL_PROCESSED_FOLDER": "Inbox/Prime Jobs/Done"}, []string{"MAIL_PROCESSED_FOLDER", `"Done"`}},
		{"the same folder twice", map[string]string{"MAIL_FAILED_FOLDER": "inbox/prime jobs/processed"}, []string{"MAIL_FAILED_FOLDER", "MAIL_PROCESSED_FOLDER"}},
		{"a wrong secret", map[string]string{"GRAPH_CLIENT_SECRET": "wrong"}, []string{"GRAPH_", "invalid_client"}},
		{"no attempts", map[string]string{"MAIL_MAX_ATTEMPTS": "0"}, []string{"MAIL_MAX_ATTEMPTS"}},
		{"no allowed senders", map[string]string{"MAIL_ALLOWED_SENDERS": ""}, []string{"MAIL_ALLOWED_SENDERS"}},
		{"a sender that is no address", map[string]string{"MAIL_ALLOWED_SENDERS": "noreply@primeeco.tech,primeeco"}, []string{"MAIL_ALLOWED_SENDERS", `"primeeco"`}},
		{"a body cap too small", map[string]string{"MAIL_MAX_BODY_BYTES": "100"}, []string{"MAIL_MAX_BODY_BYTES"}},
		{"no wait backoff", map[string]string{"MAIL_WAIT_BACKOFF": "0s"}, []string{"MAIL_WAIT_BACKOFF"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			vars := graphVars(tc.vars)
			err := mailintake.Main(context.Background(), func(k string) string { return vars[k] }, &flowtest.Buffer{})
			is.True(err != nil) // refused
			for _, n := range tc.names {
				if !strings.Contains(err.Error(), n) {
					t.Errorf("%v does not name %s", err, n)
				}
			}
			is.True(!strings.Contains(err.Error(), "wrong")) // never the secret
		})
	}
}
