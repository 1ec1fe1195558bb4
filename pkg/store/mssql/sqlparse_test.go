package mssql

// Just enough T-SQL (and SQLite DDL) reading for the offline schema tests,
// on top of pkg/store/migration (which reads the scripts for migrate
// --plan): modules with their parameters, tables with their columns,
// indexes, which statements an existence check guards, and the names a
// case-insensitive instance would take for one.

import (
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ethosbuilding/primeflow/pkg/store/migration"
)

func code(text string) string     { return migration.Code(text) }
func objectName(s string) string  { return migration.ObjectName(s) }
func splitTop(s string) []string  { return migration.SplitTop(s) }
func closing(s string, i int) int { return migration.Closing(s, i) }

// procParam is one parameter of a procedure or function.
type procParam struct {
	name     string // without @
	typ      string // upper case, e.g. NVARCHAR(MAX), DBO.PRIMEFLOWIDLIST
	def      string // the default as written; "" when none
	readonly bool   // a table-valued parameter
	output   bool   // an OUTPUT parameter
}

// module is a procedure or function of the scripts.
type module struct {
	kind   string // PROCEDURE or FUNCTION
	name   string // without dbo.
	params []procParam
}

// optional reports whether a caller may leave p out.
func (p procParam) optional() bool { return p.def != "" || p.readonly }

// modules returns every procedure and function of the scripts as the last
// script that defines it leaves it (a later script may redefine a module).
func modules(t *testing.T, scripts []script) map[string]module {
	t.Helper()
	objs, err := migration.Objects(plainScripts(scripts))
	if err != nil {
		t.Fatalf("read the scripts: %v", err)
	}
	out := map[string]module{}
	for _, o := range objs {
		if o.Kind != migration.Procedure && o.Kind != migration.Function {
			continue
		}
		m := module{kind: strings.ToUpper(string(o.Kind)), name: o.Name}
		for _, p := range o.Module.Params {
			m.params = append(m.params, procParam{name: p.Name, typ: p.Type, def: p.Default, readonly: p.ReadOnly, output: p.Output})
		}
		out[o.Name] = m
	}
	return out
}

// scriptCall is a procedure one of the scripts' modules calls (EXEC
// dbo.name @Param = value [OUTPUT], …).
type scriptCall struct {
	caller, proc string
	args         map[string]bool // by parameter name as written; true when passed OUTPUT
}

// scriptCalls reads the procedure calls in the modules of the scripts.
func scriptCalls(t *testing.T, scripts []script) []scriptCall {
	t.Helper()
	exec := regexp.MustCompile(`(?is)\bEXEC(?:UTE)?\s+dbo\.(\w+)\b([^;]*);`)
	arg := regexp.MustCompile(`(?is)^@(\w+)\s*=\s*(.+?)(\s+OUT(?:PUT)?)?$`)
	var out []scriptCall
	for _, sc := range scripts {
		for _, b := range sc.batches {
			m, ok, err := migration.ParseModule(b.sql)
			if err != nil || !ok {
				continue
			}
			for _, e := range exec.FindAllStringSubmatch(code(b.sql), -1) {
				c := scriptCall{caller: m.Name, proc: e[1], args: map[string]bool{}}
				for _, a := range splitTop(e[2]) {
					if strings.TrimSpace(a) == "" {
						continue
					}
					am := arg.FindStringSubmatch(strings.TrimSpace(a))
					if am == nil {
						t.Fatalf("%s calls %s with %q, not @Param = value", m.Name, e[1], strings.TrimSpace(a))
					}
					c.args[am[1]] = am[3] != ""
				}
				out = append(out, c)
			}
		}
	}
	return out
}

// scriptObjects reads the objects of text, a script or several run
// together, split into batches on GO lines.
func scriptObjects(text string) []migration.Object {
	batches, err := splitBatches(text)
	if err != nil {
		panic(err)
	}
	sc := migration.Script{Name: "text", Text: text}
	for _, b := range batches {
		sc.Batches = append(sc.Batches, b.sql)
	}
	objs, err := migration.Objects([]migration.Script{sc})
	if err != nil {
		panic(err)
	}
	return objs
}

// tables reads the tables and their columns, sorted, from SQL Server or
// SQLite DDL.
func tables(text string) map[string][]string {
	out := map[string][]string{}
	for _, o := range scriptObjects(text) {
		if o.Kind != migration.Table {
			continue
		}
		var cols []string
		for _, c := range o.Columns {
			cols = append(cols, c.Name)
		}
		slices.Sort(cols)
		out[o.Name] = cols
	}
	return out
}

// indexes reads the named indexes of each table.
func indexes(text string) map[string][]string {
	out := map[string][]string{}
	for _, o := range scriptObjects(text) {
		for _, ix := range o.Indexes {
			out[o.Name] = append(out[o.Name], ix.Name)
		}
		slices.Sort(out[o.Name])
	}
	maps.DeleteFunc(out, func(_ string, v []string) bool { return len(v) == 0 })
	return out
}

