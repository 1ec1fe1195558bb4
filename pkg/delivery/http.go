package delivery

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
	"strings"
	"time"
)

// HTTPConfig is where a kind's rows are posted as JSON, read with
// caarlos0/env under the kind's prefix (`envPrefix:"SMS_"` reads
// SMS_SEND_URL, …).
type HTTPConfig struct {
	// URL is where each row is posted.
	URL string `env:"SEND_URL"`
	// AuthHeader names the header that carries AuthValue.
	AuthHeader string `env:"SEND_AUTH_HEADER" envDefault:"Authorization"`
	// AuthValue, when set, is sent in AuthHeader (for example "Basic …" or a
	// token). A secret: never logged.
	AuthValue string `env:"SEND_AUTH" secret:"true"`
	// Timeout bounds one post (SendTimeout).
	Timeout time.Duration `env:"SEND_TIMEOUT" envDefault:"15s"`
}

// SendTimeout is how long a Poster gives one post: Timeout, or 15s when it
// is not above zero.
func (c HTTPConfig) SendTimeout() time.Duration {
	if c.Timeout <= 0 {
		return 15 * time.Second
	}
	return c.Timeout
}

// LogValue logs the configuration without its secret, and the URL without
// its query or password, where a key may hide.
func (c HTTPConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redactURL(c.URL)),
		slog.String("auth_header", c.AuthHeader),
		slog.Bool("auth_set", c.AuthValue != ""),
		slog.Duration("timeout", c.Timeout),
	)
}

// String prints the configuration without its secrets.
func (c HTTPConfig) String() string {
	return fmt.Sprintf("delivery.HTTPConfig{URL:%s AuthHeader:%s AuthSet:%t Timeout:%s}",
		redactURL(c.URL), c.AuthHeader, c.AuthValue != "", c.Timeout)
}

// IdempotencyKeyHeader carries a row's reference on every post, the same on
// each attempt, so the receiving end can drop a resend.
const IdempotencyKeyHeader = "Idempotency-Key"

// Poster posts JSON to one URL: 2xx is accepted; 408, 429 and 5xx, and any
// failure to get an answer, are worth a retry; any other status is
// ErrPermanent.
type Poster struct {
	url        string
	redacted   string
	authHeader string
	authValue  string
	hc         *http.Client
}

// NewPoster makes a poster for cfg; urlVar names the URL's variable
// ("SMS_SEND_URL") in the error for one that is not http(s). hc nil is a
// client with cfg's timeout.
func NewPoster(cfg HTTPConfig, urlVar string, hc *http.Client) (*Poster, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q is not an http(s) URL", urlVar, redactURL(cfg.URL))
	}
	if hc == nil {
		hc = &http.Client{Timeout: cfg.SendTimeout()}
	}
	header := cfg.AuthHeader
	if header == "" {
		header = "Authorization"
	}
	return &Poster{url: cfg.URL, redacted: redactURL(cfg.URL), authHeader: header, authValue: cfg.AuthValue, hc: hc}, nil
}

// Post posts body as JSON with key as its Idempotency-Key.
func (p *Poster) Post(ctx context.Context, key string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(b))
	if err != nil {
		return Permanent(fmt.Errorf("post to %s: request: %w", p.redacted, unwrapURLError(err)))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(IdempotencyKeyHeader, key)
	if p.authValue != "" {
		req.Header.Set(p.authHeader, p.authValue)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		// url.Error quotes the URL, query and all: keep only its cause.
		return fmt.Errorf("post to %s: %w", p.redacted, unwrapURLError(err))
	}
	defer resp.Body.Close()
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxBodyInError+1))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // let the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	err = fmt.Errorf("post to %s: HTTP %d: %s", p.redacted, resp.StatusCode, bodyInError(head))
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
// keys hide; what is left says where rows go.
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
