// Package graphsim simulates the part of Microsoft Graph the email path
// (§7) uses, for tests, benchmarks and the all-in-one process: the
// client-credentials token endpoint, one mailbox's folders, a folder's
// messages ($select, $orderby=receivedDateTime, $top, paged by
// @odata.nextLink), a message by its id (its body, its folder), its internet
// headers, and the move that gives a message a new id; throttling (429 with
// Retry-After), server errors, no answer at all (the connection dropped)
// and a call taken and never answered until released, injected
// deterministically; and a control API to drop a message into a folder
// (of any size, with any headers) and to delete a folder.
//
// A Sim is an http.Handler; mount it under a prefix with http.StripPrefix.
// Graph's API (what pkg/graph calls):
//
//	POST /{tenant}/oauth2/v2.0/token                     client_credentials grant
//	GET  /v1.0/users/{user}/mailFolders?$filter=displayName eq 'X'
//	GET  /v1.0/users/{user}/mailFolders/{id or well-known name}
//	GET  /v1.0/users/{user}/mailFolders/{id}/childFolders?$filter=displayName eq 'X'
//	GET  /v1.0/users/{user}/mailFolders/{id}/messages?$select=…&$orderby=receivedDateTime&$top=50
//	GET  /v1.0/users/{user}/messages/{id}?$select=body   a message, wherever it is (parentFolderId)
//	POST /v1.0/users/{user}/messages/{id}/move           {"destinationId":"…"} → 201, a new id
//
// The control API (JSON only, with the control token as "Authorization:
// Bearer <token>", pkg/simcontrol; still, never expose a simulator):
//
//	POST   /_sim/messages   {"folder":"Inbox/Prime Jobs","subject","body","contentType":"html"|"text",
//	                         "internetMessageId","receivedDateTime","from",
//	                         "headers":[{"name","value"}],"padTo":1400000}: drop a message in (all optional)
//	GET    /_sim/messages?folder=…   the messages of a folder, oldest first
//	POST   /_sim/folders    {"path":"Inbox/Prime Jobs/Processed"}: make a folder (and its parents)
//	DELETE /_sim/folders?path=…      delete a folder, its messages and the folders in it
//	GET    /_sim/stats      calls by operation and status, moves, tokens
//	POST   /_sim/faults     {"throttleNext":2,"retryAfter":"2s","failNext":1,"failStatus":503,
//	                         "down":true,"hang":true,"path":"/messages"}
//	DELETE /_sim/faults     no faults (the calls Hang holds go on)
//	POST   /_sim/reset      the default folders, no messages, no faults, no tokens
package graphsim

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/ethosbuilding/primeflow/pkg/jobemail"
	"github.com/ethosbuilding/primeflow/pkg/simcontrol"
)

// The defaults of Options.
const (
	DefaultTenant = "graphsim-tenant"
	DefaultClient = "graphsim-client"
	DefaultSecret = "graphsim-secret"
	DefaultUser   = "prime-jobs@example.com"
	// DefaultFrom is the sender of a message dropped in without one:
	// Prime's notifications' (assumed).
	DefaultFrom = "noreply@primeeco.tech"
)

// DefaultFolders are the folders a Sim starts with: the inbox, and a folder
// for Prime's job emails with the two the email path files them in.
var DefaultFolders = []string{"Inbox/Prime Jobs", "Inbox/Prime Jobs/Processed", "Inbox/Prime Jobs/Failed"}

// Options configure a Sim; zero fields take the defaults.
type Options struct {
	// Tenant, ClientID and ClientSecret are what the token endpoint accepts.
	Tenant, ClientID, ClientSecret string
	// User is the one mailbox (case does not matter).
	User string
	// Folders are made at start and on Reset (default DefaultFolders);
	// Inbox is always there.
	Folders []string
	// TokenTTL is the lifetime of issued tokens (default 1h, as Entra's).
	TokenTTL time.Duration
	// Now is the simulator's clock (default time.Now).
	Now func() time.Time
	// ControlToken is what the control API takes, as "Authorization:
	// Bearer <token>", with JSON bodies only (pkg/simcontrol); default a
	// random token, which ControlToken returns.
	ControlToken string
}

