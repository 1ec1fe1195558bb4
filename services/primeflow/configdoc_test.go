package primeflow_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/service"
	"github.com/ethosbuilding/primeflow/services/primectl"
)

// docs/configuration.md is generated from the Config structs' tags, the
// same tags config.Parse reads and --help prints: its tables' variable,
// default and "read by" columns are written here, and only the meanings
// are kept from the file. `make docs` writes it (this test with -update).

var updateDocs = flag.Bool("update", false, "write docs/configuration.md anew from the Config structs' tags")

// configDocHeader is the header of every table the generator owns.
const configDocHeader = "| variable | default | read by | meaning |"

// docBinary is a binary and the variables it reads, in the order its
// configurations declare them.
type docBinary struct {
	name string
	vars []config.Variable
}

// docBinaries are the binaries make build makes: the services and
// bin/primeflow from their Help (TestHelpListsWhatMainReads checks that a
// Help lists what its Main reads), and primectl from its Config.
func docBinaries(t *testing.T) []docBinary {
	t.Helper()
	var out []docBinary
	for _, b := range binaries {
		h := b.help()
		vars, err := h.Variables()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, docBinary{h.Name, vars})
	}
	vars, err := config.Variables(primectl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, docBinary{"primectl", vars})
}

// docVar is a variable as the documentation shows it.
type docVar struct {
	name    string
	secret  bool
	readers []string          // in docBinaries' order
	def     map[string]string // each reader's default
}

// configVars gathers each variable from the binaries that read it.
func configVars(bins []docBinary) map[string]*docVar {
	vars := map[string]*docVar{}
	for _, b := range bins {
		for _, v := range b.vars {
			d := vars[v.Name]
			if d == nil {
				d = &docVar{name: v.Name, def: map[string]string{}}
				vars[v.Name] = d
			}
			d.secret = d.secret || v.Secret
			d.readers = append(d.readers, b.name)
			d.def[b.name] = v.Default
		}
	}
	return vars
}

// docRow is one row of a generated table: the variables its first column
// names, and the meaning written by hand.
type docRow struct {
	names   []string
	meaning string
}

// docTable is a generated table of the file: its rows, and the lines of
// the file it spans (the header and the rule included).
type docTable struct {
	from, to int // lines[from:to]
	rows     []docRow
}

var (
	cellSepRE  = regexp.MustCompile(`(^|[^\\])\|`)
	fileTwinRE = regexp.MustCompile("\\(or `[A-Z][A-Z0-9_]*`\\)")
	varNameRE  = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
)

// splitCells splits a table row into its cells, at the bars that are not
// escaped.
func splitCells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	if strings.HasSuffix(line, "|") && !strings.HasSuffix(line, `\|`) {
		line = line[:len(line)-1]
	}
	var cells []string
	for {
		loc := cellSepRE.FindStringIndex(line)
		if loc == nil {
			return append(cells, strings.TrimSpace(line))
		}
		end := loc[1] - 1 // the bar
		cells = append(cells, strings.TrimSpace(line[:end]))
		line = line[end+1:]
	}
}

// parseConfigDoc finds the generated tables of the file's lines.
func parseConfigDoc(lines []string) ([]docTable, error) {
	var tables []docTable
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != configDocHeader {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(strings.TrimSpace(lines[i+1]), "|---") {
			return nil, fmt.Errorf("line %d: the table's header is not followed by its rule", i+1)
		}
		tb := docTable{from: i}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|"); j++ {
			cells := splitCells(lines[j])
			if len(cells) != 4 {
				return nil, fmt.Errorf("line %d: %d cells, want 4 (variable, default, read by, meaning; a | in a meaning is written \\|)", j+1, len(cells))
			}
			var names []string
			for _, m := range varNameRE.FindAllStringSubmatch(fileTwinRE.ReplaceAllString(cells[0], ""), -1) {
				names = append(names, m[1])
			}
			tb.rows = append(tb.rows, docRow{names: names, meaning: cells[3]})
		}
		tb.to = j
		tables = append(tables, tb)
		i = j - 1
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("no table headed %q", configDocHeader)
	}
	return tables, nil
}