// readAll concatenates the *.sql files of dir in fsys.
func readAll(t *testing.T, fsys fs.FS, dir string) string {
	t.Helper()
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no scripts in %s: %v", dir, err)
	}
	var b strings.Builder
	for _, n := range names {
		text, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatalf("read %s: %v", n, err)
		}
		b.Write(text)
		b.WriteString("\n")
	}
	return b.String()
}

// sameNames lists the names a batch gives twice when names compare as a
// case-insensitive instance (SQL Server's default) compares them, which
// CREATE refuses there (Msg 134 for a variable, 2705 for a column, 1011 for
// a correlation name): a module's parameters and the variables it declares,
// table variables too; the columns of each CREATE TABLE, CREATE TYPE … AS
// TABLE, DECLARE @t TABLE and OPENJSON … WITH list; and the table aliases
// of one query.
func sameNames(batch string) []string {
	c := code(batch)
	var out []string
	dup := func(what string, names []string) {
		seen := map[string]string{}
		for _, n := range names {
			k := strings.ToLower(n)
			if first, ok := seen[k]; ok {
				out = append(out, what+" "+first+" and "+n)
				continue
			}
			seen[k] = n
		}
	}
	var vars []string
	if m, ok, _ := migration.ParseModule(batch); ok {
		for _, p := range m.Params {
			vars = append(vars, "@"+p.Name)
		}
	}
	for _, loc := range regexp.MustCompile(`(?i)\bDECLARE\s+`).FindAllStringIndex(c, -1) {
		stmt := c[loc[1]:]
		if end := strings.IndexByte(stmt, ';'); end >= 0 {
			stmt = stmt[:end]
		}
		if next := regexp.MustCompile(`(?i)\bDECLARE\b`).FindStringIndex(stmt); next != nil {
			stmt = stmt[:next[0]]
		}
		for _, item := range splitTop(stmt) {
			if v := regexp.MustCompile(`^\s*(@\w+)`).FindStringSubmatch(item); v != nil {
				vars = append(vars, v[1])
			}
		}
	}
	dup("variables", vars)
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+[\w.\[\]"]+\s*\(`),
		regexp.MustCompile(`(?i)\bAS\s+TABLE\s*\(`),
		regexp.MustCompile(`(?i)\bDECLARE\s+@\w+\s+TABLE\s*\(`),
		regexp.MustCompile(`(?i)\bOPENJSON\s*\([^)]*\)\s*WITH\s*\(`),
	} {
		for _, loc := range re.FindAllStringIndex(c, -1) {
			open := loc[1] - 1
			var cols []string
			for _, item := range splitTop(c[open+1 : closing(c, open)]) {
				if f := strings.Fields(item); len(f) > 0 && !constraintWord[strings.ToUpper(f[0])] {
					cols = append(cols, strings.Trim(f[0], `[]"`))
				}
			}
			dup("columns", cols)
		}
	}
	for _, names := range aliasScopes(c) {
		dup("aliases", names)
	}
	return out
}

var constraintWord = map[string]bool{"CONSTRAINT": true, "PRIMARY": true, "UNIQUE": true, "FOREIGN": true, "CHECK": true, "INDEX": true}