// Message is a message as the simulator holds it.
type Message struct {
	ID                string    `json:"id"`
	InternetMessageID string    `json:"internetMessageId"`
	Subject           string    `json:"subject"`
	ContentType       string    `json:"contentType"`
	Body              string    `json:"body"`
	BodyPreview       string    `json:"bodyPreview"`
	ReceivedDateTime  time.Time `json:"receivedDateTime"`
	From              string    `json:"from"`
	// Headers are its internet headers, top first (internetMessageHeaders).
	Headers []graph.Header `json:"headers,omitempty"`
	// Folder is the path of the folder the message is in.
	Folder string `json:"folder"`
}

type folder struct {
	id, name, parent string // parent is "" at the top of the mailbox
	messages         []*Message
}

// Sim is a simulated Graph mailbox. It is safe for concurrent use.
type Sim struct {
	opts Options
	now  func() time.Time
	mux  *http.ServeMux
	// handler is mux behind the control API's guard.
	handler http.Handler

	mu      sync.Mutex
	folders map[string]*folder // by id
	inbox   string             // the inbox's id, which "inbox" also names
	tokens  map[string]time.Time
	faults  Faults
	// release is closed when Faults.Hang ends, letting the calls it holds
	// go on; nil while nothing hangs.
	release chan struct{}
	stats   Stats
}

// New returns a simulator with the folders of opts.
func New(opts Options) *Sim {
	if opts.Tenant == "" {
		opts.Tenant = DefaultTenant
	}
	if opts.ClientID == "" {
		opts.ClientID = DefaultClient
	}
	if opts.ClientSecret == "" {
		opts.ClientSecret = DefaultSecret
	}
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.Folders == nil {
		opts.Folders = DefaultFolders
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.ControlToken == "" {
		opts.ControlToken = simcontrol.NewToken()
	}
	s := &Sim{opts: opts, now: opts.Now}
	s.Reset()
	s.mux = s.routes()
	s.handler = simcontrol.Guard(opts.ControlToken, s.mux)
	return s
}

// ServeHTTP serves Graph's API and the control API, the latter only to a
// request with the control token (pkg/simcontrol).
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ControlToken is the token the control API takes (Options.ControlToken).
func (s *Sim) ControlToken() string { return s.opts.ControlToken }

// ClientConfig is a pkg/graph configuration for this simulator mounted at
// baseURL.
func (s *Sim) ClientConfig(baseURL string) graph.Config {
	base := strings.TrimRight(baseURL, "/")
	return graph.Config{
		TenantID: s.opts.Tenant, ClientID: s.opts.ClientID, ClientSecret: s.opts.ClientSecret,
		APIURL: base + "/v1.0", TokenURL: base + "/{tenant}/oauth2/v2.0/token", Timeout: 30 * time.Second,
	}
}

// User is the simulated mailbox.
func (s *Sim) User() string { return s.opts.User }

// Reset empties the mailbox back to its folders and clears faults, tokens
// and stats.
func (s *Sim) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inbox = newID("AAMkFolder")
	s.folders = map[string]*folder{s.inbox: {id: s.inbox, name: "Inbox"}}
	for _, p := range s.opts.Folders {
		s.makeFolder(p)
	}
	s.tokens = map[string]time.Time{}
	s.setFaults(Faults{})
	s.stats = Stats{ByOp: map[string]int64{}, ByStatus: map[int]int64{}, Hanging: s.stats.Hanging}
}

// MakeFolder makes a folder by path, and any parent it lacks.
func (s *Sim) MakeFolder(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.makeFolder(path)
	return err
}