// renderConfigDoc is the file as the code says it should be: the generated
// tables' rows rewritten from vars, with the meanings and everything
// outside the tables kept. A variable no row names gets a row of its own,
// after the row of the variable its first reader declares before it. It
// also returns what a person must put right: a row without a meaning, a
// row whose variables have different readers.
func renderConfigDoc(text string, bins []docBinary, vars map[string]*docVar) (string, []string, error) {
	lines := strings.Split(text, "\n")
	tables, err := parseConfigDoc(lines)
	if err != nil {
		return "", nil, err
	}
	// Each variable's place: the first row naming it; names no Config
	// reads, and second mentions, are dropped.
	type place struct{ table, row int }
	at := map[string]place{}
	for ti := range tables {
		for ri, r := range tables[ti].rows {
			var kept []string
			for _, n := range r.names {
				if _, known := vars[n]; known && !slices.Contains(kept, n) {
					if _, placed := at[n]; !placed {
						at[n] = place{ti, ri}
						kept = append(kept, n)
					}
				}
			}
			tables[ti].rows[ri].names = kept
		}
	}
	// The variables no row names, each after its predecessor in the first
	// binary that reads it (or at the top of the first table).
	added := map[place][]string{} // after the row at place
	for _, b := range bins {
		for i, v := range b.vars {
			if _, placed := at[v.Name]; placed {
				continue
			}
			p := place{0, -1}
			for j := i - 1; j >= 0; j-- {
				if q, ok := at[b.vars[j].Name]; ok {
					p = q
					break
				}
			}
			added[p] = append(added[p], v.Name)
			at[v.Name] = p
		}
	}
	var problems []string
	var out []string
	prev := 0
	for ti, tb := range tables {
		out = append(out, lines[prev:tb.from]...)
		out = append(out, configDocHeader, "|---|---|---|---|")
		var rows []docRow
		for _, n := range added[place{ti, -1}] {
			rows = append(rows, docRow{names: []string{n}})
		}
		for ri, r := range tb.rows {
			if len(r.names) > 0 {
				rows = append(rows, r)
			}
			for _, n := range added[place{ti, ri}] {
				rows = append(rows, docRow{names: []string{n}})
			}
		}
		for _, r := range rows {
			line, why := renderConfigRow(r, vars)
			problems = append(problems, why...)
			out = append(out, line)
		}
		prev = tb.to
	}
	out = append(out, lines[prev:]...)
	return strings.Join(out, "\n"), problems, nil
}

// renderConfigRow is a row of a generated table, and what is wrong with it.
func renderConfigRow(r docRow, vars map[string]*docVar) (string, []string) {
	var names, defs []string
	var problems []string
	first := vars[r.names[0]]
	for _, n := range r.names {
		v := vars[n]
		name := "`" + n + "`"
		if v.secret {
			name += " (or `" + n + config.FileSuffix + "`)"
		}
		names = append(names, name)
		defs = append(defs, renderDefault(v))
		if !slices.Equal(v.readers, first.readers) {
			problems = append(problems, fmt.Sprintf("%s (read by %s) shares a row with %s (read by %s): give it a row of its own",
				n, strings.Join(v.readers, ", "), first.name, strings.Join(first.readers, ", ")))
		}
	}
	if r.meaning == "" {
		problems = append(problems, fmt.Sprintf("%s has no meaning: write it in its row", strings.Join(r.names, ", ")))
	}
	return fmt.Sprintf("| %s | %s | %s | %s |", strings.Join(names, ", "), strings.Join(defs, ", "), renderReaders(first.readers), r.meaning), problems
}

// renderDefault is a variable's default; where its readers differ, the
// first reader's, then each other one's.
func renderDefault(v *docVar) string {
	show := func(d string) string {
		if d == "" {
			return "—"
		}
		return "`" + d + "`"
	}
	main := v.def[v.readers[0]]
	others := map[string][]string{}
	var order []string
	for _, r := range v.readers {
		if d := v.def[r]; d != main {
			if others[d] == nil {
				order = append(order, d)
			}
			others[d] = append(others[d], r)
		}
	}
	s := show(main)
	for _, d := range order {
		s += fmt.Sprintf(" (%s: %s)", strings.Join(others[d], ", "), show(d))
	}
	return s
}

// renderReaders names the binaries that read a variable: "every service"
// when the nine services and primeflow all do.
func renderReaders(readers []string) string {
	all := true
	for _, b := range binaries {
		all = all && slices.Contains(readers, b.help().Name)
	}
	if !all {
		return strings.Join(readers, ", ")
	}
	if slices.Contains(readers, "primectl") {
		return "every service, primectl"
	}
	return "every service"
}

