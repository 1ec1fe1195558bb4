// Package mailintake is the email path (§7, n8n's "Prime Job Email Sync"):
// it reads Prime's new-job notification emails from one mailbox folder
// through Microsoft Graph and puts each job through the same new-job path
// as a webhook. It is a service of its own because it alone holds the
// mailbox's credentials.
//
// Every poll lists the folder oldest first and works through each message:
//
//  1. the receipt (spPrimeEmailJobRegisteredInsert), once a message, keyed
//     by its internetMessageId;
//  2. Extract JobID (pkg/jobemail): body.content, then bodyPreview;
//  3. the job made sure of through job-mirror (events.SubjectEnsureJobEmail,
//     which job-mirror records as "email"): one Prime GET /jobs/{JobID} for a
//     job the mirror lacks, the numeric → GUID mapping (§4.1), and, on first
//     sight, the new-job pipeline (§6), once per job whichever path gets
//     there first. A job
//     already mirrored costs no Prime call. There is no fixed wait: the
//     make-safe re-check ladder (§6) covers the allocation race the flow's
//     35 seconds were for;
//  4. the receipt says Processed: by then the job's effects and hand-offs
//     are committed;
//  5. the message moves to MAIL_PROCESSED_FOLDER, last. A crash before the
//     move leaves it in the folder, and the next poll finds its receipt
//     Processed and only moves it.
//
// A message that fails (no JobID, Prime has no such job) counts an attempt
// on its receipt and is tried again at the next poll; after
// MAIL_MAX_ATTEMPTS it moves to MAIL_FAILED_FOLDER with the reason in its
// receipt. One message never holds up the others, and nothing is deleted.
// Graph's 429 and 5xx, Prime's rate limit and job-mirror not answering are
// waited out and count no attempt. A message a person moves back into the
// folder is tried afresh.
package mailintake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/ensurejob"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/pkg/store"
)

// Config is the mail intake's configuration. Graph is the mailbox's app
// registration (GRAPH_*).
type Config struct {
	Graph graph.Config
	// User is the mailbox (its address or id).
	User string `env:"MAIL_USER"`
	// Folder is the folder Prime's emails arrive in; ProcessedFolder and
	// FailedFolder are where they are filed. Each is a path of display
	// names from the top of the mailbox ("Inbox/Prime Jobs/Processed"),
	// resolved once at start.
	Folder          string `env:"MAIL_FOLDER"`
	ProcessedFolder string `env:"MAIL_PROCESSED_FOLDER"`
	FailedFolder    string `env:"MAIL_FAILED_FOLDER"`
	// PollInterval is how long after one poll the next starts.
	PollInterval time.Duration `env:"MAIL_POLL_INTERVAL" envDefault:"1m"`
	// MaxAttempts is how many failed attempts send a message to FailedFolder.
	MaxAttempts int `env:"MAIL_MAX_ATTEMPTS" envDefault:"5"`
	// PageSize is $top, the messages a list call returns.
	PageSize int `env:"MAIL_PAGE_SIZE" envDefault:"50"`
	// EnsureTimeout bounds one ensure-job request to job-mirror; one it
	// cuts short is waited out like one nobody answers.
	EnsureTimeout time.Duration `env:"MAIL_ENSURE_TIMEOUT" envDefault:"60s"`
}