func (s *Sim) makeFolder(path string) (*folder, error) {
	var parent *folder
	for i, name := range strings.Split(strings.Trim(path, "/"), "/") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, fmt.Errorf("graphsim: folder %q: an empty name", path)
		}
		var f *folder
		if i == 0 && strings.EqualFold(name, "inbox") {
			f = s.folders[s.inbox]
		} else {
			pid := ""
			if parent != nil {
				pid = parent.id
			}
			f = s.child(pid, name)
			if f == nil {
				f = &folder{id: newID("AAMkFolder"), name: name, parent: pid}
				s.folders[f.id] = f
			}
		}
		parent = f
	}
	return parent, nil
}

// child is the folder named name under parent ("" is the top), or nil.
func (s *Sim) child(parent, name string) *folder {
	for _, f := range s.sortedFolders() {
		if f.parent == parent && strings.EqualFold(f.name, name) {
			return f
		}
	}
	return nil
}

func (s *Sim) sortedFolders() []*folder {
	out := make([]*folder, 0, len(s.folders))
	for _, f := range s.folders {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *folder) int { return strings.Compare(a.id, b.id) })
	return out
}

// folderByPath finds a folder by path, or nil.
func (s *Sim) folderByPath(path string) *folder {
	var f *folder
	for i, name := range strings.Split(strings.Trim(path, "/"), "/") {
		name = strings.TrimSpace(name)
		switch {
		case i == 0 && strings.EqualFold(name, "inbox"):
			f = s.folders[s.inbox]
		case i == 0:
			f = s.child("", name)
		default:
			f = s.child(f.id, name)
		}
		if f == nil {
			return nil
		}
	}
	return f
}

func (s *Sim) path(f *folder) string {
	parts := []string{f.name}
	for f.parent != "" {
		f = s.folders[f.parent]
		parts = append([]string{f.name}, parts...)
	}
	return strings.Join(parts, "/")
}

// NewMessage is a message to drop in; zero fields get a realistic value.
type NewMessage struct {
	// Folder is the path of the folder (default the first of Options.Folders).
	Folder  string `json:"folder"`
	Subject string `json:"subject"`
	Body    string `json:"body"`
	// ContentType is "html" (the default, as Outlook) or "text".
	ContentType       string    `json:"contentType"`
	InternetMessageID string    `json:"internetMessageId"`
	ReceivedDateTime  time.Time `json:"receivedDateTime"`
	From              string    `json:"from"`
	// Headers are its internet headers, top first: an
	// Authentication-Results, say.
	Headers []graph.Header `json:"headers"`
	// PadTo pads the body to this many bytes (an HTML comment, or spaces
	// for text), as a mail with a large signature or inline image is.
	PadTo int `json:"padTo"`
}

// Deliver drops a message into a folder and returns it as stored.
func (s *Sim) Deliver(n NewMessage) (Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n.Folder == "" {
		n.Folder = "Inbox"
		if len(s.opts.Folders) > 0 {
			n.Folder = s.opts.Folders[0]
		}
	}
	f := s.folderByPath(n.Folder)
	if f == nil {
		return Message{}, fmt.Errorf("graphsim: no folder %q", n.Folder)
	}
	if n.ContentType == "" {
		n.ContentType = "html"
	}
	if n.ContentType != "html" && n.ContentType != "text" {
		return Message{}, fmt.Errorf("graphsim: contentType %q: want html or text", n.ContentType)
	}
	if n.InternetMessageID == "" {
		n.InternetMessageID = "<" + strings.ToLower(rand.Text()) + "@notifications.primeeco.tech>"
	}
	if n.ReceivedDateTime.IsZero() {
		n.ReceivedDateTime = s.now()
	}
	if n.From == "" {
		n.From = DefaultFrom
	}
	text := n.Body
	if n.ContentType == "html" {
		text = jobemail.Text(text)
	}
	m := &Message{
		ID: newID("AAMkMessage"), InternetMessageID: n.InternetMessageID, Subject: n.Subject, ContentType: n.ContentType,
		Body: pad(n.Body, n.ContentType, n.PadTo), BodyPreview: preview(text), ReceivedDateTime: n.ReceivedDateTime.UTC().Truncate(time.Second),
		From: n.From, Headers: slices.Clone(n.Headers),
	}
	f.messages = append(f.messages, m)
	out := *m
	out.Folder = s.path(f)
	return out, nil
}

