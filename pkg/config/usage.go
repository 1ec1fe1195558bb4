package config

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/caarlos0/env/v11"
)

// Variable is one environment variable a configuration reads.
type Variable struct {
	Name string
	// Default is the value an unset variable takes ("" when it has none).
	Default string
	// Secret: the variable may instead be given as a file (Name_FILE, see
	// Parse). Only its default, from the code, is ever shown: Variables
	// never reads the environment.
	Secret bool
}

// Variables lists the variables cfgs read (each a struct with `env` tags,
// or a pointer to one), in the order their fields are declared, each once:
// a variable that several configurations read (OPTIMO_TIMEZONE) is listed
// where it first appears. It is what a binary's --help prints, taken from
// the same tags Parse reads, so the list cannot drift from the code.
func Variables(cfgs ...any) ([]Variable, error) {
	var out []Variable
	seen := map[string]bool{}
	for _, cfg := range cfgs {
		ptr := cfg
		if v := reflect.ValueOf(cfg); v.Kind() != reflect.Pointer {
			p := reflect.New(v.Type())
			p.Elem().Set(v)
			ptr = p.Interface()
		}
		params, err := env.GetFieldParams(ptr)
		if err != nil {
			return nil, fmt.Errorf("config: %T: %w", cfg, err)
		}
		secret := SecretVariables(ptr)
		for _, p := range params {
			if seen[p.Key] {
				continue
			}
			seen[p.Key] = true
			out = append(out, Variable{Name: p.Key, Default: p.DefaultValue, Secret: slices.Contains(secret, p.Key)})
		}
	}
	return out, nil
}

// WriteVariables writes vars as a table: each variable with its default,
// and, for a secret, the file variable that may give it instead.
func WriteVariables(w io.Writer, vars []Variable) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT")
	for _, v := range vars {
		def := v.Default
		if def == "" {
			def = "-"
		}
		note := ""
		if v.Secret {
			note = "secret; or " + v.Name + FileSuffix + ": a file that holds it"
		}
		fmt.Fprintln(tw, strings.TrimRight("  "+v.Name+"\t"+def+"\t"+note, "\t"))
	}
	return tw.Flush()
}