// Validate names every setting that is missing or out of range, Graph's
// included. New calls it.
func (c Config) Validate() error {
	errs := []error{c.Graph.Check()}
	for _, f := range []struct{ name, value string }{
		{"MAIL_USER", c.User}, {"MAIL_FOLDER", c.Folder},
		{"MAIL_PROCESSED_FOLDER", c.ProcessedFolder}, {"MAIL_FAILED_FOLDER", c.FailedFolder},
	} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, fmt.Errorf("%s is not set", f.name))
		}
	}
	if c.PollInterval <= 0 || c.EnsureTimeout <= 0 {
		errs = append(errs, errors.New("MAIL_POLL_INTERVAL and MAIL_ENSURE_TIMEOUT must be above zero"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("MAIL_MAX_ATTEMPTS must be at least 1"))
	}
	if c.PageSize < 1 || c.PageSize > 1000 {
		errs = append(errs, errors.New("MAIL_PAGE_SIZE must be 1 to 1000 (Graph's $top)"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("mail-intake: %w", err)
	}
	return nil
}

// DefaultConfig is the mail intake's configuration with no variable set:
// every setting at its default (MAIL_USER and the folders blank).
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Mailbox is what the intake asks of Graph; *graph.Client is one.
type Mailbox interface {
	ResolveFolder(ctx context.Context, user, path string) (graph.Folder, error)
	ListMessages(ctx context.Context, user, folderID string, top int) ([]graph.Message, error)
	Move(ctx context.Context, user, messageID, destinationID string) (graph.Message, error)
}

// Intake is the mail intake service.
type Intake struct {
	cfg     Config
	mail    Mailbox
	store   store.EmailReceipts
	ensure  *ensurejob.Caller
	log     *slog.Logger
	metrics *collectors
	// folder, processed and failed are the resolved folders.
	folder, processed, failed graph.Folder
	// oldest is the receivedDateTime (Unix nanoseconds) of the oldest
	// message still in the folder, 0 when it is empty.
	oldest atomic.Int64
	// waiting is when the wait for Graph began, zero while it answers.
	waiting time.Time
}

// New builds the intake on the shared Deps and a mailbox.
func New(cfg Config, d service.Deps, mail Mailbox) (*Intake, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "mail-intake")
	in := &Intake{
		cfg: cfg, mail: mail, store: d.Store, log: log,
		ensure: &ensurejob.Caller{NC: d.NC, Timeout: cfg.EnsureTimeout, Log: log},
	}
	m, err := newMetrics(d.Metrics, in.oldestAge)
	if err != nil {
		return nil, err
	}
	in.metrics = m
	return in, nil
}

// Run resolves the folders and polls until ctx ends. A folder that does
// not exist, or a mailbox the app may not read, stops it with an error
// naming the setting.
func (in *Intake) Run(ctx context.Context) error {
	if err := in.resolve(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	in.log.Info("reading the mailbox", "user", in.cfg.User, "folder", in.cfg.Folder,
		"processed", in.cfg.ProcessedFolder, "failed", in.cfg.FailedFolder, "every", in.cfg.PollInterval)
	for {
		in.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(in.cfg.PollInterval):
		}
	}
}

// resolve finds the three folders once (waiting out Graph's outages).
func (in *Intake) resolve(ctx context.Context) error {
	seen := map[string]string{}
	for _, f := range []struct {
		name, path string
		into       *graph.Folder
	}{
		{"MAIL_FOLDER", in.cfg.Folder, &in.folder},
		{"MAIL_PROCESSED_FOLDER", in.cfg.ProcessedFolder, &in.processed},
		{"MAIL_FAILED_FOLDER", in.cfg.FailedFolder, &in.failed},
	} {
		err := in.graphCall(ctx, "resolve "+f.name, func() error {
			var err error
			*f.into, err = in.mail.ResolveFolder(ctx, in.cfg.User, f.path)
			return err
		})
		switch {
		case errors.Is(err, graph.ErrNotFound):
			return fmt.Errorf("mail-intake: %s %q: %w (make the folder, or name one that exists)", f.name, f.path, err)
		case err != nil:
			return fmt.Errorf("mail-intake: %s %q in MAIL_USER %q's mailbox: %w (check GRAPH_* and the app's Mail.ReadWrite permission)",
				f.name, f.path, in.cfg.User, err)
		}
		if other, dup := seen[f.into.ID]; dup {
			return fmt.Errorf("mail-intake: %s %q is the same folder as %s: the three folders must differ", f.name, f.path, other)
		}
		seen[f.into.ID] = f.name
	}
	return nil
}

// Help is what bin/mail-intake --help prints: what it is and the variables
// its Main reads.
func Help() service.Help {
	return service.Help{Name: "mail-intake", Docs: []string{"docs/production.md"}, Configs: []any{Config{}, service.Config{}},
		Summary: "reads Prime's new-job emails from a mailbox through Microsoft Graph (§7) and puts each job through the new-job path, moving each email to the processed or failed folder."}
}

// Main runs the intake as a process of its own: Graph from GRAPH_*, NATS
// and the database as every service has them.
func Main(ctx context.Context, getenv func(string) string, stderr io.Writer) error {
	cfg, err := config.Load[Config](getenv)
	if err != nil {
		return err
	}
	mail, err := graph.New(cfg.Graph, nil)
	if err != nil {
		return err
	}
	return service.Main(ctx, "mail-intake", getenv, stderr, func(_ context.Context, d service.Deps, _ *service.Router) (service.Runner, error) {
		return New(cfg, d, mail)
	})
}
