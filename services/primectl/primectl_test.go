package primectl_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/flowtest"
	"github.com/ethosbuilding/primeflow/pkg/store"
	"github.com/ethosbuilding/primeflow/pkg/store/sqlite"
	"github.com/ethosbuilding/primeflow/pkg/version"
	"github.com/ethosbuilding/primeflow/services/primectl"
	"github.com/matryer/is"
)

const (
	jobA = "0b6a3c52-3e0f-4a57-9a39-2f1d7c1e4b10"
	jobB = "7d3f8e21-9c4b-4d1e-8f6a-5b2c9e0a1d34"
)

// world is a database with a known log, and primectl pointed at it.
type world struct {
	t     *testing.T
	path  string
	env   map[string]string
	ids   map[string]int64 // rows by name
	store store.Store
}

// emptyWorld is an empty database, and primectl pointed at it.
func emptyWorld(t *testing.T) *world {
	t.Helper()
	path := filepath.Join(t.TempDir(), "primeflow.db")
	st, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &world{t: t, path: path, store: st, ids: map[string]int64{},
		env: map[string]string{"DATABASE_URL": "sqlite:" + path}}
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := emptyWorld(t)
	st := w.store
	day := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	for i, r := range []struct {
		name, action, job string
		fail              int
		processed         bool
	}{
		{"queued", "change-job-status", jobA, 1, false},
		{"capped", "create-appointment", jobB, store.MaxAttempts, false},
		{"done", "change-job-status", jobA, 0, true},
		{"other", "create-estimate", "", 0, false},
	} {
		id, err := st.InsertWebhookLog(ctx, store.NewWebhookLogRow{
			ReceivedUTC: day.Add(time.Duration(i) * time.Hour), EventAction: r.action, JobID: r.job,
			Payload:         `{"eventAction":"` + r.action + `","jobId":259047}`,
			Headers:         `{"API-Key":["(redacted)"]}`,
			IsAuthenticated: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		for range r.fail {
			if _, err := st.IncrementWebhookLogAttempt(ctx, id, "", "payload fault UnknownIdentifier (x): no such job"); err != nil {
				t.Fatal(err)
			}
		}
		if r.processed {
			if err := st.SetWebhookLogProcessed(ctx, id, "", "Processed"); err != nil {
				t.Fatal(err)
			}
		}
		w.ids[r.name] = id
	}
	return w
}

// run runs primectl with stdin and returns what it wrote.
func (w *world) run(stdin string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = primectl.Run(context.Background(), args, func(k string) string { return w.env[k] }, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), err
}

func (w *world) row(name string) store.WebhookLogRow {
	w.t.Helper()
	r, err := w.store.GetWebhookLog(context.Background(), w.ids[name])
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

// listed returns the ids in the first column of a list's table.
func listed(out string) []string {
	var ids []string
	for _, line := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] != "" && f[0][0] >= '0' && f[0][0] <= '9' && !strings.Contains(line, " of ") {
			ids = append(ids, f[0])
		}
	}
	return ids
}

// id is a named row's id as the command line gives it.
func id(w *world, name string) string { return strconv.FormatInt(w.ids[name], 10) }

func TestList(t *testing.T) {
	w := newWorld(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unprocessed by default", nil, []string{"queued", "other"}},
		{"capped", []string{"--state", "capped"}, []string{"capped"}},
		{"processed", []string{"--state", "processed"}, []string{"done"}},
		{"all", []string{"--state", "all"}, []string{"queued", "capped", "done", "other"}},
		{"by action", []string{"--state", "all", "--action", "change-job-status"}, []string{"queued", "done"}},
		{"by job", []string{"--state", "all", "--job", strings.ToUpper(jobB)}, []string{"capped"}},
		{"by time", []string{"--state", "all", "--since", "2026-11-30 10:00", "--until", "2026-11-30T12:00:00Z"}, []string{"capped", "done"}},
		{"limit", []string{"--state", "all", "--limit", "1"}, []string{"other"}},
		{"oldest first", []string{"--state", "all", "--oldest"}, []string{"queued", "capped", "done", "other"}},
		{"oldest first, limit", []string{"--state", "all", "--limit", "1", "--oldest"}, []string{"queued"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			out, _, err := w.run("", append([]string{"list"}, tc.args...)...)
			is.NoErr(err)
			var want []string
			for _, n := range tc.want {
				want = append(want, id(w, n))
			}
			if !slices.Contains(tc.args, "--oldest") && !slices.Contains(tc.args, "--limit") {
				slices.Reverse(want) // the newest first, but for --oldest
			}
			is.Equal(listed(out), want)                                                   // the rows selected, newest first (--oldest: oldest)
			is.True(strings.HasPrefix(out, "ID"))                                         // under a header
			is.True(strings.Contains(out, "ACTION") && strings.Contains(out, "ATTEMPTS")) // with the columns asked for
		})
	}

	t.Run("the table says what each row is", func(t *testing.T) {
		is := is.New(t)
		out, _, err := w.run("", "list", "--state", "capped")
		is.NoErr(err)
		is.True(strings.Contains(out, "create-appointment"))              // its action
		is.True(strings.Contains(out, jobB))                              // job
		is.True(strings.Contains(out, " capped "))                        // state
		is.True(strings.Contains(out, "payload fault UnknownIdentifier")) // and last error
		is.True(strings.Contains(out, "1 of 1 row, newest first"))        // and how many there are
	})

	t.Run("bad filters", func(t *testing.T) {
		is := is.New(t)
		_, _, err := w.run("", "list", "--state", "stuck")
		is.True(err != nil) // an unknown state
		_, _, err = w.run("", "list", "--since", "yesterday-ish")
		is.True(err != nil) // a time that is not one
		_, _, err = w.run("", "list", "--job", "259047")
		is.True(err != nil) // a job that is not a GUID
		_, _, err = w.run("", "list", "--nope")
		is.True(errors.Is(err, primectl.ErrUsage)) // an unknown flag
	})
}

func TestShow(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	out, _, err := w.run("", "show", id(w, "capped"))
	is.NoErr(err)
	is.True(strings.Contains(out, "eventAction:      create-appointment")) // the row's columns
	is.True(strings.Contains(out, "processAttempts:  5"))
	is.True(strings.Contains(out, "state:            capped"))
	is.True(strings.Contains(out, "\"jobId\": 259047")) // the payload, indented
	is.True(strings.Contains(out, "\"API-Key\": ["))    // the headers
	_, _, err = w.run("", "show", "999999")
	is.True(errors.Is(err, store.ErrNotFound)) // an unknown row
	_, _, err = w.run("", "show")
	is.True(errors.Is(err, primectl.ErrUsage)) // no row named
}

func TestReplay(t *testing.T) {
	t.Run("one row, confirmed", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		out, _, err := w.run("y\n", "replay", id(w, "capped"))
		is.NoErr(err)
		is.True(strings.Contains(out, "1 row would be reset")) // the count first
		is.True(strings.Contains(out, "Reset 1 row? [y/N]"))   // then the question
		is.True(strings.Contains(out, "1 row reset"))
		r := w.row("capped")
		is.Equal(r.ProcessAttempts, 0)           // attempts reset
		is.True(r.PublishedUTC.IsZero())         // queued for the relay
		is.Equal(r.ReplayCount, 1)               // with a new message id
		is.Equal(w.row("queued").ReplayCount, 0) // nothing else touched
	})

	t.Run("declined", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		out, _, err := w.run("n\n", "replay", "--action", "change-job-status")
		is.NoErr(err)
		is.True(strings.Contains(out, "2 rows would be reset"))
		is.True(strings.Contains(out, "Nothing reset."))
		is.Equal(w.row("done").ReplayCount, 0) // untouched
		out, _, err = w.run("", "replay", "--action", "change-job-status")
		is.NoErr(err)
		is.True(strings.Contains(out, "Nothing reset.")) // no answer is no
	})

	t.Run("a filter with --yes", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		out, _, err := w.run("", "replay", "--job", jobA, "--state", "processed", "--yes")
		is.NoErr(err)
		is.True(strings.Contains(out, "1 row reset"))
		is.Equal(w.row("done").ReplayCount, 1)   // the processed row of the job
		is.True(!w.row("done").Processed())      // queued again
		is.Equal(w.row("queued").ReplayCount, 0) // not the job's unprocessed one
	})

	t.Run("an id the log does not have resets nothing", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		_, _, err := w.run("", "replay", id(w, "capped"), "9999", "--yes")
		is.True(err != nil)                                   // refused
		is.True(strings.Contains(err.Error(), "no row 9999")) // naming the id
		is.Equal(w.row("capped").ReplayCount, 0)              // the row it has is not reset either
	})

	t.Run("everything needs --all", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		_, stderr, err := w.run("y\n", "replay")
		is.True(errors.Is(err, primectl.ErrUsage)) // refused
		is.True(strings.Contains(stderr, "--all")) // saying how
		is.Equal(w.row("done").ReplayCount, 0)     // nothing reset
		out, _, err := w.run("", "replay", "--all", "--yes")
		is.NoErr(err)
		is.True(strings.Contains(out, "4 rows reset")) // with --all, every row
	})

	t.Run("--now asks ingest to publish", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		var asked []string
		var gotUser, gotPass string
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			asked = append(asked, r.Method+" "+r.URL.Path)
			gotUser, gotPass, _ = r.BasicAuth()
			if r.URL.Path == "/healthz" {
				rw.Write([]byte(`{"status":"ok","service":"ingest"}`))
				return
			}
			rw.Write([]byte(`{"published":1}`))
		}))
		defer srv.Close()
		w.env["INGEST_URL"] = srv.URL
		w.env["ADMIN_USER"] = "ops"
		w.env["ADMIN_PASSWORD"] = "s3cret"
		out, _, err := w.run("", "replay", id(w, "capped"), "--yes", "--now")
		is.NoErr(err)
		is.Equal(asked, []string{"GET /healthz", "POST /api/prime/webhooklog/process"}) // ingest checked first, then the relay trigger
		is.Equal(gotUser, "ops")                                                        // with the admin login
		is.Equal(gotPass, "s3cret")
		is.True(strings.Contains(out, `{"published":1}`)) // and what ingest said
		is.True(!strings.Contains(out, "s3cret"))         // never the password
		is.Equal(w.row("capped").ReplayCount, 1)          // the row reset
	})

	// replay --now makes sure it can ask ingest before it resets anything:
	// an ingest that does not answer, refuses the login or is not ingest
	// leaves every row as it was.
	for _, tc := range []struct {
		name   string
		ingest http.HandlerFunc // nil: nothing listens at INGEST_URL
		says   string
	}{
		{"unreachable", nil, "ingest does not answer at"},
		{"a refused login", func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusUnauthorized) }, "refused ADMIN_USER/ADMIN_PASSWORD"},
		{"another service", func(rw http.ResponseWriter, _ *http.Request) {
			rw.Write([]byte(`{"status":"ok","service":"job-mirror"}`))
		}, "is job-mirror, not ingest"},
		{"not primeflow", func(rw http.ResponseWriter, _ *http.Request) { rw.WriteHeader(http.StatusNotFound) }, "not a primeflow process"},
	} {
		t.Run("--now with "+tc.name+" resets nothing", func(t *testing.T) {
			is := is.New(t)
			w := newWorld(t)
			posted := false
			if tc.ingest != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					posted = posted || r.Method == http.MethodPost
					tc.ingest(rw, r)
				}))
				defer srv.Close()
				w.env["INGEST_URL"] = srv.URL
			} else {
				w.env["INGEST_URL"] = "http://" + flowtest.FreeAddr(t)
			}
			w.env["ADMIN_USER"] = "ops"
			w.env["ADMIN_PASSWORD"] = "wrong-password"
			_, _, err := w.run("", "replay", id(w, "capped"), "--yes", "--now")
			is.True(err != nil)                                       // refused
			is.True(strings.Contains(err.Error(), tc.says))           // saying why
			is.True(strings.Contains(err.Error(), "nothing reset"))   // and that nothing changed
			is.True(!strings.Contains(err.Error(), "wrong-password")) // without the secret
			is.Equal(w.row("capped").ReplayCount, 0)                  // the row is as it was
			is.True(!posted)                                          // and the relay was not asked
		})
	}

	// Without the admin login ingest refuses every request: --now says what
	// to set, asks nothing and resets nothing.
	t.Run("--now without the admin login resets nothing", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		asked := false
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			asked = true
			rw.WriteHeader(http.StatusUnauthorized)
		}))
		defer srv.Close()
		w.env["INGEST_URL"] = srv.URL
		w.env["ADMIN_USER"] = "admin" // and no password
		_, _, err := w.run("", "replay", id(w, "capped"), "--yes", "--now")
		is.True(err != nil)
		is.True(strings.Contains(err.Error(), "ADMIN_PASSWORD (or ADMIN_PASSWORD_FILE) are not both set")) // what to set, not "refused"
		is.True(strings.Contains(err.Error(), "nothing reset"))
		is.True(!asked) // ingest was not asked
		is.Equal(w.row("capped").ReplayCount, 0)
	})

	// Unset, INGEST_URL is where OPS_ADDR, or HTTP_ADDR, is reached.
	t.Run("--now follows OPS_ADDR and HTTP_ADDR", func(t *testing.T) {
		for _, variable := range []string{"HTTP_ADDR", "OPS_ADDR"} {
			t.Run(variable, func(t *testing.T) {
				is := is.New(t)
				w := newWorld(t)
				srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
					rw.Write([]byte(`{"status":"ok","service":"primeflow"}`))
				}))
				defer srv.Close()
				port := srv.URL[strings.LastIndex(srv.URL, ":"):]
				w.env["HTTP_ADDR"] = "127.0.0.1:1" // nothing there
				w.env[variable] = port             // ":<port>", as bin/primeflow reads it
				w.env["ADMIN_USER"], w.env["ADMIN_PASSWORD"] = "ops", "s3cret"
				_, _, err := w.run("", "replay", id(w, "capped"), "--yes", "--now")
				is.NoErr(err) // ingest found there
				is.Equal(w.row("capped").ReplayCount, 1)
			})
		}
	})

	t.Run("bad row id", func(t *testing.T) {
		is := is.New(t)
		w := newWorld(t)
		_, _, err := w.run("", "replay", "12x")
		is.True(err != nil)
	})
}

