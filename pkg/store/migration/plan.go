package migration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Live is an object as the database holds it.
type Live struct {
	Kind       Kind
	Name       string
	Definition string // a module's text as stored
	Columns    []Column
	Indexes    []string
	// Owner is the value of the object's OwnerProperty: empty when
	// primeflow does not own it.
	Owner string
}

// Catalog is what a database holds, by Key.
type Catalog map[string]Live

// Find returns the live object of an object's kind and name.
func (c Catalog) Find(kind Kind, name string) (Live, bool) {
	l, ok := c[Key(kind, name)]
	return l, ok
}

// Applied is one row of the history table.
type Applied struct {
	Name       string
	AppliedUTC time.Time
	// Checksum is the script's checksum when it was applied; empty for a
	// row written before checksums were recorded.
	Checksum string
}

// ScriptStatus says whether a script will be applied.
type ScriptStatus string

// Script statuses.
const (
	// Pending: never applied.
	Pending ScriptStatus = "pending"
	// Current: applied, and unchanged since.
	Current ScriptStatus = "applied"
	// Changed: applied, and the script has changed since: applied again
	// (every batch is safe to run twice).
	Changed ScriptStatus = "changed"
	// Unrecorded: applied before checksums were recorded, so a change
	// cannot be ruled out: applied again.
	Unrecorded ScriptStatus = "unrecorded"
)

// ScriptState is a script and where the database stands with it.
type ScriptState struct {
	Script
	Status  ScriptStatus
	Applied Applied // the history row; zero when Pending
	// Runs: a migration applies the script.
	Runs bool
}

// State is how a live object compares with the scripts' object.
type State string

// States.
const (
	Absent    State = "absent"
	Same      State = "same"
	Different State = "different"
)

// Action is what applying the pending scripts does to an object.
type Action string

// Actions.
const (
	// None: nothing (the same, or no pending script touches it).
	None Action = "none"
	// Create: absent, a pending script creates it.
	Create Action = "create"
	// Alter: primeflow owns it and a pending script changes it.
	Alter Action = "alter"
	// Adopt: primeflow does not own it, the operator named it in --adopt:
	// its definition is captured, then a pending script changes it, and it
	// is marked primeflow's.
	Adopt Action = "adopt"
	// Refuse: primeflow does not own it and a pending script would change
	// it: nothing is applied until it is adopted.
	Refuse Action = "refuse"
)

// Item is one object of a Plan.
type Item struct {
	Object
	Live  *Live // nil when absent
	State State
	// Touched: a pending script creates or alters the object.
	Touched bool
	Action  Action
	// Reasons say how the live object differs, and what follows from it.
	Reasons []string
}

// Owned reports whether primeflow owns the live object.
func (it Item) Owned() bool { return it.Live != nil && it.Live.Owner != "" }

// Plan is what a migration would do, script by script and object by object.
type Plan struct {
	Backend string // "SQL Server" or "SQLite"
	Scripts []ScriptState
	Items   []Item
	// Ownership is false where the database has no ownership mark (SQLite:
	// the file is primeflow's own): every object counts as owned.
	Ownership bool
	// Settings are the primeflowSettings rows the migration writes.
	Settings []Setting
}

// Setting is one primeflowSettings row: what the database holds and what
// the migration writes.
type Setting struct {
	Name    string
	Current string // "" when absent
	Found   bool
	Want    string // "" when the migration leaves it as it is
	From    string // where Want comes from (an environment variable)
}

// Runs reports whether any script will be applied.
func (p Plan) Runs() bool {
	return slices.ContainsFunc(p.Scripts, func(s ScriptState) bool { return s.Runs })
}

// Refused returns the objects that stop the migration.
func (p Plan) Refused() []Item { return p.with(Refuse) }

// Adopted returns the objects to capture before the migration alters them.
func (p Plan) Adopted() []Item { return p.with(Adopt) }

func (p Plan) with(a Action) []Item {
	var out []Item
	for _, it := range p.Items {
		if it.Action == a {
			out = append(out, it)
		}
	}
	return out
}

// Item returns the plan's item for an object.
func (p Plan) Item(kind Kind, name string) (Item, bool) {
	for _, it := range p.Items {
		if Key(it.Kind, it.Name) == Key(kind, name) {
			return it, true
		}
	}
	return Item{}, false
}

