package mailintake

import (
	"fmt"
	"net/mail"
	"strings"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/graph"
	"golang.org/x/net/publicsuffix"
)

// senders are MAIL_ALLOWED_SENDERS: the addresses, and the domains (an
// entry "@example.com"), whose mail is worked. Anyone can send mail to the
// mailbox, and every JobID read from one costs a Prime call: only Prime's
// notifications are read.
type senders struct {
	addrs, domains map[string]bool
}

// parseSenders reads MAIL_ALLOWED_SENDERS, naming it in its error.
func parseSenders(list []string) (senders, error) {
	s := senders{addrs: map[string]bool{}, domains: map[string]bool{}}
	var bad []string
	for _, e := range list {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
		case strings.HasPrefix(e, "@") && validDomain(e[1:]):
			s.domains[e[1:]] = true
		case !strings.HasPrefix(e, "@") && validAddress(e):
			s.addrs[e] = true
		default:
			bad = append(bad, fmt.Sprintf("%q", e))
		}
	}
	switch {
	case len(bad) > 0:
		return s, config.Refuse("MAIL_ALLOWED_SENDERS", "%s: want addresses (noreply@example.com) or domains (@example.com), comma-separated", strings.Join(bad, ", "))
	case len(s.addrs)+len(s.domains) == 0:
		return s, errNoSenders
	}
	return s, nil
}

// errNoSenders: no sender is allowed, so no mail would be read.
var errNoSenders = config.Refuse("MAIL_ALLOWED_SENDERS", "is required: the addresses (or @domains) Prime's notifications come from; other mail goes to MAIL_FAILED_FOLDER unread")

func validAddress(e string) bool {
	a, err := mail.ParseAddress(e)
	_, domain, _ := strings.Cut(e, "@")
	return err == nil && a.Address == e && validDomain(domain)
}

func validDomain(d string) bool {
	return strings.Contains(d, ".") && !strings.ContainsAny(d, "@ ,;<>") && !strings.HasPrefix(d, ".") && !strings.HasSuffix(d, ".")
}

// refusal says why a message is not worked, "" when it is: its From is not
// an allowed sender; or Exchange's Authentication-Results (graph/headers.go)
// is there and says the message passed neither DMARC for the From's domain
// nor a DKIM signature aligned with it. Where Graph gives no such header
// (a simulator, a message made in the folder), the From is all there is to
// go by.
func (s senders) refusal(m graph.Message) string {
	from := strings.ToLower(strings.TrimSpace(m.From.EmailAddress.Address))
	at := strings.LastIndexByte(from, '@')
	domain := from[at+1:]
	if at < 0 || !(s.addrs[from] || s.domains[domain]) {
		return fmt.Sprintf("refused unread: the sender %q is not in MAIL_ALLOWED_SENDERS", from)
	}
	results, ok := m.Authentication()
	if !ok || authenticated(results, domain) {
		return ""
	}
	var said []string
	for _, r := range results {
		if r.Method == "dmarc" || r.Method == "dkim" {
			said = append(said, r.Method+"="+r.Result)
		}
	}
	return fmt.Sprintf("refused unread: mail from %q passed neither DMARC nor DKIM for %s (Authentication-Results: %s)",
		from, domain, strings.Join(said, ", "))
}

// authenticated reports whether the results say the From's domain sent the
// message: DMARC passed for it, or a DKIM signature passed whose domain is
// aligned with it (aligned).
func authenticated(results []graph.AuthResult, domain string) bool {
	for _, r := range results {
		if r.Result != "pass" {
			continue
		}
		switch r.Method {
		case "dmarc":
			if strings.EqualFold(r.Props["header.from"], domain) {
				return true
			}
		case "dkim":
			if aligned(r.Props["header.d"], domain) {
				return true
			}
		}
	}
	return false
}

// aligned reports whether a DKIM signature's domain (header.d) is aligned
// with the From's domain under RFC 7489's relaxed alignment (§3.1.1): both
// have the same organizational domain, the name just under its public
// suffix (§3.2, by the Public Suffix List). So a sending service's
// em1234.primeeco.tech signs for primeeco.tech, and primeeco.tech for
// notify.primeeco.tech; evilprimeeco.tech, which only ends with the same
// letters, does not, nor does a public suffix (co.uk, github.io) or
// another name under one.
func aligned(signer, from string) bool {
	org := func(d string) string {
		d = strings.ToLower(strings.TrimSpace(d))
		if !validDomain(d) {
			return ""
		}
		o, err := publicsuffix.EffectiveTLDPlusOne(d) // an error for a public suffix itself
		if err != nil {
			return ""
		}
		return o
	}
	o := org(signer)
	return o != "" && o == org(from)
}
