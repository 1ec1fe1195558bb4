// Package graph is a small Microsoft Graph client for one mailbox: the
// OAuth2 client-credentials grant with a cached, early-refreshed token,
// folders resolved by name, a folder's messages oldest first a page at a
// time (@odata.nextLink), without their bodies; a message's body fetched on
// its own, within a size cap; where a message is; and the move that files
// a message away (and gives it a new id). It is what the email path (§7)
// needs of Graph and no more. The shapes it assumes of Graph beyond
// external-apis.md (internetMessageHeaders, Exchange's
// Authentication-Results) are in headers.go, decoded tolerantly.
//
// Every call returns a *WaitError (ErrWait) when Graph cannot answer now —
// a 429 or a 5xx, or no answer at all — and says how long Graph asked to
// wait; the client never retries one itself. Other refusals are an
// *APIError; a 404 matches ErrNotFound. A body over its cap is a
// *TooLargeError (ErrTooLarge).
package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/retry"
	"github.com/ethosbuilding/primeflow/pkg/secureurl"
)

// Defaults of the configuration.
const (
	DefaultAPIURL   = "https://graph.microsoft.com/v1.0"
	DefaultTokenURL = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
	// Scope is what a daemon asks for: the application permissions granted
	// to it (Mail.ReadWrite, for the move).
	Scope = "https://graph.microsoft.com/.default"
)

// Config is the client's configuration, read from the environment with
// caarlos0/env.
type Config struct {
	// TenantID, ClientID and ClientSecret are the app registration's
	// client-credentials grant. Never log the secret.
	TenantID     string `env:"GRAPH_TENANT_ID"`
	ClientID     string `env:"GRAPH_CLIENT_ID"`
	ClientSecret string `env:"GRAPH_CLIENT_SECRET" secret:"true"`
	// APIURL is Graph's base; TokenURL the token endpoint, where {tenant}
	// stands for TenantID. Both can point at a simulator. The token
	// endpoint is given the client secret, and Graph the token: https
	// only, http to a loopback address alone (secureurl.Check).
	APIURL   string `env:"GRAPH_API_URL" envDefault:"https://graph.microsoft.com/v1.0"`
	TokenURL string `env:"GRAPH_TOKEN_URL" envDefault:"https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"`
	// Timeout bounds each request.
	Timeout time.Duration `env:"GRAPH_TIMEOUT" envDefault:"30s"`
}

// Enabled reports whether any Graph credential is set. Without one the
// all-in-one process runs the Graph simulator instead.
func (c Config) Enabled() bool { return c.TenantID != "" || c.ClientID != "" || c.ClientSecret != "" }

// String prints the configuration without its secret.
func (c Config) String() string {
	return fmt.Sprintf("graph.Config{TenantID:%s ClientID:%s APIURL:%s TokenURL:%s Timeout:%s}", c.TenantID, c.ClientID, c.APIURL, c.TokenURL, c.Timeout)
}

// Check refuses every variable that is missing or wrong, each on its own
// (config.Refusal).
func (c Config) Check() error {
	var errs []error
	for _, f := range []struct{ name, value string }{
		{"GRAPH_TENANT_ID", c.TenantID}, {"GRAPH_CLIENT_ID", c.ClientID}, {"GRAPH_CLIENT_SECRET", c.ClientSecret},
	} {
		if strings.TrimSpace(f.value) == "" {
			errs = append(errs, config.Refuse(f.name, "is required"))
		}
	}
	for _, f := range []struct{ name, value string }{{"GRAPH_API_URL", c.APIURL}, {"GRAPH_TOKEN_URL", c.tokenURL()}} {
		if err := checkURL(f.value); err != nil {
			errs = append(errs, config.Refuse(f.name, "%v", err))
		}
	}
	return errors.Join(append(errs, config.Positive("GRAPH_TIMEOUT", c.Timeout))...)
}

// checkURL refuses a URL the client secret or a token must not go to
// (secureurl.Check: https, or http to a loopback address), and one that
// carries credentials or a query of its own.
func checkURL(s string) error {
	if s == "" {
		return errors.New("is not set")
	}
	if err := secureurl.Check(s); err != nil {
		return err
	}
	if u, _ := url.Parse(s); u.User != nil || u.RawQuery != "" {
		return errors.New("must not carry credentials or a query")
	}
	return nil
}