// ErrRefused: the migration would alter live objects primeflow does not own.
var ErrRefused = errors.New("migration refused: it would alter live objects primeflow does not own")

// RefusedError names the objects that stopped a migration; it matches
// ErrRefused.
type RefusedError struct{ Items []Item }

func (e *RefusedError) Error() string {
	var names []string
	for _, it := range e.Items {
		names = append(names, it.Name)
	}
	return fmt.Sprintf("%s: %s (compare them with primectl migrate --plan; name the ones to take over in --adopt, which captures their definitions first)",
		ErrRefused, strings.Join(names, ", "))
}

func (e *RefusedError) Unwrap() error { return ErrRefused }

// Status says where the database stands with each script, from its
// history. reapply says whether a script changed since it was applied is
// applied again (SQL Server, whose batches are all safe to run twice) or not
// (SQLite, whose scripts run once).
func Status(scripts []Script, history []Applied, reapply bool) []ScriptState {
	byName := map[string]Applied{}
	for _, h := range history {
		byName[h.Name] = h
	}
	out := make([]ScriptState, len(scripts))
	for i, sc := range scripts {
		st := ScriptState{Script: sc, Status: Pending}
		if h, ok := byName[sc.Name]; ok {
			st.Applied = h
			switch {
			case h.Checksum == "":
				st.Status = Unrecorded
			case h.Checksum != sc.Checksum():
				st.Status = Changed
			default:
				st.Status = Current
			}
		}
		st.Runs = st.Status == Pending || (reapply && st.Status != Current)
		out[i] = st
	}
	return out
}

// Decide plans a migration: every object of the scripts against the
// catalog. ownership is false where the database keeps no ownership mark
// (everything counts as primeflow's); adopt names the objects the operator
// lets the migration take over, and may name only objects the scripts touch.
func Decide(scripts []ScriptState, catalog Catalog, ownership bool, adopt []string) (Plan, error) {
	var plain []Script
	runs := map[string]bool{}
	for _, s := range scripts {
		plain = append(plain, s.Script)
		runs[s.Name] = s.Runs
	}
	objects, err := Objects(plain)
	if err != nil {
		return Plan{}, err
	}
	adopting := map[string]bool{}
	for _, a := range adopt {
		adopting[strings.ToLower(ObjectName(strings.TrimSpace(a)))] = true
	}
	p := Plan{Scripts: scripts, Ownership: ownership}
	known := map[string]bool{}
	for _, o := range objects {
		it := Item{Object: o}
		known[strings.ToLower(o.Name)] = true
		if l, ok := catalog.Find(o.Kind, o.Name); ok {
			if !ownership {
				l.Owner = "primeflow"
			}
			it.Live = &l
		}
		var changes bool
		it.State, changes, it.Reasons = compare(o, it.Live, runs)
		it.Touched = touched(o, runs)
		switch {
		case it.State == Absent && it.Touched:
			it.Action = Create
		case !changes:
			it.Action = None
		case it.Owned():
			it.Action = Alter
		case adopting[strings.ToLower(o.Name)]:
			it.Action = Adopt
		default:
			it.Action = Refuse
		}
		p.Items = append(p.Items, it)
	}
	var unknown []string
	for _, a := range adopt {
		if !known[strings.ToLower(ObjectName(strings.TrimSpace(a)))] {
			unknown = append(unknown, a)
		}
	}
	if len(unknown) > 0 {
		return p, fmt.Errorf("--adopt %s: not an object the scripts create or alter", strings.Join(unknown, ", "))
	}
	return p, nil
}

// touched reports whether a pending script creates or alters o. A module is
// touched only by the script whose definition counts.
func touched(o Object, runs map[string]bool) bool {
	if o.Kind.IsModule() {
		return runs[o.DefinedIn()]
	}
	return slices.ContainsFunc(o.Scripts, func(s string) bool { return runs[s] })
}

