package primeflow_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/ethosbuilding/primeflow/pkg/service"
)

// The documentation is README.md, DEVELOPMENT.md and docs/*.md, and the
// other Markdown files of the tree link into it (sql/README.md,
// compose/README.md). These tests keep it navigable: every relative link
// names a file that is there, and every anchor a heading (or an <a id>) of
// the file it points into, as GitHub renders them.

// repoRoot is the repository, from services/primeflow.
var repoRoot = filepath.Join("..", "..")

// markdownFiles are the tree's Markdown files, relative to the root: not
// under a hidden directory (.git, .tools), bin/, data/ or testdata/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, path)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "bin" || name == "data" || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mdLink is one link of a Markdown file.
type mdLink struct {
	line   int
	target string
}

// mdDoc is what the link check needs of a Markdown file: its links and the
// anchors it defines.
type mdDoc struct {
	links   []mdLink
	anchors map[string]bool
}

var (
	fenceRE    = regexp.MustCompile("^\\s*(```|~~~)")
	headingRE  = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	inlineRE   = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDefRE   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(\s|$)`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	codeSpanRE = regexp.MustCompile("(`+)")
	headLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	schemeRE   = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	emphasisRE = regexp.MustCompile(`\*+`)
)

// stripCode removes a line's code spans, keeping their text when keep is
// set (a heading's slug is made from it) and dropping it otherwise (a
// bracket in code is no link).
func stripCode(line string, keep bool) string {
	var b strings.Builder
	for {
		loc := codeSpanRE.FindStringIndex(line)
		if loc == nil {
			b.WriteString(line)
			return b.String()
		}
		ticks := line[loc[0]:loc[1]]
		rest := line[loc[1]:]
		end := -1
		for i := 0; i < len(rest); {
			m := codeSpanRE.FindStringIndex(rest[i:])
			if m == nil {
				break
			}
			if m[1]-m[0] == len(ticks) {
				end = i + m[0]
				break
			}
			i += m[1]
		}
		if end < 0 { // no closing run: the backticks are text
			b.WriteString(line[:loc[1]])
			line = rest
			continue
		}
		b.WriteString(line[:loc[0]])
		if keep {
			b.WriteString(rest[:end])
		}
		line = rest[end+len(ticks):]
	}
}

// slug is the anchor GitHub gives a heading's text: lower case, the
// punctuation dropped (but - and _), each space a hyphen.
func slug(heading string) string {
	text := headLinkRE.ReplaceAllString(stripCode(heading, true), "$1")
	text = emphasisRE.ReplaceAllString(text, "")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.Is(unicode.Mn, r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// parseMarkdown reads a Markdown file's links and anchors; nothing inside a
// fenced block or a code span counts.
func parseMarkdown(text string) mdDoc {
	doc := mdDoc{anchors: map[string]bool{}}
	inFence := false
	var fence string
	lines := strings.Split(text, "\n")
	prose := make([]string, len(lines)) // the lines without code, for the links
	for i, line := range lines {
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			switch {
			case !inFence:
				inFence, fence = true, m[1]
			case m[1] == fence:
				inFence = false
			}
			continue
		}
		if inFence {
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			anchor := s
			for n := 1; doc.anchors[anchor]; n++ {
				anchor = fmt.Sprintf("%s-%d", s, n)
			}
			doc.anchors[anchor] = true
		}
		for _, m := range htmlIDRE.FindAllStringSubmatch(line, -1) {
			doc.anchors[m[1]] = true
		}
		prose[i] = stripCode(line, false)
		if m := refDefRE.FindStringSubmatch(prose[i]); m != nil {
			doc.links = append(doc.links, mdLink{line: i + 1, target: m[1]})
		}
	}
	// A link's text may run over a line break: look for links in the
	// whole text, and count the lines up to each one's target.
	all := strings.Join(prose, "\n")
	for _, m := range inlineRE.FindAllStringSubmatchIndex(all, -1) {
		doc.links = append(doc.links, mdLink{line: strings.Count(all[:m[2]], "\n") + 1, target: all[m[2]:m[3]]})
	}
	slices.SortStableFunc(doc.links, func(a, b mdLink) int { return a.line - b.line })
	return doc
}

// linkCheck resolves links between the Markdown files under root, reading
// each file once.
type linkCheck struct {
	root string
	docs map[string]mdDoc
}

func newLinkCheck(root string) *linkCheck { return &linkCheck{root: root, docs: map[string]mdDoc{}} }

// read parses the Markdown file rel (relative to the root).
func (c *linkCheck) read(rel string) (mdDoc, error) {
	if d, ok := c.docs[rel]; ok {
		return d, nil
	}
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return mdDoc{}, err
	}
	d := parseMarkdown(string(b))
	c.docs[rel] = d
	return d, nil
}