func TestFirstSeen(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	ctx := context.Background()
	for _, j := range []string{jobA, jobB, "11111111-2222-4333-8444-555555555555"} {
		_, err := w.store.ClaimFirstSeen(ctx, j, 42, store.ViaWebhook)
		is.NoErr(err)
	}
	_, err := w.store.FailFirstSeen(ctx, jobB, "queue missing objects: ethSyncQueue is locked")
	is.NoErr(err)
	is.NoErr(w.store.CompleteFirstSeen(ctx, "11111111-2222-4333-8444-555555555555", "Completed"))

	out, _, err := w.run("", "firstseen")
	is.NoErr(err)
	is.True(strings.Contains(out, jobA) && strings.Contains(out, jobB)) // pending jobs
	is.True(!strings.Contains(out, "11111111-"))                        // not the completed one
	is.True(strings.Contains(out, "failing"))                           // the failing one says so
	is.True(strings.Contains(out, "2 jobs"))

	out, _, err = w.run("", "firstseen", "--failed")
	is.NoErr(err)
	is.True(strings.Contains(out, jobB) && !strings.Contains(out, jobA)) // only the failed one
	is.True(strings.Contains(out, "ethSyncQueue is locked"))             // with its error

	out, _, err = w.run("", "firstseen", "--all")
	is.NoErr(err)
	is.True(strings.Contains(out, "3 jobs"))    // everything
	is.True(strings.Contains(out, "completed")) // completed ones too
}