// compare says how the live object stands against the scripts' object,
// whether the pending scripts would change it, and why.
func compare(o Object, l *Live, runs map[string]bool) (State, bool, []string) {
	if l == nil {
		var why []string
		if !touched(o, runs) {
			why = append(why, fmt.Sprintf("missing, though %s was applied: dropped since?", o.Scripts[len(o.Scripts)-1]))
		}
		return Absent, false, why
	}
	if o.Kind.IsModule() {
		if NormaliseDefinition(o.Definition) == NormaliseDefinition(l.Definition) {
			return Same, false, nil
		}
		why := paramDifferences(o, *l)
		if len(why) == 0 {
			why = []string{"the body differs; the parameters are the same"}
		}
		changes := runs[o.DefinedIn()]
		if !changes {
			why = append(why, fmt.Sprintf("changed in the database after %s was applied", o.DefinedIn()))
		}
		return Different, changes, why
	}
	var why []string
	changes := false
	for _, c := range o.Columns {
		lc, ok := findColumn(l.Columns, c.Name)
		switch {
		case !ok && c.Added && runs[c.Script]:
			why = append(why, fmt.Sprintf("%s adds column %s %s", c.Script, c.Name, c.Type))
			changes = true
		case !ok:
			why = append(why, fmt.Sprintf("lacks column %s %s, which primeflow's code uses (%s does not add it to an existing table)", c.Name, c.Type, c.Script))
		case !strings.EqualFold(lc.Type, c.Type) && c.Replaced && runs[c.Script]:
			why = append(why, fmt.Sprintf("%s replaces column %s %s with %s", c.Script, c.Name, lc.Type, c.Type))
			changes = true
		case !strings.EqualFold(lc.Type, c.Type):
			why = append(why, fmt.Sprintf("column %s is %s, the scripts make it %s (left as it is)", c.Name, lc.Type, c.Type))
		}
	}
	for _, ix := range o.Indexes {
		if slices.ContainsFunc(l.Indexes, func(n string) bool { return strings.EqualFold(n, ix.Name) }) {
			continue
		}
		if runs[ix.Script] {
			why = append(why, fmt.Sprintf("%s adds index %s", ix.Script, ix.Name))
			changes = true
		} else {
			why = append(why, fmt.Sprintf("lacks index %s (%s was applied: dropped since?)", ix.Name, ix.Script))
		}
	}
	if len(why) == 0 {
		return Same, false, nil
	}
	return Different, changes, why
}

func findColumn(cols []Column, name string) (Column, bool) {
	for _, c := range cols {
		if strings.EqualFold(c.Name, name) {
			return c, true
		}
	}
	return Column{}, false
}

// paramDifferences says how the live module's parameters differ from the
// script's, in what that means for the live module's callers.
func paramDifferences(o Object, l Live) []string {
	lm, ok, err := ParseModule(l.Definition)
	if err != nil || !ok {
		return []string{"the live definition could not be read"}
	}
	if lm.Kind != o.Kind {
		return []string{fmt.Sprintf("it is a %s in the database, a %s in %s", lm.Kind, o.Kind, o.DefinedIn())}
	}
	var why []string
	find := func(ps []Param, name string) (Param, int) {
		for i, p := range ps {
			if strings.EqualFold(p.Name, name) {
				return p, i
			}
		}
		return Param{}, -1
	}
	for i, lp := range lm.Params {
		sp, j := find(o.Module.Params, lp.Name)
		switch {
		case j < 0:
			why = append(why, fmt.Sprintf("@%s %s is not a parameter of %s's version: callers that pass it fail", lp.Name, lp.Type, o.DefinedIn()))
		case !strings.EqualFold(NormaliseType(sp.Type), NormaliseType(lp.Type)):
			why = append(why, fmt.Sprintf("@%s is %s in the database, %s in %s", lp.Name, lp.Type, sp.Type, o.DefinedIn()))
		case j != i:
			why = append(why, fmt.Sprintf("@%s moves from position %d to %d: callers that pass it by position get another meaning", lp.Name, i+1, j+1))
		case !strings.EqualFold(sp.Default, lp.Default):
			why = append(why, fmt.Sprintf("@%s defaults to %s in the database, %s in %s", lp.Name, orNone(lp.Default), orNone(sp.Default), o.DefinedIn()))
		}
	}
	for _, sp := range o.Module.Params {
		if _, j := find(lm.Params, sp.Name); j < 0 {
			if sp.Optional() {
				why = append(why, fmt.Sprintf("%s adds @%s (optional)", o.DefinedIn(), sp.Name))
			} else {
				why = append(why, fmt.Sprintf("%s adds @%s, required: callers that leave it out fail", o.DefinedIn(), sp.Name))
			}
		}
	}
	return why
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}