// aliasScopes returns the table aliases of each query scope of code: a
// parenthesis opens a scope (a subquery may reuse an outer alias), and so do
// each branch of a UNION, EXCEPT or INTERSECT and each statement.
func aliasScopes(c string) map[int][]string {
	tok := regexp.MustCompile(`[\w@#$.\[\]"]+|[();,]`)
	toks := tok.FindAllString(c, -1)
	notAlias := map[string]bool{"WHERE": true, "ON": true, "INNER": true, "LEFT": true, "RIGHT": true, "FULL": true,
		"CROSS": true, "OUTER": true, "JOIN": true, "GROUP": true, "ORDER": true, "WITH": true, "OPTION": true,
		"UNION": true, "EXCEPT": true, "INTERSECT": true, "SET": true, "OUTPUT": true, "HAVING": true, "APPLY": true,
		"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "IF": true, "ELSE": true,
		"BEGIN": true, "END": true, "RETURN": true, "WHEN": true, "THEN": true, "COMMIT": true, "DECLARE": true}
	statement := map[string]bool{"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true,
		"IF": true, "ELSE": true, "WHILE": true, "DECLARE": true, "SET": true, "BEGIN": true, "END": true,
		"RETURN": true, "EXEC": true, "EXECUTE": true, "COMMIT": true, "THROW": true}
	out := map[int][]string{}
	next := 0
	scope := []int{0}
	skip := func(i int) int { // past the parenthesis that opens at i
		depth := 0
		for ; i < len(toks); i++ {
			switch toks[i] {
			case "(":
				depth++
			case ")":
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i := 0; i < len(toks); i++ {
		up := strings.ToUpper(toks[i])
		switch {
		case up == "(":
			next++
			scope = append(scope, next)
		case up == ")":
			if len(scope) > 1 {
				scope = scope[:len(scope)-1]
			}
		case up == "UNION" || up == "EXCEPT" || up == "INTERSECT" || up == ";" || (len(scope) == 1 && statement[up] && up != "SELECT"):
			next++
			scope[len(scope)-1] = next
		case up == "FROM" || up == "JOIN":
			j := i + 1
			if j < len(toks) && toks[j] == "(" {
				j = skip(j) // a derived table: its alias follows it, in this scope
			} else {
				j++ // the table, view or function
				if j < len(toks) && toks[j] == "(" {
					j = skip(j) // a function's arguments
				}
			}
			if j < len(toks) && strings.EqualFold(toks[j], "WITH") && j+1 < len(toks) && toks[j+1] == "(" {
				j = skip(j + 1) // table hints, or OPENJSON's columns
			}
			if j < len(toks) && strings.EqualFold(toks[j], "AS") {
				j++
			}
			if j < len(toks) && regexp.MustCompile(`^\w+$`).MatchString(toks[j]) && !notAlias[strings.ToUpper(toks[j])] {
				out[scope[len(scope)-1]] = append(out[scope[len(scope)-1]], toks[j])
			}
		}
	}
	return out
}

// unguarded lists the statements of a batch that would fail or change data a
// second time: anything that creates, alters, drops or writes, outside a
// CREATE OR ALTER module and not governed by an IF that tests for existence
// (IF … <statement>, or IF … BEGIN … END).
func unguarded(batch string) []string {
	c := code(batch)
	if regexp.MustCompile(`(?is)^\s*CREATE\s+OR\s+ALTER\s+(PROCEDURE|PROC|FUNCTION|VIEW|TRIGGER)\b`).MatchString(c) {
		return nil
	}
	type token struct {
		s     string // upper case
		depth int    // parentheses open around it
	}
	var toks []token
	depth := 0
	for _, s := range regexp.MustCompile(`[A-Za-z_@#][\w@#$]*|\S`).FindAllString(c, -1) {
		if s == ")" {
			depth--
		}
		toks = append(toks, token{strings.ToUpper(s), depth})
		if s == "(" {
			depth++
		}
	}
	statement := map[string]bool{"BEGIN": true, "CREATE": true, "ALTER": true, "DROP": true, "INSERT": true,
		"UPDATE": true, "DELETE": true, "MERGE": true, "TRUNCATE": true, "EXEC": true, "EXECUTE": true,
		"SELECT": true, "SET": true, "THROW": true, "PRINT": true, "RETURN": true}
	existence := regexp.MustCompile(`\b(OBJECT_ID|COL_LENGTH|TYPE_ID|EXISTS|INDEXPROPERTY|SCHEMA_ID|COLUMNPROPERTY)\b`)
	guarded := make([]bool, len(toks))
	for i, t := range toks {
		if t.s != "IF" || t.depth != 0 {
			continue
		}
		j := i + 1
		for j < len(toks) && !(toks[j].depth == 0 && statement[toks[j].s]) {
			j++
		}
		var cond []string
		for _, ct := range toks[i+1 : j] {
			cond = append(cond, ct.s)
		}
		if !existence.MatchString(strings.Join(cond, " ")) {
			continue
		}
		end := j
		if j < len(toks) && toks[j].s == "BEGIN" {
			level := 0
			for ; end < len(toks); end++ {
				switch toks[end].s {
				case "BEGIN", "CASE":
					level++
				case "END":
					level--
				}
				if level == 0 {
					break
				}
			}
		} else {
			for end < len(toks) && !(toks[end].s == ";" && toks[end].depth == 0) {
				end++
			}
		}
		for k := j; k < len(toks) && k <= end; k++ {
			guarded[k] = true
		}
	}
	changes := map[string]bool{"CREATE": true, "ALTER": true, "DROP": true, "INSERT": true, "UPDATE": true,
		"DELETE": true, "MERGE": true, "TRUNCATE": true, "EXEC": true, "EXECUTE": true}
	var out []string
	for i, t := range toks {
		if !changes[t.s] || guarded[i] {
			continue
		}
		if t.s == "DROP" && i+3 < len(toks) && toks[i+2].s == "IF" && toks[i+3].s == "EXISTS" {
			continue // DROP … IF EXISTS
		}
		var ctx []string
		for _, ct := range toks[i:min(i+4, len(toks))] {
			ctx = append(ctx, ct.s)
		}
		out = append(out, strings.Join(ctx, " "))
	}
	return out
}
