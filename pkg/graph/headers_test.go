package graph_test

import (
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/graph"
)

// FuzzParseAuthResults: an Authentication-Results value is a sender's to
// write (below Exchange's own); whatever it holds, the parse ends, and what
// it reads has a method, lower-case method and result, and nothing of a
// comment.
func FuzzParseAuthResults(f *testing.F) {
	for _, seed := range []string{
		"spf=pass (sender IP is 40.107.22.110) smtp.mailfrom=primeeco.tech; dkim=pass (signature was verified) header.d=primeeco.tech;dmarc=pass action=none header.from=primeeco.tech;compauth=pass reason=100",
		`mx.example.net 1; dkim=fail (bad (nested) \) sig) header.d="a.example"; none`, "((((", `\`, "=;=;", "dkim/1=PASS header.d=x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, r := range graph.ParseAuthResults(v) {
			if r.Method == "" || r.Method != strings.ToLower(r.Method) || r.Result != strings.ToLower(r.Result) {
				t.Fatalf("%q: method %q, result %q", v, r.Method, r.Result)
			}
			if !strings.Contains(v, "(") && strings.ContainsAny(r.Method+r.Result, "( \t;") {
				t.Fatalf("%q: method %q, result %q hold a separator", v, r.Method, r.Result)
			}
			for name := range r.Props {
				if name != strings.ToLower(name) {
					t.Fatalf("%q: property %q", v, name)
				}
			}
		}
	})
}
