package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/events"
	"github.com/ethosbuilding/primeflow/pkg/natsserver/natstest"
	"github.com/matryer/is"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestEnsureStreamsIsRepeatable(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	_, js := natstest.Connect(t, srv) // applies the streams once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	is.NoErr(events.EnsureStreams(ctx, js, 0)) // and again, unchanged

	cfgs, err := events.StreamConfigs(0)
	is.NoErr(err)
	for _, cfg := range cfgs {
		s, err := js.Stream(ctx, cfg.Name)
		is.NoErr(err)                                          // every stream in streams/ exists
		is.Equal(s.CachedInfo().Config.Subjects, cfg.Subjects) // with the file's subjects
	}
	_, err = js.KeyValue(ctx, events.BucketLocks)
	is.NoErr(err) // the KV_locks stream binds as the locks bucket
}

// TestEnsureStreamsUpdatesOnlyWhatDiffers: applying the streams again
// updates none that matches its file, and puts back one that was changed.
func TestEnsureStreamsUpdatesOnlyWhatDiffers(t *testing.T) {
	is := is.New(t)
	srv := natstest.Server(t)
	nc, js := natstest.Connect(t, srv) // applies the streams once
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED.>")
	is.NoErr(err)
	is.NoErr(nc.Flush())

	is.NoErr(events.EnsureStreams(ctx, js, 0))
	is.NoErr(nc.Flush())
	_, err = updates.NextMsg(200 * time.Millisecond)
	is.True(errors.Is(err, nats.ErrTimeout)) // nothing updated

	s, err := js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	changed := s.CachedInfo().Config
	want := changed.MaxAge
	changed.MaxAge = time.Hour
	_, err = js.UpdateStream(ctx, changed)
	is.NoErr(err)
	_, err = updates.NextMsg(2 * time.Second) // that change's advisory
	is.NoErr(err)
	is.NoErr(events.EnsureStreams(ctx, js, 0))
	msg, err := updates.NextMsg(2 * time.Second)
	is.NoErr(err)
	is.Equal(msg.Subject, "$JS.EVENT.ADVISORY.STREAM.UPDATED."+events.StreamWebhook) // the changed one is put back
	s, err = js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	is.Equal(s.CachedInfo().Config.MaxAge, want)
	_, err = updates.NextMsg(200 * time.Millisecond)
	is.True(errors.Is(err, nats.ErrTimeout)) // and only it
}

func TestWebhookSubjects(t *testing.T) {
	for action, want := range map[string]string{
		"change-job-status": "prime.webhook.change-job-status",
		"":                  "prime.webhook._none",
		"a.b":               "prime.webhook._invalid",
		"has space":         "prime.webhook._invalid",
		">":                 "prime.webhook._invalid",
		"_none":             "prime.webhook._invalid",
	} {
		if got := events.WebhookSubject(action); got != want {
			t.Errorf("WebhookSubject(%q) = %q, want %q", action, got, want)
		}
	}
}

// FuzzActionToken holds ActionToken to its documented rule: the action when
// it is 1 to 100 of A-Z, a-z, 0-9, _ and - (and not one of the two reserved
// tokens), _none when empty, _invalid otherwise.
func FuzzActionToken(f *testing.F) {
	plain := regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)
	for _, seed := range []string{"", "change-job-status", "a.b", "has space", ">", "_none", "_invalid",
		strings.Repeat("x", 100), strings.Repeat("x", 101), "é", "a\x00"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, action string) {
		want := events.ActionInvalid
		switch {
		case action == "":
			want = events.ActionNone
		case plain.MatchString(action) && action != events.ActionNone && action != events.ActionInvalid:
			want = action
		}
		if got := events.ActionToken(action); got != want {
			t.Fatalf("ActionToken(%q) = %q, want %q", action, got, want)
		}
	})
}

// TestNatsCLIAcceptsStreamFiles proves the files in streams/ are what
// `nats stream add --config` takes. The Makefile builds the CLI and sets NATS_CLI.
func TestNatsCLIAcceptsStreamFiles(t *testing.T) {
	cli := natstest.CLI(t)
	is := is.New(t)
	srv := natstest.Server(t)
	files, err := filepath.Glob("../../streams/*.json")
	is.NoErr(err)
	is.True(len(files) > 0) // stream files found
	for _, f := range files {
		out, err := exec.Command(cli, "--server", srv.ClientURL(), "stream", "add", "--config", f).CombinedOutput()
		is.True(err == nil) // nats stream add --config accepts the file
		if err != nil {
			t.Logf("%s: %s", f, out)
		}
	}
	_, js := natstest.Connect(t, srv)
	var want []jetstream.StreamConfig
	b, err := os.ReadFile("../../streams/PRIME_WEBHOOK.json")
	is.NoErr(err)
	var one jetstream.StreamConfig
	is.NoErr(json.Unmarshal(b, &one))
	want = append(want, one)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, events.StreamWebhook)
	is.NoErr(err)
	is.Equal(s.CachedInfo().Config.Subjects, want[0].Subjects) // the CLI created the stream the services use
}