// TestNoDatabaseIsAnError: run where the pipeline's data is not, primectl
// says so instead of making an empty database that answers "0 rows".
func TestNoDatabaseIsAnError(t *testing.T) {
	is := is.New(t)
	dir := t.TempDir()
	w := &world{t: t, env: map[string]string{"DATA_DIR": dir}}
	for _, args := range [][]string{{"list"}, {"replay", "1", "--yes"}, {"show", "1"}, {"firstseen"}} {
		_, _, err := w.run("", args...)
		is.True(err != nil)                                   // refused
		is.True(strings.Contains(err.Error(), "no database")) // saying why
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*"))
	is.Equal(len(matches), 0)           // nothing made
	out, _, err := w.run("", "migrate") // migrate makes it
	is.NoErr(err)
	is.True(strings.Contains(out, "SQLite schema is up to date"))
	out, _, err = w.run("", "list")
	is.NoErr(err)
	is.True(strings.Contains(out, "0 of 0")) // and then it opens
}

func TestMigrateAndUsage(t *testing.T) {
	is := is.New(t)
	w := newWorld(t)
	out, _, err := w.run("", "migrate")
	is.NoErr(err)
	is.True(strings.Contains(out, "Nothing to apply.")) // the store migrated itself

	_, stderr, err := w.run("")
	is.True(errors.Is(err, primectl.ErrUsage)) // no command
	is.True(strings.Contains(stderr, "Usage:"))
	_, stderr, err = w.run("", "frobnicate")
	is.True(errors.Is(err, primectl.ErrUsage)) // an unknown command
	is.True(strings.Contains(stderr, "unknown command"))
	for _, help := range []string{"help", "--help", "-h"} {
		out, _, err = w.run("", help)
		is.NoErr(err)
		is.True(strings.Contains(out, "primectl replay")) // every command
		vars, err := config.Variables(primectl.Config{})
		is.NoErr(err)
		for _, v := range vars {
			is.True(strings.Contains(out, "  "+v.Name+" ")) // and every variable it reads, v.Name
		}
		is.True(strings.Contains(out, version.String("primectl"))) // and its version
	}
	out, _, err = w.run("", "--version")
	is.NoErr(err)
	is.Equal(out, version.String("primectl")+"\n") // the version, commit and build date
}

// A flag a command does not know, or a value it cannot read, is said with
// the command's own usage, not the flag package's list; -h explains the
// command's flags on stdout.
func TestFlagErrorsShowTheCommandsUsage(t *testing.T) {
	w := newWorld(t)
	for _, args := range [][]string{{"list", "--stat"}, {"list", "--limit", "x"}, {"replay", "1", "--nope"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			is := is.New(t)
			_, stderr, err := w.run("", args...)
			is.True(errors.Is(err, primectl.ErrUsage))                       // refused
			is.True(strings.Contains(stderr, "usage:\n  primectl "+args[0])) // with the command's usage
			is.True(!strings.Contains(stderr, "Usage of"))                   // not the flag package's
			is.True(!strings.Contains(stderr, "-action string"))             // nor its list of flags
		})
	}
	is := is.New(t)
	out, _, err := w.run("", "list", "-h")
	is.NoErr(err) // help is no error
	is.True(strings.Contains(out, "usage:\n  primectl list"))
	is.True(strings.Contains(out, "-oldest")) // the flags explained
}