// docs/configuration.md is what the Config structs' tags say: every
// variable a binary reads is in it, with its default and its readers, and
// no variable that none reads; each has a meaning. With -update it writes
// the file instead (make docs).
func TestConfigurationDoc(t *testing.T) {
	path := filepath.Join(repoRoot, filepath.FromSlash(service.ConfigurationDoc))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bins := docBinaries(t)
	vars := configVars(bins)
	want, problems, err := renderConfigDoc(string(b), bins, vars)
	if err != nil {
		t.Fatalf("%s: %v", service.ConfigurationDoc, err)
	}
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	} else if want != string(b) {
		tables, err := parseConfigDoc(strings.Split(string(b), "\n"))
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, tb := range tables {
			for _, r := range tb.rows {
				for _, n := range r.names {
					listed[n] = true
					if vars[n] == nil {
						t.Errorf("%s names %s, which no Config reads", service.ConfigurationDoc, n)
					}
				}
			}
		}
		for _, bin := range bins {
			for _, v := range bin.vars {
				if !listed[v.Name] {
					t.Errorf("%s reads %s, which %s does not have", bin.name, v.Name, service.ConfigurationDoc)
					listed[v.Name] = true
				}
			}
		}
		t.Errorf("%s is stale: `make docs` writes it from the Config structs' tags (then write the meaning of any new row)\n%s",
			service.ConfigurationDoc, lineDiff(string(b), want))
	}
	for _, p := range problems {
		t.Errorf("%s: %s", service.ConfigurationDoc, p)
	}
}

// lineDiff lists the lines only one of a and b has, for a failure message.
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// The generator keeps the meanings and the prose, rewrites the defaults
// and readers, drops what no Config reads, places a new variable after its
// predecessor, and says what a person must write.
func TestConfigurationDocGenerator(t *testing.T) {
	bins := []docBinary{
		{"ingest", []config.Variable{{Name: "A_ADDR", Default: ":1"}, {Name: "A_KEY", Secret: true}, {Name: "A_NEW", Default: "5"}}},
		{"primectl", []config.Variable{{Name: "A_ADDR", Default: ":2"}, {Name: "B_ONLY"}}},
	}
	text := "# Title\n\nProse stays.\n\n" + configDocHeader + "\n|---|---|---|---|\n" +
		"| `A_ADDR` | old | old | where it listens, `a\\|b` |\n" +
		"| `A_KEY` (or `A_KEY_FILE`), `GONE` | | | the key |\n" +
		"| `GONE_TOO` | | | dropped |\n" +
		"\nMore prose.\n\n" + configDocHeader + "\n|---|---|---|---|\n| `B_ONLY`, `A_ADDR` | | | b |\n"
	got, problems, err := renderConfigDoc(text, bins, configVars(bins))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\nProse stays.\n\n" + configDocHeader + "\n|---|---|---|---|\n" +
		"| `A_ADDR` | `:1` (primectl: `:2`) | ingest, primectl | where it listens, `a\\|b` |\n" +
		"| `A_KEY` (or `A_KEY_FILE`) | — | ingest | the key |\n" +
		"| `A_NEW` | `5` | ingest |  |\n" +
		"\nMore prose.\n\n" + configDocHeader + "\n|---|---|---|---|\n| `B_ONLY` | — | primectl | b |\n"
	if got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
	if want := []string{"A_NEW has no meaning: write it in its row"}; !slices.Equal(problems, want) {
		t.Errorf("problems %q, want %q", problems, want)
	}
	mixed := "x\n\n" + configDocHeader + "\n|---|---|---|---|\n| `A_ADDR`, `A_KEY`, `A_NEW`, `B_ONLY` | | | m |\n"
	_, problems, err = renderConfigDoc(mixed, bins, configVars(bins))
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 3 || !strings.Contains(problems[0], "A_KEY (read by ingest) shares a row with A_ADDR (read by ingest, primectl)") {
		t.Errorf("problems %q: want A_KEY, A_NEW and B_ONLY told to take rows of their own", problems)
	}
	if _, _, err := renderConfigDoc("no table here\n", bins, configVars(bins)); err == nil {
		t.Error("a file without the table rendered")
	}
	if _, _, err := renderConfigDoc(configDocHeader+"\n|---|---|---|---|\n| `A_ADDR` | two cells |\n", bins, configVars(bins)); err == nil {
		t.Error("a row of two cells rendered")
	}
}
