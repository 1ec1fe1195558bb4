// Package mailintake is the email path (§7, n8n's "Prime Job Email Sync"):
// it reads Prime's new-job notification emails from one mailbox folder
// through Microsoft Graph and puts each job through the same new-job path
// as a webhook. It is a service of its own because it alone holds the
// mailbox's credentials.
//
// Every poll lists the folder oldest first, a page at a time, and works
// through each message of a page as it arrives:
//
//  1. the receipt (spPrimeEmailJobRegisteredInsert), once a message, keyed
//     by its internetMessageId;
//  2. the sender: mail whose From is not in MAIL_ALLOWED_SENDERS, or that
//     Exchange's Authentication-Results says passed neither DMARC nor an
//     aligned DKIM signature for that sender, goes to MAIL_FAILED_FOLDER
//     unread, its receipt Rejected: junk, which needs nobody, where a
//     Failed receipt waits for a person (senders.go);
//  3. the body, fetched on its own within MAIL_MAX_BODY_BYTES (a larger
//     message goes to MAIL_FAILED_FOLDER, its receipt says so);
//  4. Extract JobID (pkg/jobemail): body.content, then bodyPreview;
//  5. the job made sure of through job-mirror (events.SubjectEnsureJobEmail,
//     which job-mirror records as "email"): one Prime GET /jobs/{JobID} for a
//     job the mirror lacks, the numeric → GUID mapping (§4.1), and, on first
//     sight, the new-job pipeline (§6), once per job whichever path gets
//     there first. A job
//     already mirrored costs no Prime call. There is no fixed wait: the
//     make-safe re-check ladder (§6) covers the allocation race the flow's
//     35 seconds were for;
//  6. the receipt says Processed: by then the job's effects and hand-offs
//     are committed;
//  7. the message moves to MAIL_PROCESSED_FOLDER, last (§7: "so a failure
//     leaves the mail for the next poll"). A crash before the move leaves
//     it in the folder, and the next poll finds its receipt Processed and
//     only moves it.
//
// Only a fault of the email itself counts an attempt on its receipt: no
// JobID in it, or Prime has no such job. It is tried again at the next
// poll; after MAIL_MAX_ATTEMPTS it moves to MAIL_FAILED_FOLDER with the
// reason in its receipt. Anything else is a wait, however long it lasts,
// and counts no attempt: Graph's 429, 5xx or no answer, Prime's rate limit,
// 5xx or no answer, job-mirror not answering, a folder deleted. One message
// never holds up the others: its Graph calls wait a bounded time, and a
// message that must wait is held (holds.go) while the poll goes on, and
// taken again at a later poll. Nothing is deleted. A message a person
// moves back into the folder is tried afresh.
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
	"github.com/ethosbuilding/primeflow/pkg/retry"
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
	// AllowedSenders are the senders whose mail is worked: addresses
	// (noreply@example.com) or whole domains (@example.com). Anyone can
	// send mail to the mailbox, and each JobID read costs a Prime call.
	AllowedSenders []string `env:"MAIL_ALLOWED_SENDERS" envSeparator:","`
	// PollInterval is how long after one poll the next starts.
	PollInterval time.Duration `env:"MAIL_POLL_INTERVAL" envDefault:"1m"`
	// MaxAttempts is how many failed attempts send a message to FailedFolder.
	MaxAttempts int `env:"MAIL_MAX_ATTEMPTS" envDefault:"5"`
	// PageSize is $top, the messages a list call returns.
	PageSize int `env:"MAIL_PAGE_SIZE" envDefault:"50"`
	// MaxBodyBytes bounds the answer that carries a message's body; a
	// larger message goes to FailedFolder unread.
	MaxBodyBytes int64 `env:"MAIL_MAX_BODY_BYTES" envDefault:"4194304"`
	// EnsureTimeout bounds one ensure-job request to job-mirror; one it
	// cuts short is waited out like one nobody answers.
	EnsureTimeout time.Duration `env:"MAIL_ENSURE_TIMEOUT" envDefault:"60s"`
	// WaitBackoff is how long an email waits after each of its waits in a
	// row on a fault not its own (Graph, Prime, job-mirror), unless the
	// fault asks for longer; the polls pass it by meanwhile.
	WaitBackoff retry.Backoff `env:"MAIL_WAIT_BACKOFF" envDefault:"2s,5s,15s,30s,1m" envSeparator:","`
}

// Validate refuses every setting that is missing or out of range, Graph's
// included, each naming its variable (config.Refusal). New calls it.
func (c Config) Validate() error {
	errs := []error{c.Graph.Check()}
	for _, f := range []struct{ name, value string }{
		{"MAIL_USER", c.User}, {"MAIL_FOLDER", c.Folder},
		{"MAIL_PROCESSED_FOLDER", c.ProcessedFolder}, {"MAIL_FAILED_FOLDER", c.FailedFolder},
	} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, config.Refuse(f.name, "is required"))
		}
	}
	if len(c.AllowedSenders) == 0 {
		errs = append(errs, errNoSenders)
	}
	return errors.Join(append(errs, c.ValidatePolling())...)
}