func (c Config) tokenURL() string {
	return strings.ReplaceAll(c.TokenURL, "{tenant}", url.PathEscape(c.TenantID))
}

// Errors. Match them with errors.Is.
var (
	// ErrWait: Graph cannot answer now (a *WaitError).
	ErrWait = errors.New("graph: unavailable")
	// ErrNotFound: Graph answered 404 (ErrorItemNotFound), or a folder named
	// in a path does not exist.
	ErrNotFound = errors.New("graph: not found")
	// ErrTooLarge: an answer was over the size the call allows (a
	// *TooLargeError).
	ErrTooLarge = errors.New("graph: too large")
)

// TooLargeError is an answer over the size a call allows; it was not read
// past that.
type TooLargeError struct {
	Op string
	// Limit is the size allowed; Size the answer's Content-Length, 0 when
	// Graph did not say (the answer ran past Limit).
	Limit, Size int64
}

func (e *TooLargeError) Error() string {
	if e.Size > 0 {
		return fmt.Sprintf("graph: %s: the answer is %d bytes, over the %d allowed", e.Op, e.Size, e.Limit)
	}
	return fmt.Sprintf("graph: %s: the answer runs over the %d bytes allowed", e.Op, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// WaitError is a call Graph could not answer now: throttled (429), a
// server error (5xx, 503 and 504 above all) or no answer at all. It is not
// a failure of what the caller was doing: wait and call again.
type WaitError struct {
	// Status is the HTTP status; 0 when there was no answer.
	Status int
	// After is Graph's Retry-After; 0 when it gave none.
	After time.Duration
	Op    string
	Err   error
}

func (e *WaitError) Error() string {
	what := "no answer"
	if e.Status != 0 {
		what = strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	if e.After > 0 {
		what += ", retry after " + e.After.String()
	}
	if e.Err != nil {
		what += ": " + e.Err.Error()
	}
	return "graph: " + e.Op + ": " + what
}

// RetryAfter is how long Graph asked the caller to wait; 0 when it did not
// say, and the caller's own backoff decides.
func (e *WaitError) RetryAfter() time.Duration { return e.After }

// Is makes errors.Is(err, ErrWait) true.
func (e *WaitError) Is(target error) bool { return target == ErrWait }

// Unwrap returns the transport error, if any.
func (e *WaitError) Unwrap() error { return e.Err }

// APIError is a refusal from Graph ({"error":{"code","message"}}) or from
// the token endpoint ({"error","error_description"}).
type APIError struct {
	Status  int
	Op      string
	Code    string
	Message string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("graph: %s: %d %s: %s: %s", e.Op, e.Status, http.StatusText(e.Status), e.Code, e.Message)
}

// Is makes a 404 match ErrNotFound.
func (e *APIError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound
}

// Client calls Graph for one app registration. It is safe for concurrent use.
type Client struct {
	cfg  Config
	api  *url.URL
	hc   *http.Client
	mu   sync.Mutex
	tok  string
	due  time.Time
	tokM sync.Mutex // one token request at a time
}

// New checks cfg and returns a client; it makes no request. It sends
// through a copy of hc (nil: a client of its own) that follows no
// redirect: a 3xx is an *APIError.
func New(cfg Config, hc *http.Client) (*Client, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	api, _ := url.Parse(strings.TrimRight(cfg.APIURL, "/")) // checked above
	return &Client{cfg: cfg, api: api, hc: secureurl.NoRedirectClient(hc)}, nil
}

// Folder is a mail folder.
type Folder struct {
	ID             string `json:"id"`
	DisplayName    string `json:"displayName"`
	ParentFolderID string `json:"parentFolderId"`
	TotalItemCount int    `json:"totalItemCount"`
}

// Message is what the email path reads of a message in a folder's list
// (the $select of ListPage): all but its body, which GetBody fetches.
type Message struct {
	// ID is the message's id in its current folder: a move changes it.
	ID               string `json:"id"`
	Subject          string `json:"subject"`
	BodyPreview      string `json:"bodyPreview"`
	ReceivedDateTime Time   `json:"receivedDateTime"`
	// InternetMessageID is the RFC 5322 Message-ID: the same in every folder.
	InternetMessageID string `json:"internetMessageId"`
	From              struct {
		EmailAddress struct {
			Name    string `json:"name"`
			Address string `json:"address"`
		} `json:"emailAddress"`
	} `json:"from"`
	// Headers are the message's internet headers, top first.
	Headers Headers `json:"internetMessageHeaders"`
}

// Body is a message's body.
type Body struct {
	// ContentType is "html" or "text".
	ContentType string `json:"contentType"`
	Content     string `json:"content"`
}

// HTML reports whether the body is HTML.
func (b Body) HTML() bool { return strings.EqualFold(b.ContentType, "html") }

// Time is a Graph timestamp (ISO 8601, UTC); one that cannot be read is the
// zero Time rather than a failed page.
type Time struct{ time.Time }

// UnmarshalJSON reads an RFC 3339 timestamp, with or without a zone (no
// zone is UTC).
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) != nil {
		*t = Time{}
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05"} {
		if v, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			t.Time = v.UTC()
			return nil
		}
	}
	*t = Time{}
	return nil
}

