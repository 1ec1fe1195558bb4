package mailintake

import (
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/graph"
	"github.com/matryer/is"
)

func TestParseSenders(t *testing.T) {
	is := is.New(t)
	s, err := parseSenders([]string{" NoReply@PrimeECO.tech", "@jobs.primeeco.tech", ""})
	is.NoErr(err)
	is.True(s.addrs["noreply@primeeco.tech"]) // case does not matter
	is.True(s.domains["jobs.primeeco.tech"])
	for _, bad := range [][]string{nil, {""}, {"primeeco.tech"}, {"@"}, {"@localhost"}, {"a@b@c.example"}, {"Prime <noreply@primeeco.tech>"}} {
		_, err := parseSenders(bad)
		is.True(err != nil && strings.Contains(err.Error(), "MAIL_ALLOWED_SENDERS")) // refused, naming the setting
	}
}

// primesOwn is the Authentication-Results of one of Prime's notifications:
// its sending service signs as a subdomain of the From's domain, which
// publishes no DMARC record.
const primesOwn = "spf=pass (sender IP is 198.51.100.7) smtp.mailfrom=em1234.primeeco.tech; dkim=pass (signature was verified) header.d=em1234.primeeco.tech;dmarc=none action=none header.from=primeeco.tech;compauth=pass reason=109"

func TestRefusal(t *testing.T) {
	s, err := parseSenders([]string{"noreply@primeeco.tech", "@notify.prime.example", "noreply@evilprimeeco.tech", "noreply@prime.co.uk", "prime@notify.github.io"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from  string
		authResults []string // top first
		refused     string   // what the refusal says; "" is worked
	}{
		{"an allowed address, no Authentication-Results", "NoReply@primeeco.tech", nil, ""},
		{"an allowed domain", "jobs@notify.prime.example", nil, ""},
		{"another address at an allowed address's domain", "someone@primeeco.tech", nil, "not in MAIL_ALLOWED_SENDERS"},
		{"a subdomain of an allowed domain", "jobs@x.notify.prime.example", nil, "not in MAIL_ALLOWED_SENDERS"},
		{"no address at all", "", nil, "not in MAIL_ALLOWED_SENDERS"},
		{"DMARC passed for the sender's domain", "noreply@primeeco.tech", []string{"spf=pass smtp.mailfrom=primeeco.tech; dkim=none; dmarc=pass action=none header.from=primeeco.tech"}, ""},
		{"DMARC passed for another domain", "noreply@primeeco.tech", []string{"dmarc=pass header.from=elsewhere.example"}, "passed neither DMARC nor DKIM"},
		{"DKIM of the sender's domain", "noreply@primeeco.tech", []string{"dkim=pass header.d=primeeco.tech; dmarc=none header.from=primeeco.tech"}, ""},
		{"DKIM of a parent domain (relaxed alignment)", "jobs@notify.prime.example", []string{"dkim=pass header.d=prime.example"}, ""},
		{"DKIM of a sending service's subdomain (relaxed alignment)", "noreply@primeeco.tech", []string{primesOwn}, ""},
		{"DKIM of a sibling under the same organizational domain", "jobs@notify.prime.example", []string{"dkim=pass header.d=em1234.prime.example; dmarc=none header.from=notify.prime.example"}, ""},
		{"DKIM of a domain that merely ends with the sender's", "noreply@primeeco.tech", []string{"dkim=pass header.d=evilprimeeco.tech; dmarc=none header.from=primeeco.tech"}, "passed neither"},
		{"DKIM of a domain the sender's merely ends with", "noreply@evilprimeeco.tech", []string{"dkim=pass header.d=primeeco.tech"}, "passed neither"},
		{"DKIM of a top-level domain proves nothing", "noreply@primeeco.tech", []string{"dkim=pass header.d=tech"}, "passed neither"},
		{"DKIM of a public suffix proves nothing", "noreply@prime.co.uk", []string{"dkim=pass header.d=co.uk"}, "passed neither"},
		{"DKIM of another name under a public suffix", "noreply@prime.co.uk", []string{"dkim=pass header.d=evil.co.uk"}, "passed neither"},
		{"DKIM of a subdomain under a public suffix", "noreply@prime.co.uk", []string{"dkim=pass header.d=em1.prime.co.uk"}, ""},
		{"DKIM of a sibling under a private public suffix", "prime@notify.github.io", []string{"dkim=pass header.d=evil.github.io"}, "passed neither"},
		{"DKIM of another domain", "noreply@primeeco.tech", []string{"dkim=pass header.d=mailer.example; dmarc=fail header.from=primeeco.tech"}, "dkim=pass, dmarc=fail"},
		{"nothing passed", "noreply@primeeco.tech", []string{"spf=fail; dkim=fail header.d=primeeco.tech; dmarc=fail header.from=primeeco.tech"}, "passed neither"},
		{"SPF alone is not enough", "noreply@primeeco.tech", []string{"spf=pass smtp.mailfrom=primeeco.tech; dmarc=none header.from=primeeco.tech"}, "passed neither"},
		{"a forged pass below Exchange's fail", "noreply@primeeco.tech", []string{"dmarc=fail header.from=primeeco.tech", "dmarc=pass header.from=primeeco.tech"}, "passed neither"},
		{"an unreadable header", "noreply@primeeco.tech", []string{"garbage"}, "passed neither"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			is := is.New(t)
			var m graph.Message
			m.From.EmailAddress.Address = tc.from
			for _, v := range tc.authResults {
				m.Headers = append(m.Headers, graph.Header{Name: "Authentication-Results", Value: v})
			}
			got := s.refusal(m)
			if tc.refused == "" {
				is.Equal(got, "") // worked
				return
			}
			is.True(strings.Contains(got, tc.refused)) // refused, saying why
		})
	}
}
