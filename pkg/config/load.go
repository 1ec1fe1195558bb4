package config

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
)

// Part is one configuration a binary reads, and the check it runs on it:
// Read makes one, Load reads them.
type Part struct {
	cfg   any
	check func() error
}

// Read is a Part: cfg, filled from the environment, then checked with check
// (nil for none; usually the Config's Validate, as a method expression:
// config.Read(&cfg, Config.Validate)). Load runs the checks once every part
// is read, so a check may look at another part (dry runs, say).
func Read[C any](cfg *C, check func(C) error) Part {
	p := Part{cfg: cfg}
	if check != nil {
		p.check = func() error { return check(*cfg) }
	}
	return p
}

// Check is a Part that reads nothing and runs check once every part is
// read: a rule over several configurations.
func Check(check func() error) Part { return Part{check: check} }

// Load reads every part from getenv and then runs each part's check: what a
// binary does first, before it binds a port or writes a file. Every setting
// refused — a value of the wrong form (a duration that is not one), a
// secret given twice, or a Refusal of a check — is in the one *Error it
// returns, each once, naming its variable and the value it had (never a
// secret's). A value that cannot be read leaves its field at its default,
// so the checks see the others as given and say nothing more of it.
func Load(getenv func(string) string, parts ...Part) error {
	rd := reading{env: map[string]string{}, files: map[string]string{}, vars: map[string]known{}}
	for _, p := range parts {
		if p.cfg == nil {
			continue
		}
		if err := rd.learn(p.cfg); err != nil {
			return err
		}
	}
	rd.lookup(getenv)
	for _, p := range parts {
		if p.cfg != nil {
			rd.fill(p.cfg)
		}
	}
	for _, p := range parts {
		if p.check != nil {
			rd.checked(p.check())
		}
	}
	return rd.err()
}

// Error is every setting Load refused.
type Error struct {
	// Refused are the refusals, in the order the variables are declared;
	// each is a *Refusal or, for a check that named no variable, its error.
	Refused []error
}

// Error is the one refusal, or a line for each under a count.
func (e *Error) Error() string {
	if len(e.Refused) == 1 {
		return e.Refused[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d settings refused:", len(e.Refused))
	for _, r := range e.Refused {
		b.WriteString("\n  ")
		b.WriteString(r.Error())
	}
	return b.String()
}

// Unwrap is the refusals, for errors.Is and errors.As.
func (e *Error) Unwrap() []error { return e.Refused }

// known is what the tags say of a variable.
type known struct {
	order      int
	def        string
	hasDefault bool
	secret     bool
}

// reading is one Load: the variables the parts read, their values, and
// what has been refused.
type reading struct {
	vars map[string]known
	// env holds the variables that are set, secrets read from their files;
	// files, the _FILE twins that are set (paths, which are no secret).
	env, files map[string]string
	// unread are the variables whose value could not be read or had to be
	// refused before a check saw it.
	unread map[string]bool
	// refused are the refusals of reading; checks, those of the checks.
	refused, checks []error
}

// learn notes cfg's variables.
func (rd *reading) learn(cfg any) error {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return fmt.Errorf("config: %T: %w", cfg, err)
	}
	secret := SecretVariables(cfg)
	for _, p := range params {
		if _, seen := rd.vars[p.Key]; seen {
			continue
		}
		rd.vars[p.Key] = known{order: len(rd.vars), def: p.DefaultValue, hasDefault: p.HasDefaultValue, secret: slices.Contains(secret, p.Key)}
	}
	return nil
}

// lookup reads every variable from getenv, and a secret's file when its
// _FILE twin names one.
func (rd *reading) lookup(getenv func(string) string) {
	for _, key := range slices.Sorted(maps.Keys(rd.vars)) {
		v := getenv(key)
		if v != "" {
			rd.env[key] = v
		}
		if !rd.vars[key].secret {
			continue
		}
		path := getenv(key + FileSuffix)
		if path != "" {
			rd.files[key+FileSuffix] = path
		}
		switch {
		case path == "":
		case v != "":
			rd.refuse(key, key, "%s is set too: give the secret one way", key+FileSuffix)
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err // the path is shown as the value
				}
				rd.refuse(key, key+FileSuffix, "cannot be read: %v", err)
				continue
			}
			if v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"); v != "" {
				rd.env[key] = v
			}
		}
	}
}

// refuse refuses the value of key before any check runs, naming variable
// (key, or its _FILE twin).
func (rd *reading) refuse(key, variable, format string, args ...any) {
	if rd.unread == nil {
		rd.unread = map[string]bool{}
	}
	if rd.unread[key] {
		return
	}
	rd.unread[key] = true
	rd.refused = append(rd.refused, Refuse(variable, format, args...))
}