// MarshalJSON writes the time as Graph does.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(t.UTC().Format(time.RFC3339))
}

// wellKnown are the folder names Graph takes in place of an id.
var wellKnown = map[string]bool{
	"archive": true, "clutter": true, "conflicts": true, "conversationhistory": true, "deleteditems": true,
	"drafts": true, "inbox": true, "junkemail": true, "localfailures": true, "msgfolderroot": true,
	"outbox": true, "recoverableitemsdeletions": true, "scheduled": true, "searchfolders": true,
	"sentitems": true, "serverfailures": true, "syncissues": true,
}

// ResolveFolder finds a folder of user's mailbox by its path: display
// names separated by "/", from the top of the mailbox ("Prime Jobs/Processed");
// the first may be a well-known name ("Inbox/Prime Jobs"). A name that is
// not there is ErrNotFound, naming it.
func (c *Client) ResolveFolder(ctx context.Context, user, path string) (Folder, error) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	var f Folder
	for i, name := range parts {
		name = strings.TrimSpace(name)
		if name == "" {
			return Folder{}, fmt.Errorf("graph: folder %q: an empty name", path)
		}
		var err error
		switch {
		case i == 0 && wellKnown[strings.ToLower(name)]:
			err = c.get(ctx, "folders.get", "/users/"+url.PathEscape(user)+"/mailFolders/"+strings.ToLower(name), &f)
		default:
			parent := "/users/" + url.PathEscape(user) + "/mailFolders"
			if i > 0 {
				parent += "/" + url.PathEscape(f.ID) + "/childFolders"
			}
			var page struct {
				Value []Folder `json:"value"`
			}
			err = c.get(ctx, "folders.list", parent+"?$filter="+queryEscape("displayName eq '"+strings.ReplaceAll(name, "'", "''")+"'"), &page)
			switch {
			case err == nil && len(page.Value) == 0:
				err = ErrNotFound
			case err == nil:
				f = page.Value[0]
			}
		}
		if errors.Is(err, ErrNotFound) {
			return Folder{}, fmt.Errorf("graph: folder %q: %q %w in %s", path, name, ErrNotFound, where(parts[:i]))
		}
		if err != nil {
			return Folder{}, err
		}
	}
	return f, nil
}

func where(parents []string) string {
	if len(parents) == 0 {
		return "the top of the mailbox"
	}
	return strconv.Quote(strings.Join(parents, "/"))
}

// messageSelect is the $select of ListPage: what the email path reads of a
// message before its body, which can be of any size.
const messageSelect = "id,subject,bodyPreview,receivedDateTime,internetMessageId,from,internetMessageHeaders"

// Page is one page of a folder's messages.
type Page struct {
	Messages []Message
	// Next is the link to the next page (@odata.nextLink), to pass to
	// ListPage; empty on the last.
	Next string
}

