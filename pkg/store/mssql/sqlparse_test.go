package mssql

// Just enough T-SQL (and SQLite DDL) reading for the offline schema tests:
// comments out, strings emptied, modules with their parameters, tables with
// their columns, indexes, and which statements an existence check guards.

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// code returns SQL with its comments removed and its string literals emptied,
// so keyword searches see only code.
func code(text string) string {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(text); i++ {
		c, next := text[i], byte(0)
		if i+1 < len(text) {
			next = text[i+1]
		}
		switch {
		case depth > 0:
			if c == '/' && next == '*' {
				depth++
				i++
			} else if c == '*' && next == '/' {
				depth--
				i++
				if depth == 0 {
					b.WriteByte(' ')
				}
			}
		case c == '-' && next == '-':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		case c == '/' && next == '*':
			depth = 1
			i++
		case c == '\'':
			j := i + 1
			for j < len(text) {
				if text[j] == '\'' {
					if j+1 < len(text) && text[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			b.WriteString("''")
			i = j
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// objectName drops brackets, quotes and the dbo schema.
func objectName(s string) string {
	s = strings.NewReplacer("[", "", "]", "", `"`, "").Replace(s)
	if strings.HasPrefix(strings.ToLower(s), "dbo.") {
		return s[len("dbo."):]
	}
	return s
}

// splitTop splits s on commas outside parentheses.
func splitTop(s string) []string {
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

// closing returns the index of the parenthesis that closes the one at open.
func closing(s string, open int) int {
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

// procParam is one parameter of a procedure or function.
type procParam struct {
	name     string // without @
	typ      string // upper case, e.g. NVARCHAR(MAX), DBO.PRIMEFLOWIDLIST
	def      string // the default as written; "" when none
	readonly bool   // a table-valued parameter
}

// module is a procedure or function of the scripts.
type module struct {
	kind   string // PROCEDURE or FUNCTION
	name   string // without dbo.
	params []procParam
}

// optional reports whether a caller may leave p out.
func (p procParam) optional() bool { return p.def != "" || p.readonly }

// modules reads every CREATE OR ALTER PROCEDURE/FUNCTION of the scripts.
func modules(t *testing.T, scripts []script) map[string]module {
	t.Helper()
	head := regexp.MustCompile(`(?is)^\s*CREATE\s+OR\s+ALTER\s+(PROCEDURE|PROC|FUNCTION)\s+([\w.\[\]]+)`)
	procEnd := regexp.MustCompile(`(?is)\bAS\b`)
	funcEnd := regexp.MustCompile(`(?is)\bRETURNS\b`)
	param := regexp.MustCompile(`(?is)^@(\w+)\s+([\w.]+(?:\s*\([\w\s,]*\))?)\s*(?:=\s*(\S+?))?\s*(READONLY)?$`)
	out := map[string]module{}
	for _, sc := range scripts {
		for _, b := range sc.batches {
			c := code(b.sql)
			m := head.FindStringSubmatchIndex(c)
			if m == nil {
				continue
			}
			mod := module{kind: strings.ToUpper(c[m[2]:m[3]]), name: objectName(c[m[4]:m[5]])}
			if mod.kind == "PROC" {
				mod.kind = "PROCEDURE"
			}
			rest := c[m[1]:]
			end := procEnd
			if mod.kind == "FUNCTION" {
				end = funcEnd
			}
			loc := end.FindStringIndex(rest)
			if loc == nil {
				t.Fatalf("%s: %s %s has no body", sc.name, mod.kind, mod.name)
			}
			list := strings.TrimSpace(rest[:loc[0]])
			if mod.kind == "FUNCTION" {
				list = strings.TrimSuffix(strings.TrimPrefix(list, "("), ")")
			}
			for _, p := range splitTop(list) {
				pm := param.FindStringSubmatch(strings.TrimSpace(p))
				if pm == nil {
					t.Fatalf("%s: %s: cannot read parameter %q", sc.name, mod.name, strings.TrimSpace(p))
				}
				mod.params = append(mod.params, procParam{
					name: pm[1], typ: strings.ToUpper(strings.Join(strings.Fields(pm[2]), "")), def: pm[3], readonly: pm[4] != "",
				})
			}
			if _, dup := out[mod.name]; dup {
				t.Fatalf("%s: %s is defined twice", sc.name, mod.name)
			}
			out[mod.name] = mod
		}
	}
	return out
}

// tables reads the tables and their columns from CREATE TABLE and
// ALTER TABLE … ADD, in SQL Server or SQLite DDL.
func tables(text string) map[string][]string {
	c := code(text)
	create := regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\[\]"]+)\s*\(`)
	add := regexp.MustCompile(`(?i)\bALTER\s+TABLE\s+([\w.\[\]"]+)\s+ADD\s+(?:COLUMN\s+)?(\w+)`)
	constraint := map[string]bool{"CONSTRAINT": true, "PRIMARY": true, "UNIQUE": true, "FOREIGN": true, "CHECK": true, "INDEX": true}
	out := map[string][]string{}
	for _, m := range create.FindAllStringSubmatchIndex(c, -1) {
		name := objectName(c[m[2]:m[3]])
		open := m[1] - 1
		body := c[open+1 : closing(c, open)]
		for _, item := range splitTop(body) {
			f := strings.Fields(item)
			if len(f) > 0 && !constraint[strings.ToUpper(f[0])] {
				out[name] = append(out[name], strings.Trim(f[0], `[]"`))
			}
		}
	}
	for _, m := range add.FindAllStringSubmatch(c, -1) {
		name := objectName(m[1])
		if !slices.Contains(out[name], m[2]) {
			out[name] = append(out[name], m[2])
		}
	}
	for name := range out {
		slices.Sort(out[name])
	}
	return out
}

// indexes reads the named indexes of each table.
func indexes(text string) map[string][]string {
	re := regexp.MustCompile(`(?i)\bCREATE\s+(?:UNIQUE\s+)?(?:NONCLUSTERED\s+|CLUSTERED\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s+([\w.\[\]"]+)`)
	out := map[string][]string{}
	for _, m := range re.FindAllStringSubmatch(code(text), -1) {
		out[objectName(m[2])] = append(out[objectName(m[2])], m[1])
	}
	for name := range out {
		slices.Sort(out[name])
	}
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
