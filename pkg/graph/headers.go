package graph

import (
	"encoding/json"
	"strings"
)

// What this file assumes of Graph and Exchange Online, beyond
// external-apis.md; each is read tolerantly, so that a shape that differs
// gives "no such header" rather than a failed page:
//
//   - a message's internetMessageHeaders (returned when $select names it)
//     is [{"name":"…","value":"…"}], in the order of the message's header,
//     top first;
//   - the first Authentication-Results header is the one Exchange Online
//     stamped on receipt. A sender can put any header in a message, and
//     those come below the receiving server's, so only the first is
//     believed;
//   - its value is RFC 8601's resinfo list, as Exchange writes it, with or
//     without an authserv-id first: "spf=pass (sender IP is 1.2.3.4)
//     smtp.mailfrom=example.com; dkim=pass (signature was verified)
//     header.d=example.com;dmarc=pass action=none header.from=example.com;
//     compauth=pass reason=100".

// Header is one internet header of a message.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Headers are a message's internet headers, top first. An entry that is
// not a {name, value} object is skipped, and anything but a list reads as
// none.
type Headers []Header

// UnmarshalJSON reads the list tolerantly.
func (h *Headers) UnmarshalJSON(b []byte) error {
	*h = nil
	var raw []json.RawMessage
	if json.Unmarshal(b, &raw) != nil {
		return nil
	}
	for _, r := range raw {
		var one Header
		if json.Unmarshal(r, &one) == nil && one.Name != "" {
			*h = append(*h, one)
		}
	}
	return nil
}

// Values are the values of every header named name (case does not
// matter), top first.
func (h Headers) Values(name string) []string {
	var out []string
	for _, x := range h {
		if strings.EqualFold(x.Name, name) {
			out = append(out, x.Value)
		}
	}
	return out
}

// AuthResult is one method's result in an Authentication-Results header:
// "dkim=pass header.d=example.com" is Method dkim, Result pass and the
// property header.d.
type AuthResult struct {
	Method, Result string
	// Props are the properties by name, lower case ("header.d",
	// "header.from", "smtp.mailfrom", "action").
	Props map[string]string
}

// Authentication is the results of the first Authentication-Results header
// (see the top of this file), and whether the message has one.
func (m Message) Authentication() ([]AuthResult, bool) {
	values := m.Headers.Values("Authentication-Results")
	if len(values) == 0 {
		return nil, false
	}
	return ParseAuthResults(values[0]), true
}

// ParseAuthResults reads an Authentication-Results value (RFC 8601):
// comments in parentheses are dropped, an authserv-id (a first part with no
// "method=result") is skipped, and a part that cannot be read is left out.
// Methods and results are lower case; property values are as written,
// unquoted.
func ParseAuthResults(v string) []AuthResult {
	var out []AuthResult
	for _, part := range strings.Split(dropComments(v), ";") {
		var r AuthResult
		for _, tok := range strings.Fields(part) {
			name, value, ok := strings.Cut(tok, "=")
			if !ok || name == "" {
				continue // an authserv-id, a version, or noise
			}
			value = strings.Trim(value, `"`)
			if r.Method == "" {
				// method[/version]=result
				method, _, _ := strings.Cut(name, "/")
				r.Method, r.Result, r.Props = strings.ToLower(method), strings.ToLower(value), map[string]string{}
				continue
			}
			r.Props[strings.ToLower(name)] = value
		}
		if r.Method != "" {
			out = append(out, r)
		}
	}
	return out
}

// dropComments removes RFC 5322 comments, nested or not, and the quoted
// pairs in them.
func dropComments(s string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && depth > 0:
			i++
		case c == '(':
			depth++
			b.WriteByte(' ')
		case c == ')' && depth > 0:
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}