// maxPage bounds a page's answer: top messages without their bodies.
const maxPage = 64 << 20

// ListPage returns a page of a folder's messages, oldest received first,
// top a page: the first when link is empty, else the page link names (a
// Page's Next).
func (c *Client) ListPage(ctx context.Context, user, folderID string, top int, link string) (Page, error) {
	path := "/users/" + url.PathEscape(user) + "/mailFolders/" + url.PathEscape(folderID) + "/messages?$select=" + messageSelect +
		"&$orderby=receivedDateTime&$top=" + strconv.Itoa(top)
	if link != "" {
		var err error
		if path, err = c.relative(link); err != nil {
			return Page{}, err
		}
	}
	var page struct {
		Value    []Message `json:"value"`
		NextLink string    `json:"@odata.nextLink"`
	}
	if err := c.do(ctx, "messages.list", http.MethodGet, path, nil, maxPage, &page); err != nil {
		return Page{}, err
	}
	return Page{Messages: page.Value, Next: page.NextLink}, nil
}

// GetBody fetches a message's body, reading no more than limit bytes of
// the answer: a larger one is a *TooLargeError.
func (c *Client) GetBody(ctx context.Context, user, messageID string, limit int64) (Body, error) {
	var m struct {
		Body Body `json:"body"`
	}
	err := c.do(ctx, "messages.get", http.MethodGet, messagePath(user, messageID)+"?$select=body", nil, limit, &m)
	return m.Body, err
}

// Locate returns the id of the folder a message is in: ErrNotFound when no
// message has that id (a move gives it a new one).
func (c *Client) Locate(ctx context.Context, user, messageID string) (folderID string, err error) {
	var m struct {
		ParentFolderID string `json:"parentFolderId"`
	}
	err = c.get(ctx, "messages.get", messagePath(user, messageID)+"?$select=id,parentFolderId", &m)
	return m.ParentFolderID, err
}

func messagePath(user, messageID string) string {
	return "/users/" + url.PathEscape(user) + "/messages/" + url.PathEscape(messageID)
}

// relative turns a nextLink into a path under the API's base, refusing
// one that points anywhere else (the token goes with it).
func (c *Client) relative(link string) (string, error) {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != c.api.Scheme || u.Host != c.api.Host || !strings.HasPrefix(u.Path, c.api.Path+"/") {
		return "", fmt.Errorf("graph: messages.list: @odata.nextLink %q is not under %s", link, c.api.Redacted())
	}
	rel := strings.TrimPrefix(u.EscapedPath(), c.api.EscapedPath())
	if u.RawQuery != "" {
		rel += "?" + u.RawQuery
	}
	return rel, nil
}

// Move files a message in another folder, where it has a new id. Graph
// answers with the whole moved message, body and all, of any size: the
// answer is not read.
func (c *Client) Move(ctx context.Context, user, messageID, destinationID string) error {
	body, _ := json.Marshal(map[string]string{"destinationId": destinationID})
	return c.do(ctx, "messages.move", http.MethodPost, messagePath(user, messageID)+"/move", body, 0, nil)
}

func (c *Client) get(ctx context.Context, op, path string, into any) error {
	return c.do(ctx, op, http.MethodGet, path, nil, maxAnswer, into)
}

// do sends an authorised request and decodes a 2xx answer of at most limit
// bytes into into; with into nil, the answer is not read. A 401 fetches a
// new token once and tries again.
func (c *Client) do(ctx context.Context, op, method, path string, body []byte, limit int64, into any) error {
	for attempt := 0; ; attempt++ {
		tok, err := c.token(ctx)
		if err != nil {
			return err
		}
		if into == nil {
			limit = -1
		}
		status, header, b, err := c.send(ctx, method, c.api.String()+path, body, "application/json", tok, limit)
		var tooLarge *TooLargeError
		if errors.As(err, &tooLarge) {
			tooLarge.Op = op
			return tooLarge
		}
		if err != nil {
			return &WaitError{Op: op, Err: err}
		}
		switch {
		case status >= 200 && status < 300 && into == nil:
			return nil
		case status >= 200 && status < 300:
			if err := json.Unmarshal(b, into); err != nil {
				return fmt.Errorf("graph: %s: decode: %w", op, err)
			}
			return nil
		case status == http.StatusUnauthorized && attempt == 0:
			c.dropToken(tok)
			continue
		}
		return statusError(op, status, header, b)
	}
}