// preview is Graph's bodyPreview: the text's first 255 characters, spaces
// folded.
func preview(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(text) > 255 {
		text = string([]rune(text)[:255])
	}
	return text
}

// Messages returns the messages of a folder by path, oldest first; nil
// when there is no such folder.
func (s *Sim) Messages(path string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.folderByPath(path)
	if f == nil {
		return nil
	}
	out := make([]Message, 0, len(f.messages))
	for _, m := range sortedMessages(f.messages) {
		c := *m
		c.Folder = s.path(f)
		out = append(out, c)
	}
	return out
}

func sortedMessages(ms []*Message) []*Message {
	out := slices.Clone(ms)
	slices.SortStableFunc(out, func(a, b *Message) int { return a.ReceivedDateTime.Compare(b.ReceivedDateTime) })
	return out
}

// Stats counts what the simulated API served. Control calls are not counted.
type Stats struct {
	// Calls is every API request, the token endpoint included.
	Calls int64 `json:"calls"`
	// ByOp splits Calls by operation: token, folders.get, folders.list,
	// messages.list, messages.move.
	ByOp map[string]int64 `json:"byOp"`
	// ByStatus splits Calls by the status answered (0: the connection was
	// dropped, or the caller gave up on a call Hang held).
	ByStatus map[int]int64 `json:"byStatus"`
	// Hanging is how many calls Faults.Hang holds now.
	Hanging      int64 `json:"hanging"`
	Moves        int64 `json:"moves"`
	TokensIssued int64 `json:"tokensIssued"`
	// LastListQuery is the query of the last messages.list call.
	LastListQuery string `json:"lastListQuery"`
}

// Stats returns the counts so far.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.stats
	out.ByOp, out.ByStatus = make(map[string]int64), make(map[int]int64)
	for k, v := range s.stats.ByOp {
		out.ByOp[k] = v
	}
	for k, v := range s.stats.ByStatus {
		out.ByStatus[k] = v
	}
	return out
}

// Faults are injected into the API, deterministically.
type Faults struct {
	// Path limits the faults to API paths that contain it ("/messages",
	// "/move", "/oauth2"); empty is every path.
	Path string `json:"path,omitempty"`
	// ThrottleNext answers the next N matching calls 429 with RetryAfter.
	ThrottleNext int `json:"throttleNext,omitempty"`
	// RetryAfter is the Retry-After of a 429 (whole seconds, default 1s).
	RetryAfter Duration `json:"retryAfter,omitempty"`
	// FailNext answers the next N matching calls with FailStatus.
	FailNext int `json:"failNext,omitempty"`
	// FailStatus is the status of those failures (default 503).
	FailStatus int `json:"failStatus,omitempty"`
	// Down drops every matching call's connection without an answer, until
	// the faults are cleared.
	Down bool `json:"down,omitempty"`
	// Hang takes every matching call and answers none: Graph accepting the
	// connection and never answering. A held call goes on, and is answered
	// as if it had just come, once faults without Hang are set (or cleared,
	// or the simulator reset); until then only its caller's giving up ends
	// it.
	Hang bool `json:"hang,omitempty"`
}

// SetFaults replaces the injected faults; Faults{} clears them.
func (s *Sim) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFaults(f)
}

// setFaults is SetFaults with s.mu held: a Hang that ends releases the
// calls it holds.
func (s *Sim) setFaults(f Faults) {
	s.faults = f
	switch {
	case f.Hang && s.release == nil:
		s.release = make(chan struct{})
	case !f.Hang && s.release != nil:
		close(s.release)
		s.release = nil
	}
}

// RevokeTokens makes every issued token unknown: the next call with one
// is answered 401.
func (s *Sim) RevokeTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.tokens)
}

// newID is an id in the style of Graph's (opaque, URL-safe base64).
func newID(prefix string) string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