// fill parses cfg from the values read. A variable whose value cannot be
// read into its field is refused, and cfg parsed again without it, so that
// the field takes its default and the rest are as given.
func (rd *reading) fill(cfg any) {
	given := rd.given()
	err := env.ParseWithOptions(cfg, env.Options{Environment: given})
	if err == nil {
		return
	}
	params, perr := env.GetFieldParams(cfg)
	if perr != nil {
		rd.refused = append(rd.refused, fmt.Errorf("config: %T: %w", cfg, perr))
		return
	}
	// caarlos0/env's ParseError names the Go field, which several settings
	// share (Every, Workers …), not the variable: each variable set is read
	// on its own into a fresh cfg to find the ones that cannot be.
	for _, p := range params {
		v, set := given[p.Key]
		if !set {
			continue
		}
		one := reflect.New(reflect.TypeOf(cfg).Elem()).Interface()
		var pe env.ParseError
		if errors.As(env.ParseWithOptions(one, env.Options{Environment: map[string]string{p.Key: v}}), &pe) {
			rd.refuse(p.Key, p.Key, "%s", unreadable(pe, rd.vars[p.Key].secret))
		}
	}
	for _, e := range aggregated(err) {
		switch e := e.(type) {
		case env.VarIsNotSetError:
			rd.refuse(e.Key, e.Key, "is required")
		case env.EmptyVarError:
			rd.refuse(e.Key, e.Key, "must not be empty")
		}
	}
	for _, e := range aggregated(env.ParseWithOptions(cfg, env.Options{Environment: rd.given()})) {
		switch e.(type) {
		case env.VarIsNotSetError, env.EmptyVarError: // refused above
		default:
			rd.refused = append(rd.refused, fmt.Errorf("config: %T: %w", cfg, e))
		}
	}
}

// aggregated are the errors of caarlos0/env's AggregateError err, or err.
func aggregated(err error) []error {
	var agg env.AggregateError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &agg):
		return agg.Errors
	}
	return []error{err}
}

// given are the values read, but those refused already.
func (rd *reading) given() map[string]string {
	out := make(map[string]string, len(rd.env))
	for k, v := range rd.env {
		if !rd.unread[k] {
			out[k] = v
		}
	}
	return out
}

// unreadable says why a value cannot be read, by the type it is read into:
// strconv's and time's own messages repeat the value, which the refusal
// shows once, and a secret's never.
func unreadable(pe env.ParseError, secret bool) string {
	t := pe.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()) && !secret {
		return pe.Err.Error() // the type's own reason (OPTIMO_CREATE_EVERY: "not a duration or off")
	}
	var ne *strconv.NumError
	outOfRange := errors.As(pe.Err, &ne) && errors.Is(ne.Err, strconv.ErrRange)
	durations := reflect.TypeFor[time.Duration]()
	switch {
	case t == durations:
		return "not a duration (30s, 5m, 1h30m)"
	case t.Kind() == reflect.Slice && t.Elem() == durations:
		return "not a comma-separated list of durations (5s,30s,2m)"
	case t.Kind() == reflect.Slice:
		return "not a comma-separated list of " + kindName(t.Elem().Kind())
	case outOfRange:
		return "out of range for " + kindName(t.Kind())
	default:
		return "not " + kindName(t.Kind())
	}
}

// kindName is what a value of kind k is called in a refusal.
func kindName(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or above"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + k.String()
}

// checked notes what a check returned: each Refusal in it (joined, or
// wrapped) on its own, and any other error as it is.
func (rd *reading) checked(err error) {
	switch e := err.(type) {
	case nil:
	case *Refusal:
		rd.checks = append(rd.checks, e)
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			rd.checked(inner)
		}
	default:
		var r *Refusal
		if inner := errors.Unwrap(err); inner != nil && errors.As(err, &r) {
			rd.checked(inner) // the wrapping's words go: the variable says where
			return
		}
		rd.checks = append(rd.checks, err)
	}
}

// err is the *Error of what was refused, nil when nothing was: a check's
// refusal of a variable whose value was refused already is dropped (the
// check saw the default), repeats are dropped (two services check
// OPTIMO_TIMEZONE alike), and each refusal is shown with the value.
func (rd *reading) err() error {
	type entry struct {
		err   error
		order int
	}
	var out []entry
	seen := map[string]bool{}
	for i, e := range append(rd.refused, rd.checks...) {
		order := len(rd.vars) + i // what names no variable comes last
		var r *Refusal
		if errors.As(e, &r) {
			if i >= len(rd.refused) && rd.unread[r.Var] {
				continue
			}
			e = &Refusal{Var: r.Var, Reason: r.Reason, given: rd.shownValue(r.Var), cause: r}
			if k, ok := rd.vars[r.Var]; ok {
				order = k.order
			}
		}
		if seen[e.Error()] {
			continue
		}
		seen[e.Error()] = true
		out = append(out, entry{e, order})
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b entry) int { return a.order - b.order })
	refused := make([]error, len(out))
	for i, e := range out {
		refused[i] = e.err
	}
	return &Error{Refused: refused}
}

// shownValue is how a refusal shows variable's value: as it was set, its
// default when it was not, never a secret's.
func (rd *reading) shownValue(variable string) string {
	if path, ok := rd.files[variable]; ok {
		return "=" + shown(path)
	}
	k, ok := rd.vars[variable]
	if !ok {
		return ""
	}
	v, set := rd.env[variable]
	switch {
	case set && k.secret:
		return " (set; a secret, not shown)"
	case set:
		return "=" + shown(v)
	case k.hasDefault && k.def != "":
		return "=" + shown(k.def) + " (its default)"
	}
	return " (not set)"
}
