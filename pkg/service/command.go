package service

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ethosbuilding/primeflow/pkg/config"
	"github.com/ethosbuilding/primeflow/pkg/version"
)

// Help is what a binary says of itself on --help.
type Help struct {
	// Name is the binary's (bin/<Name>).
	Name string
	// Summary says what it is and does, in a few lines.
	Summary string
	// Configs are the configurations its Main reads, each a struct with
	// `env` tags: --help lists their variables and defaults from the same
	// tags config.Parse reads.
	Configs []any
	// Docs name the documents that tell how to run it, relative to the
	// repository's root (docs/production.md, README.md#a-tour-with-make-run);
	// the docs tests check that each resolves.
	Docs []string
}

// Variables are the environment variables the binary reads.
func (h Help) Variables() ([]config.Variable, error) { return config.Variables(h.Configs...) }

// Write writes the help text.
func (h Help) Write(w io.Writer) error {
	vars, err := h.Variables()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\n\nUsage: %s [--help | --version]\n\n", wrap(h.Name+" — "+h.Summary, 78), h.Name)
	fmt.Fprintf(w, "It runs until SIGINT or SIGTERM, configured by the environment:\n\n")
	if err := config.WriteVariables(w, vars); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nWhat each variable means: %s.\n", ConfigurationDoc)
	if len(h.Docs) > 0 {
		fmt.Fprintf(w, "How to run it: %s.\n", strings.Join(h.Docs, ", "))
	}
	fmt.Fprintf(w, "\n%s\n", version.String(h.Name))
	return nil
}

// wrap breaks s into lines of at most width characters, between words.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		l := utf8.RuneCountInString(w)
		switch {
		case n == 0:
		case n+1+l > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += l
	}
	return b.String()
}

// ConfigurationDoc is where every variable is described (generated from
// the same tags as --help: services/primeflow's TestConfigurationDoc).
const ConfigurationDoc = "docs/configuration.md"

// Command reads a service binary's command line before it starts anything:
// --help (-h, help) writes h on stdout, --version (version) the version,
// commit and build date, and a service takes no other argument (the usage
// goes to stderr, exit code 2). done is false when there is nothing on the
// command line: the binary goes on to run, and code means nothing.
func Command(args []string, stdout, stderr io.Writer, h Help) (done bool, code int) {
	if len(args) == 0 {
		return false, 0
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if err := h.Write(stdout); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", h.Name, err)
			return true, 1
		}
		return true, 0
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, version.String(h.Name))
		return true, 0
	}
	fmt.Fprintf(stderr, "%s: unexpected argument %q: it takes none, only its environment (%s --help lists it)\nUsage: %s [--help | --version]\n",
		h.Name, args[0], h.Name, h.Name)
	return true, 2
}
