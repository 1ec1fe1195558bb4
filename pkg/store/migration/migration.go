// Package migration knows what the schema scripts of sql/ touch, and plans a
// migration against what a database holds (§11: the live SQL Server is
// shared with things that still run, and its live objects are to be captured
// before anything changes them).
//
// Both adapters use it: the scripts are read into the Objects they create or
// alter (tables and table types with their columns and indexes; procedures,
// functions, views and triggers with their definitions, the last script's
// definition of each winning), an adapter reads the database's Catalog, and
// Decide compares the two, object by object: absent, the same, or different
// (by normalised definition, with the reasons), whether primeflow owns it
// (OwnerProperty, an extended property on SQL Server), and what applying the
// pending scripts would do to it — create, alter, alter an adopted object
// after capturing it, or refuse. Nothing here talks to a database.
package migration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// OwnerProperty names the extended property that marks an object primeflow
// created (or adopted) on SQL Server; its value says which script and how.
const OwnerProperty = "primeflow"

// Kind is what an object is.
type Kind string

// Kinds of object.
const (
	Table     Kind = "table"
	TableType Kind = "type"
	Procedure Kind = "procedure"
	Function  Kind = "function"
	View      Kind = "view"
	Trigger   Kind = "trigger"
)

// IsModule reports whether objects of kind k are defined by their text.
func (k Kind) IsModule() bool { return k != Table && k != TableType }

// Computed is the Type of a computed (generated) column.
const Computed = "COMPUTED"

// Script is one file of sql/mssql or sql/sqlite.
type Script struct {
	Name string // the file's base name
	Text string
	// Batches are what the script sends one at a time: on SQL Server the
	// text between GO lines, on SQLite the whole script.
	Batches []string
}

// Checksum is the SHA-256 of the script's text, in hex: what the history
// table records, so that a script changed after it was applied is noticed.
func (s Script) Checksum() string {
	sum := sha256.Sum256([]byte(s.Text))
	return hex.EncodeToString(sum[:])
}

// Read reads the *.sql files of dir in fsys, in name order; split turns a
// script's text into its batches.
func Read(fsys fs.FS, dir string, split func(text string) ([]string, error)) ([]Script, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("migration: scripts: %w", err)
	}
	slices.Sort(names)
	var out []Script
	for _, name := range names {
		text, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migration: scripts: %w", err)
		}
		batches, err := split(string(text))
		if err != nil {
			return nil, fmt.Errorf("migration: script %s: %w", path.Base(name), err)
		}
		out = append(out, Script{Name: path.Base(name), Text: string(text), Batches: batches})
	}
	return out, nil
}

// Column is a column of a table or table type.
type Column struct {
	Name string
	// Type is NormaliseType's form, or Computed.
	Type string
	// Script is the script that last created, added or changed the column;
	// Added is true when that was an ALTER TABLE (which a script guards by
	// the column's absence, so it runs on a live table too, where a CREATE
	// TABLE is skipped), and Replaced when the column was dropped before it
	// was added again (the script converts a live column). Scripts' objects
	// only.
	Script   string
	Added    bool
	Replaced bool
	// Nullable, Identity, Default and Expression describe a live column, for
	// a capture (Catalog objects only).
	Nullable   bool
	Identity   bool
	Default    string
	Expression string // a computed column's definition
}

// Index is a named index a script creates.
type Index struct {
	Name   string
	Script string
}

// Object is something the scripts create or alter, as they leave it.
type Object struct {
	Kind Kind
	Name string
	// Scripts are the scripts that create or alter it, in order. For a
	// module the last is the one whose definition counts (DefinedIn): an
	// earlier definition is superseded and not applied.
	Scripts    []string
	Definition string // a module's text
	Module     Module // a module's parameters
	Columns    []Column
	Indexes    []Index
	dropped    []string // columns a script dropped
}

// DefinedIn is the script whose definition of a module counts.
func (o Object) DefinedIn() string { return o.Scripts[len(o.Scripts)-1] }

// Key is how an object is found in a Catalog: table types have names of
// their own, everything else shares one namespace; names compare without
// regard to case, as a case-insensitive instance compares them.
func Key(kind Kind, name string) string {
	if kind == TableType {
		return "type:" + strings.ToLower(name)
	}
	return strings.ToLower(name)
}

// Objects reads what the scripts create or alter, in the order they first
// do so.
func Objects(scripts []Script) ([]Object, error) {
	var out []Object
	at := map[string]int{}
	get := func(kind Kind, name, script string) *Object {
		k := Key(kind, name)
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, Object{Kind: kind, Name: name})
		}
		o := &out[i]
		if len(o.Scripts) == 0 || o.Scripts[len(o.Scripts)-1] != script {
			o.Scripts = append(o.Scripts, script)
		}
		return o
	}
	for _, sc := range scripts {
		stmts, err := scriptObjects(sc)
		if err != nil {
			return nil, err
		}
		for _, st := range stmts {
			if st.kind == "module" {
				m := st.mod
				o := get(m.Kind, m.Name, sc.Name)
				if o.Kind != m.Kind {
					return nil, fmt.Errorf("migration: %s: %s is a %s in an earlier script", sc.Name, m.Name, o.Kind)
				}
				o.Definition, o.Module = m.Definition, m.Module
				continue
			}
			name := ObjectName(st.m[0])
			if st.kind == "dropindex" {
				idx := strings.Trim(st.m[0], `[]"`)
				for i := range out {
					if st.m[1] == "" || strings.EqualFold(out[i].Name, ObjectName(st.m[1])) {
						out[i].Indexes = slices.DeleteFunc(out[i].Indexes, func(ix Index) bool { return strings.EqualFold(ix.Name, idx) })
					}
				}
				continue
			}
			switch st.kind {
			case "table", "type":
				kind := Table
				if st.kind == "type" {
					kind = TableType
				}
				o := get(kind, name, sc.Name)
				for _, c := range columns(st.body, sc.Name) {
					o.setColumn(c)
				}
			case "add", "alter":
				col := strings.Trim(st.m[1], `[]"`)
				if constraintWords[strings.ToUpper(col)] {
					continue // ADD CONSTRAINT …
				}
				o := get(Table, name, sc.Name)
				o.setColumn(Column{Name: col, Type: columnType(st.m[2]), Script: sc.Name, Added: true,
					Replaced: slices.ContainsFunc(o.dropped, func(d string) bool { return strings.EqualFold(d, col) })})
			case "drop":
				o := get(Table, name, sc.Name)
				col := strings.Trim(st.m[1], `[]"`)
				o.Columns = slices.DeleteFunc(o.Columns, func(c Column) bool { return strings.EqualFold(c.Name, col) })
				o.dropped = append(o.dropped, col)
			case "index":
				o := get(Table, ObjectName(st.m[1]), sc.Name)
				idx := strings.Trim(st.m[0], `[]"`)
				o.Indexes = slices.DeleteFunc(o.Indexes, func(i Index) bool { return strings.EqualFold(i.Name, idx) })
				o.Indexes = append(o.Indexes, Index{Name: idx, Script: sc.Name})
			}
		}
	}
	return out, nil
}

// setColumn adds c, or replaces the column of its name.
func (o *Object) setColumn(c Column) {
	for i := range o.Columns {
		if strings.EqualFold(o.Columns[i].Name, c.Name) {
			o.Columns[i] = c
			return
		}
	}
	o.Columns = append(o.Columns, c)
}
