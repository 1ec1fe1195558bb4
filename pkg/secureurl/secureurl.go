// Package secureurl is the rule for a URL primeflow sends a secret to — a
// send queue's SEND_URL and its auth header, child-mirror's
// AI_SUMMARY_NUDGE_URL and the key it may carry, Graph's and Prime's token
// endpoints and the client secret and password they are given, Prime's and
// Graph's APIs and their bearer tokens, OptimoRoute's API and the key in
// its query: https, or plain http to this machine alone (a simulator,
// a proxy on the host), and no redirect followed.
package secureurl

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Check refuses a URL that is not https, or http to a loopback address,
// without repeating it (the URL may hold a key). The caller names its
// variable (config.Refuse).
func Check(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "":
		return errors.New("is not an http(s) URL")
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return errors.New("is not an http(s) URL")
	case !loopback(u.Hostname()):
		return errors.New("must be https: plain http is allowed only to a loopback address (localhost, 127.0.0.0/8, ::1)")
	}
	return nil
}

// loopback reports whether host names this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// NoRedirects is an http.Client's CheckRedirect that follows no redirect:
// the 3xx is the answer. A redirect would carry a request's secret (its
// auth header, a key in its URL, a 307's form body with a client secret)
// to wherever the answer points.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// NoRedirectClient is a copy of hc that follows no redirect (NoRedirects),
// or such a client of its own when hc is nil; hc itself is left as it is.
func NoRedirectClient(hc *http.Client) *http.Client {
	var c http.Client
	if hc != nil {
		c = *hc
	}
	c.CheckRedirect = NoRedirects
	return &c
}
