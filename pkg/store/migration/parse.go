package migration

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Param is one parameter of a procedure or function.
type Param struct {
	Name     string // without @
	Type     string // upper case, no spaces: NVARCHAR(MAX), DBO.PRIMEFLOWIDLIST
	Default  string // as written; "" when none
	ReadOnly bool   // a table-valued parameter
	Output   bool   // OUTPUT (or OUT): the procedure writes it back
}

// Optional reports whether a caller may leave p out.
func (p Param) Optional() bool { return p.Default != "" || p.ReadOnly }

// Module is a procedure, function, view or trigger as a batch defines it.
type Module struct {
	Kind   Kind
	Name   string // without the schema
	Params []Param
}

var (
	moduleHead = regexp.MustCompile(`(?is)^\s*(?:CREATE\s+OR\s+ALTER|CREATE|ALTER)\s+(PROCEDURE|PROC|FUNCTION|VIEW|TRIGGER)\s+([\w.\[\]"]+)`)
	procEnd    = regexp.MustCompile(`(?is)\bAS\b`)
	funcEnd    = regexp.MustCompile(`(?is)\bRETURNS\b`)
	paramRE    = regexp.MustCompile(`(?is)^@(\w+)\s+([\w.]+(?:\s*\([\w\s,]*\))?)\s*(?:=\s*(\S+?))?\s*(OUTPUT|OUT)?\s*(READONLY)?$`)
	// procOptions are a procedure's WITH options before its AS
	// (EXECUTE AS OWNER holds an AS of its own).
	procOptions = regexp.MustCompile(`(?is)\bWITH\s+(?:EXECUTE\s+AS\s+(?:CALLER|SELF|OWNER|'[^']*')|RECOMPILE|ENCRYPTION)` +
		`(?:\s*,\s*(?:EXECUTE\s+AS\s+(?:CALLER|SELF|OWNER|'[^']*')|RECOMPILE|ENCRYPTION))*\s+AS\b`)
)

// ParseModule reads the module a batch (or a stored definition) creates:
// ok is false when the batch does not start by creating one.
func ParseModule(batch string) (m Module, ok bool, err error) {
	c := Code(batch)
	loc := moduleHead.FindStringSubmatchIndex(c)
	if loc == nil {
		return m, false, nil
	}
	m = Module{Kind: kindOf(c[loc[2]:loc[3]]), Name: ObjectName(c[loc[4]:loc[5]])}
	if m.Kind == View || m.Kind == Trigger {
		return m, true, nil
	}
	rest := c[loc[1]:]
	end := procEnd
	if m.Kind == Function {
		end = funcEnd
	}
	e := end.FindStringIndex(rest)
	if e == nil {
		return m, true, fmt.Errorf("%s %s has no body", m.Kind, m.Name)
	}
	if o := procOptions.FindStringIndex(rest); m.Kind == Procedure && o != nil && o[0] < e[0] {
		e = o // the parameters end where the options start
	}
	list := strings.TrimSpace(rest[:e[0]])
	if m.Kind == Function {
		list = strings.TrimSuffix(strings.TrimPrefix(list, "("), ")")
	}
	for _, p := range SplitTop(list) {
		pm := paramRE.FindStringSubmatch(strings.TrimSpace(p))
		if pm == nil {
			return m, true, fmt.Errorf("%s %s: cannot read parameter %q", m.Kind, m.Name, strings.TrimSpace(p))
		}
		m.Params = append(m.Params, Param{
			Name: pm[1], Type: strings.ToUpper(strings.Join(strings.Fields(pm[2]), "")), Default: pm[3],
			Output: pm[4] != "", ReadOnly: pm[5] != "",
		})
	}
	return m, true, nil
}

func kindOf(word string) Kind {
	switch strings.ToUpper(word) {
	case "PROCEDURE", "PROC":
		return Procedure
	case "FUNCTION":
		return Function
	case "VIEW":
		return View
	}
	return Trigger
}

// ObjectName drops brackets, quotes and the dbo schema from a name.
func ObjectName(s string) string {
	s = strings.NewReplacer("[", "", "]", "", `"`, "").Replace(s)
	if strings.HasPrefix(strings.ToLower(s), "dbo.") {
		return s[len("dbo."):]
	}
	return s
}

// SplitTop splits s on commas outside parentheses.
func SplitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// Closing returns the index of the parenthesis that closes the one at open,
// or -1.
func Closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// The DDL statements Objects reads, in T-SQL and SQLite.
var (
	createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\[\]"]+)\s*\(`)
	createType  = regexp.MustCompile(`(?i)\bCREATE\s+TYPE\s+([\w.\[\]"]+)\s+AS\s+TABLE\s*\(`)
	addColumn   = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+([\w.\[\]"]+)\s+ADD\s+(?:COLUMN\s+)?([\w\[\]"]+)\s+([^;]*)`)
	alterColumn = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+([\w.\[\]"]+)\s+ALTER\s+COLUMN\s+([\w\[\]"]+)\s+([^;]*)`)
	dropColumn  = regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+([\w.\[\]"]+)\s+DROP\s+COLUMN\s+(?:IF\s+EXISTS\s+)?([\w\[\]"]+)`)
	createIndex = regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?(?:NONCLUSTERED\s+|CLUSTERED\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w\[\]"]+)\s+ON\s+([\w.\[\]"]+)`)
	// dropIndex is T-SQL's DROP INDEX name ON table and SQLite's DROP INDEX
	// name (the table then is the one that has it).
	dropIndex = regexp.MustCompile(`(?i)\bDROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?([\w\[\]"]+)(?:\s+ON\s+([\w.\[\]"]+))?`)
)