func statusError(op string, status int, header http.Header, body []byte) error {
	if status == http.StatusTooManyRequests || status >= 500 {
		return &WaitError{Status: status, After: retry.ParseRetryAfter(header.Get("Retry-After"), time.Now()), Op: op}
	}
	var doc struct {
		Error json.RawMessage `json:"error"`
		Desc  string          `json:"error_description"`
	}
	e := &APIError{Status: status, Op: op}
	if json.Unmarshal(body, &doc) == nil {
		var inner struct{ Code, Message string }
		if json.Unmarshal(doc.Error, &inner) == nil && inner.Code != "" {
			e.Code, e.Message = inner.Code, inner.Message
		} else if json.Unmarshal(doc.Error, &e.Code) == nil {
			e.Message = doc.Desc
		}
	}
	return e
}

// token returns a token not due for refresh, fetching one when needed.
func (c *Client) token(ctx context.Context) (string, error) {
	c.tokM.Lock()
	defer c.tokM.Unlock()
	c.mu.Lock()
	tok, due := c.tok, c.due
	c.mu.Unlock()
	if tok != "" && time.Now().Before(due) {
		return tok, nil
	}
	form := url.Values{
		"grant_type":    {"client_credentials"},
		"client_id":     {c.cfg.ClientID},
		"client_secret": {c.cfg.ClientSecret},
		"scope":         {Scope},
	}
	status, header, b, err := c.send(ctx, http.MethodPost, c.cfg.tokenURL(), []byte(form.Encode()), "application/x-www-form-urlencoded", "", maxAnswer)
	if err != nil {
		return "", &WaitError{Op: "token", Err: err}
	}
	if status < 200 || status >= 300 {
		return "", statusError("token", status, header, b)
	}
	var t struct {
		AccessToken string      `json:"access_token"`
		ExpiresIn   json.Number `json:"expires_in"`
	}
	if err := json.Unmarshal(b, &t); err != nil || t.AccessToken == "" {
		return "", fmt.Errorf("graph: token: the answer has no access_token")
	}
	lifetime := time.Hour
	if secs, err := t.ExpiresIn.Float64(); err == nil && secs > 0 {
		lifetime = time.Duration(secs * float64(time.Second))
	}
	c.mu.Lock()
	c.tok, c.due = t.AccessToken, time.Now().Add(lifetime-min(lifetime/10, 5*time.Minute))
	c.mu.Unlock()
	return t.AccessToken, nil
}

func (c *Client) dropToken(tok string) {
	c.mu.Lock()
	if c.tok == tok {
		c.tok = ""
	}
	c.mu.Unlock()
}

// maxAnswer bounds how much of an answer is read where the call sets no
// bound of its own: a folder, a token, a moved message.
const maxAnswer = 1 << 20

// send makes one request within the configured timeout, reading at most
// limit bytes of a 2xx answer (a *TooLargeError past it), none when limit
// is negative. Another error is no answer (the transport's error, without
// the URL).
func (c *Client) send(ctx context.Context, method, target string, body []byte, contentType, token string, limit int64) (int, http.Header, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case !ok:
		limit = maxAnswer // an error says what it is in a few hundred bytes
	case limit < 0:
		return resp.StatusCode, resp.Header, nil, nil
	case resp.ContentLength > limit:
		return 0, nil, nil, &TooLargeError{Limit: limit, Size: resp.ContentLength}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return 0, nil, nil, err
	case int64(len(b)) > limit && ok:
		return 0, nil, nil, &TooLargeError{Limit: limit}
	case int64(len(b)) > limit:
		b = b[:limit]
	}
	return resp.StatusCode, resp.Header, b, nil
}

// queryEscape escapes a query value with %20 for spaces, as OData expects.
func queryEscape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