// resolve says why target, a link of the file from, does not resolve, or
// "" when it does; an address with a scheme is not ours to check.
func (c *linkCheck) resolve(from, target string) (string, error) {
	if target == "" || schemeRE.MatchString(target) {
		return "", nil
	}
	path, anchor, _ := strings.Cut(target, "#")
	to := from
	if path != "" {
		to = filepath.ToSlash(filepath.Join(filepath.Dir(from), filepath.FromSlash(path)))
		if strings.HasPrefix(to, "../") || filepath.IsAbs(path) {
			return "outside the repository", nil
		}
		if _, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(to))); err != nil {
			return "no such file", nil
		}
	}
	if anchor == "" {
		return "", nil
	}
	if !strings.HasSuffix(to, ".md") {
		return "an anchor into a file that is not Markdown", nil
	}
	d, err := c.read(to)
	if err != nil {
		return "", err
	}
	if !d.anchors[anchor] {
		return to + " has no heading with that anchor", nil
	}
	return "", nil
}

// brokenLinks checks every link of files (paths relative to root) and
// returns what does not resolve, as file:line: target: why.
func brokenLinks(root string, files []string) ([]string, error) {
	c := newLinkCheck(root)
	var broken []string
	for _, f := range files {
		d, err := c.read(f)
		if err != nil {
			return nil, err
		}
		for _, l := range d.links {
			why, err := c.resolve(f, l.target)
			if err != nil {
				return nil, err
			}
			if why != "" {
				broken = append(broken, fmt.Sprintf("%s:%d: %s: %s", f, l.line, l.target, why))
			}
		}
	}
	return broken, nil
}

// Where each binary's --help sends its reader is there: the documents its
// Help names, and the configuration's.
func TestHelpDocsResolve(t *testing.T) {
	c := newLinkCheck(repoRoot)
	for _, b := range binaries {
		h := b.help()
		if len(h.Docs) == 0 {
			t.Errorf("%s: its Help names no document to read on", h.Name)
		}
		for _, target := range append(h.Docs, service.ConfigurationDoc) {
			why, err := c.resolve("README.md", target)
			if err != nil {
				t.Fatal(err)
			}
			if why != "" {
				t.Errorf("%s --help points at %s: %s", h.Name, target, why)
			}
		}
	}
}

// Every relative link and anchor of the tree's Markdown resolves.
func TestDocsLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	for _, must := range []string{"README.md", "DEVELOPMENT.md", "docs/architecture.md", "docs/operations.md",
		"docs/monitoring.md", "docs/configuration.md", "docs/production.md", "docs/cutover.md"} {
		found := false
		for _, f := range files {
			found = found || f == must
		}
		if !found {
			t.Errorf("%s is not there: the documentation's map (README.md) points at it", must)
		}
	}
	broken, err := brokenLinks(repoRoot, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// The README is what a newcomer reads in ten minutes: the rest has its
// place under docs/ (issue 28).
func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, more than 250: move the detail into docs/ and link it", n)
	}
}

// The link check itself: GitHub's anchors, and what it must not take for
// a link.
func TestDocsLinkCheck(t *testing.T) {
	for heading, want := range map[string]string{
		"A tour with `make run`":                            "a-tour-with-make-run",
		"Prime's budget":                                    "primes-budget",
		"Cutting n8n's email flow over (§7.1)":              "cutting-n8ns-email-flow-over-71",
		"Hand-offs: the outbox":                             "hand-offs-the-outbox",
		"When an order run runs, and the appointment sweep": "when-an-order-run-runs-and-the-appointment-sweep",
		"`SYNC_DRAIN_*` and [links](x.md)":                  "sync_drain_-and-links",
		"Step 3 — the **webhook** path":                     "step-3--the-webhook-path",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
	dir := t.TempDir()
	write := func(name, text string) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n## Run it\n\n## Run it\n\nSee [ops](docs/ops.md#replay), [dup](#run-it-1), [gone](docs/gone.md),\n"+
		"[bad](docs/ops.md#nothing), [self](#top), [web](https://example.com/#x), `[code](nowhere.md)`, [over\ntwo lines](#missing).\n\n"+
		"```sh\n[fenced](nowhere.md)\n```\n\n[ref]: docs/ops.md#lost\n")
	write("docs/ops.md", "# Ops\n\n## Replay\n\nBack to [the top](../README.md#run-it), [outside](../../x.md), [a dir](.).\n")
	broken, err := brokenLinks(dir, []string{"README.md", "docs/ops.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:7: docs/gone.md: no such file",
		"README.md:8: docs/ops.md#nothing: docs/ops.md has no heading with that anchor",
		"README.md:9: #missing: README.md has no heading with that anchor",
		"README.md:15: docs/ops.md#lost: docs/ops.md has no heading with that anchor",
		"docs/ops.md:5: ../../x.md: outside the repository",
	}
	if strings.Join(broken, "\n") != strings.Join(want, "\n") {
		t.Errorf("broken links:\n%s\nwant:\n%s", strings.Join(broken, "\n"), strings.Join(want, "\n"))
	}
}