// ValidatePolling is Validate of every setting but Graph's, the mailbox's
// and whether MAIL_ALLOWED_SENDERS is set, which bin/primeflow's Graph
// simulator gives when GRAPH_* are unset.
func (c Config) ValidatePolling() error {
	var senders, body error
	if len(c.AllowedSenders) > 0 {
		_, senders = parseSenders(c.AllowedSenders)
	}
	if c.MaxBodyBytes < 64<<10 {
		body = config.Refuse("MAIL_MAX_BODY_BYTES", "must be at least 65536")
	}
	return errors.Join(
		config.Positive("MAIL_POLL_INTERVAL", c.PollInterval),
		config.Positive("MAIL_ENSURE_TIMEOUT", c.EnsureTimeout),
		config.Steps("MAIL_WAIT_BACKOFF", c.WaitBackoff),
		config.Positive("MAIL_MAX_ATTEMPTS", c.MaxAttempts),
		config.Between("MAIL_PAGE_SIZE", c.PageSize, 1, 1000), // Graph's $top
		body, senders)
}

// DefaultConfig is the mail intake's configuration with no variable set:
// every setting at its default (MAIL_USER and the folders blank).
func DefaultConfig() Config { return config.MustDefaults[Config]() }

// Mailbox is what the intake asks of Graph; *graph.Client is one.
type Mailbox interface {
	ResolveFolder(ctx context.Context, user, path string) (graph.Folder, error)
	ListPage(ctx context.Context, user, folderID string, top int, link string) (graph.Page, error)
	GetBody(ctx context.Context, user, messageID string, limit int64) (graph.Body, error)
	Locate(ctx context.Context, user, messageID string) (folderID string, err error)
	Move(ctx context.Context, user, messageID, destinationID string) error
}

// mailFolder is one of the three folders: the setting that names it, its
// path, and the folder it was resolved to.
type mailFolder struct {
	setting, path string
	graph.Folder
}

// Intake is the mail intake service. Its fields are the poll's, one
// goroutine's, but oldest.
type Intake struct {
	cfg     Config
	mail    Mailbox
	store   store.EmailReceipts
	ensure  *ensurejob.Caller
	senders senders
	log     *slog.Logger
	metrics *collectors
	// source is MAIL_FOLDER; processed and failed the folders it files in.
	source, processed, failed *mailFolder
	// holds are the messages waiting out a fault that is not theirs, by
	// receipt key (holds.go).
	holds map[string]hold
	// oldest is the receivedDateTime (Unix nanoseconds) of the oldest
	// message still in the folder, 0 when it is empty.
	oldest atomic.Int64
	// waiting is when the wait for Graph began, zero while it answers.
	waiting time.Time
	// messageWait is the bound of one message's Graph calls (the const).
	messageWait time.Duration
}

// New builds the intake on the shared Deps and a mailbox.
func New(cfg Config, d service.Deps, mail Mailbox) (*Intake, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := d.Log.With("component", "mail-intake")
	senders, _ := parseSenders(cfg.AllowedSenders) // checked by Validate
	in := &Intake{
		cfg: cfg, mail: mail, store: d.Store, log: log, senders: senders,
		ensure:    &ensurejob.Caller{NC: d.NC, Timeout: cfg.EnsureTimeout, Log: log},
		source:    &mailFolder{setting: "MAIL_FOLDER", path: cfg.Folder},
		processed: &mailFolder{setting: "MAIL_PROCESSED_FOLDER", path: cfg.ProcessedFolder},
		failed:    &mailFolder{setting: "MAIL_FAILED_FOLDER", path: cfg.FailedFolder},
		holds:     map[string]hold{}, messageWait: messageWait,
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
		"processed", in.cfg.ProcessedFolder, "failed", in.cfg.FailedFolder, "every", in.cfg.PollInterval,
		"allowedSenders", in.cfg.AllowedSenders)
	for {
		in.poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(in.cfg.PollInterval):
		}
	}
}

// resolve finds the three folders at start (waiting out Graph's outages).
// A folder deleted later is found again by its path (refind).
func (in *Intake) resolve(ctx context.Context) error {
	seen := map[string]string{}
	for _, f := range []*mailFolder{in.source, in.processed, in.failed} {
		err := in.graphCall(ctx, "resolve "+f.setting, 0, func(ctx context.Context) error {
			var err error
			f.Folder, err = in.mail.ResolveFolder(ctx, in.cfg.User, f.path)
			return err
		})
		switch {
		case errors.Is(err, graph.ErrNotFound):
			return fmt.Errorf("mail-intake: %s %q: %w (make the folder, or name one that exists)", f.setting, f.path, err)
		case err != nil:
			return fmt.Errorf("mail-intake: %s %q in MAIL_USER %q's mailbox: %w (check GRAPH_* and the app's Mail.ReadWrite permission)",
				f.setting, f.path, in.cfg.User, err)
		}
		if other, dup := seen[f.ID]; dup {
			return fmt.Errorf("mail-intake: %s %q is the same folder as %s: the three folders must differ", f.setting, f.path, other)
		}
		seen[f.ID] = f.setting
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
	var cfg Config
	return service.Main(ctx, "mail-intake", getenv, stderr, []config.Part{config.Read(&cfg, Config.Validate)}, func(_ context.Context, d service.Deps, _ *service.Router) (service.Runner, error) {
		mail, err := graph.New(cfg.Graph, nil)
		if err != nil {
			return nil, err
		}
		return New(cfg, d, mail)
	})
}
