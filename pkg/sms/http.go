package sms

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Config is HTTPSender's configuration, read from the environment with
// caarlos0/env (pkg/config.Parse).
type Config struct {
	// URL is where each message is posted (the existing SMS flow's webhook).
	URL string `env:"SMS_SEND_URL"`
	// AuthHeader names the header that carries AuthValue.
	AuthHeader string `env:"SMS_SEND_AUTH_HEADER" envDefault:"Authorization"`
	// AuthValue, when set, is sent in AuthHeader (for example "Basic …" or a
	// token). A secret: never logged.
	AuthValue string `env:"SMS_SEND_AUTH" secret:"true"`
	// Timeout bounds one post (SendTimeout).
	Timeout time.Duration `env:"SMS_SEND_TIMEOUT" envDefault:"15s"`
}

// SendTimeout is how long HTTPSender gives one post: Timeout, or 15s when
// it is not above zero.
func (c Config) SendTimeout() time.Duration {
	if c.Timeout <= 0 {
		return 15 * time.Second
	}
	return c.Timeout
}

// LogValue logs the configuration without its secret, and the URL without
// its query or password, where a key may hide.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redactURL(c.URL)),
		slog.String("auth_header", c.AuthHeader),
		slog.Bool("auth_set", c.AuthValue != ""),
		slog.Duration("timeout", c.Timeout),
	)
}

// String prints the configuration without its secrets.
func (c Config) String() string {
	return fmt.Sprintf("sms.Config{URL:%s AuthHeader:%s AuthSet:%t Timeout:%s}",
		redactURL(c.URL), c.AuthHeader, c.AuthValue != "", c.Timeout)
}

// IdempotencyKeyHeader carries "primeflow-sms-<id>" on every post, the same
// on each attempt of a message, so the receiving end can drop a resend.
const IdempotencyKeyHeader = "Idempotency-Key"

// Payload is the JSON body HTTPSender posts. The existing SMS flow's shape
// was not available: this is the reading, kept in one place to correct.
type Payload struct {
	// ID is the smsQueue row; Reference is "primeflow-sms-<id>".
	ID        int64  `json:"id"`
	Reference string `json:"reference"`
	To        string `json:"to"`
	Message   string `json:"message"`
	Source    string `json:"source,omitempty"`
	Attempt   int    `json:"attempt"`
}

// HTTPSender posts each message as JSON to a URL: 2xx is sent; 408, 429 and
// 5xx, and any failure to get an answer, are worth a retry; any other status
// is ErrPermanent.
type HTTPSender struct {
	url        string
	redacted   string
	authHeader string
	authValue  string
	hc         *http.Client
}

// NewHTTPSender makes a sender for cfg. hc nil is a client with cfg.Timeout.
func NewHTTPSender(cfg Config, hc *http.Client) (*HTTPSender, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("sms: SMS_SEND_URL %q is not an http(s) URL", redactURL(cfg.URL))
	}
	if hc == nil {
		hc = &http.Client{Timeout: cfg.SendTimeout()}
	}
	header := cfg.AuthHeader
	if header == "" {
		header = "Authorization"
	}
	return &HTTPSender{url: cfg.URL, redacted: redactURL(cfg.URL), authHeader: header, authValue: cfg.AuthValue, hc: hc}, nil
}

// Reference is the reference and idempotency key of a message.
func Reference(id int64) string { return "primeflow-sms-" + strconv.FormatInt(id, 10) }

// Send posts one message.
func (s *HTTPSender) Send(ctx context.Context, m Message) error {
	if strings.TrimSpace(m.To) == "" {
		return Permanent(fmt.Errorf("sms %d: no recipient", m.ID))
	}
	body, err := json.Marshal(Payload{ID: m.ID, Reference: Reference(m.ID), To: m.To, Message: m.Body, Source: m.Source, Attempt: m.Attempt})
	if err != nil {
		return Permanent(fmt.Errorf("sms %d: %w", m.ID, err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return Permanent(fmt.Errorf("sms %d: post to %s: request: %w", m.ID, s.redacted, unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, Reference(m.ID))
	if s.authValue != "" {
		req.Header.Set(s.authHeader, s.authValue)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		// url.Error quotes the URL, query and all: keep only its cause.
		return fmt.Errorf("sms %d: post to %s: %w", m.ID, s.redacted, unwrapURLError(err))
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyInError+1))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("sms %d: post to %s: HTTP %d: %s", m.ID, s.redacted, resp.StatusCode, bodyInError(head))
	switch {
	case resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return err
	default:
		return Permanent(err)
	}
}

// maxBodyInError is how much of an error answer's body its error keeps: what
// an endpoint says is wrong, not a whole HTML error page in the log.
const maxBodyInError = 200

// bodyInError is the start of an answer's body on one line: at most its
// first maxBodyInError bytes (a character cut there dropped), then "…" when
// there was more.
func bodyInError(body []byte) string {
	more := len(body) > maxBodyInError
	body = body[:min(len(body), maxBodyInError)]
	text := strings.Join(strings.Fields(strings.ToValidUTF8(string(body), "")), " ")
	if more {
		text += "…"
	}
	return text
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// redactURL hides the user information, query and fragment of a URL, where
// keys hide; what is left says where messages go.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}
