package status

import (
	"bytes"
	"context"
	_ "embed"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/version"
)

//go:embed page.html
var pageHTML string

var page = template.Must(template.New("status").Funcs(template.FuncMap{
	"when": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"num": func(f *float64) string {
		if f == nil {
			return "not known yet"
		}
		return strconv.FormatFloat(*f, 'f', -1, 64)
	},
	"maxAttempts": func() int { return store.MaxAttempts },
}).Parse(pageHTML))

// Page serves the status page: a read-only view of gather's Report, for a
// person with a browser (it goes behind Basic auth, as the admin routes
// do). It refreshes itself every 15 seconds. HEAD and GET only.
func Page(gather func(context.Context) (Report, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep, err := gather(r.Context())
		if err != nil {
			http.Error(w, "status: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		var b bytes.Buffer
		if err := page.Execute(&b, struct {
			Report
			Version string
		}{rep, version.String("primeflow")}); err != nil {
			http.Error(w, "status: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Write(b.Bytes())
	})
}