var (
	computedColumn = regexp.MustCompile(`(?i)^AS\b|\bGENERATED\b`)
	typeWord       = regexp.MustCompile(`^[\w.\[\]"]+`)
)

// constraintWords start the items of a column list that are not columns.
var constraintWords = map[string]bool{"CONSTRAINT": true, "PRIMARY": true, "UNIQUE": true, "FOREIGN": true, "CHECK": true, "INDEX": true}

// columns reads a CREATE TABLE or CREATE TYPE … AS TABLE column list.
func columns(body, script string) []Column {
	var out []Column
	for _, item := range SplitTop(body) {
		f := strings.Fields(item)
		if len(f) == 0 || constraintWords[strings.ToUpper(f[0])] {
			continue
		}
		rest := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(item), f[0]))
		out = append(out, Column{Name: strings.Trim(f[0], `[]"`), Type: columnType(rest), Script: script})
	}
	return out
}

// columnType is the type a column definition declares, normalised
// (NormaliseType); Computed for a computed (T-SQL AS (…)) or generated
// (SQLite GENERATED ALWAYS AS) column.
func columnType(def string) string {
	if computedColumn.MatchString(def) {
		return Computed
	}
	word := typeWord.FindString(def)
	if word == "" {
		return ""
	}
	rest := strings.TrimLeft(def[len(word):], " \t\r\n")
	if strings.HasPrefix(rest, "(") {
		if end := Closing(rest, 0); end > 0 {
			word += rest[:end+1]
		}
	}
	return NormaliseType(ObjectName(word))
}

// NormaliseType writes a column type the one way both sides of a
// comparison use: upper case, no spaces, and SQL Server's default length,
// precision or scale made explicit.
func NormaliseType(t string) string {
	t = strings.ToUpper(strings.Join(strings.Fields(t), ""))
	switch t {
	case "DATETIME2", "TIME", "DATETIMEOFFSET":
		return t + "(7)"
	case "DECIMAL", "NUMERIC":
		return t + "(18,0)"
	case "NVARCHAR", "VARCHAR", "NCHAR", "CHAR", "VARBINARY", "BINARY":
		return t + "(1)"
	}
	return t
}

// statement is one DDL statement of a script.
type statement struct {
	at   int      // where it starts in its batch
	kind string   // module, table, type, add, alter, drop, index, dropindex
	m    []string // the names (and for add and alter, the definition) it holds
	body string   // the column list of CREATE TABLE and CREATE TYPE
	mod  moduleDef
}

// scriptObjects reads what one script creates or alters, in the order it
// does so: modules (a batch each), and tables and table types with their
// columns, columns added, changed or dropped, and indexes.
func scriptObjects(sc Script) ([]statement, error) {
	var stmts []statement
	for _, b := range sc.Batches {
		m, ok, err := ParseModule(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.Name, err)
		}
		if ok {
			stmts = append(stmts, statement{kind: "module", mod: moduleDef{Module: m, Definition: b}})
			continue
		}
		c := Code(b)
		var found []statement
		for kind, re := range map[string]*regexp.Regexp{"table": createTable, "type": createType} {
			for _, loc := range re.FindAllStringSubmatchIndex(c, -1) {
				open := loc[1] - 1
				end := Closing(c, open)
				if end < 0 {
					return nil, fmt.Errorf("%s: the column list of %s never closes", sc.Name, c[loc[2]:loc[3]])
				}
				found = append(found, statement{at: loc[0], kind: kind, m: []string{c[loc[2]:loc[3]]}, body: c[open+1 : end]})
			}
		}
		for kind, re := range map[string]*regexp.Regexp{"add": addColumn, "alter": alterColumn, "drop": dropColumn, "index": createIndex, "dropindex": dropIndex} {
			for _, loc := range re.FindAllStringSubmatchIndex(c, -1) {
				var m []string
				for i := 2; i < len(loc); i += 2 {
					if loc[i] < 0 {
						m = append(m, "") // an optional group that did not match
						continue
					}
					m = append(m, c[loc[i]:loc[i+1]])
				}
				found = append(found, statement{at: loc[0], kind: kind, m: m})
			}
		}
		slices.SortFunc(found, func(a, b statement) int { return a.at - b.at })
		stmts = append(stmts, found...)
	}
	return stmts, nil
}

// moduleDef is one definition of a module.
type moduleDef struct {
	Module
	Definition string
}
