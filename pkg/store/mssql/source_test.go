package mssql

// Checks of the package's own Go source: where NULL parameters are made, and
// how queries with named placeholders are called.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// parsePackage parses every Go file of the package, tests too.
func parsePackage(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil || len(names) == 0 {
		t.Fatalf("no Go files: %v", err)
	}
	fset := token.NewFileSet()
	files := map[string]*ast.File{}
	for _, n := range names {
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[n] = f
	}
	return fset, files
}

// selector is "pkg.Name" for a selector expression on a package name.
func selector(e ast.Expr) string {
	if s, ok := e.(*ast.SelectorExpr); ok {
		if x, ok := s.X.(*ast.Ident); ok {
			return x.Name + "." + s.Sel.Name
		}
	}
	return ""
}

// A NULL parameter is made by params.go's constructors alone: anywhere else
// in the adapter, a literal of a sql.Null… or mssql.Null… type, or a nil
// handed to sql.Named, is a NULL written by hand, and the driver writes some
// of those malformed (params.go).
func TestNullsAreMadeInParams(t *testing.T) {
	fset, files := parsePackage(t)
	for name, f := range files {
		if name == "params.go" || strings.HasSuffix(name, "_test.go") {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if s := selector(n.Type); strings.HasPrefix(s, "sql.Null") || strings.HasPrefix(s, "mssql.Null") {
					t.Errorf("%s: %s{} written by hand: make a NULL parameter with params.go's constructor for its type", fset.Position(n.Pos()), s)
				}
			case *ast.CallExpr:
				if selector(n.Fun) == "sql.Named" && len(n.Args) == 2 {
					if id, ok := n.Args[1].(*ast.Ident); ok && id.Name == "nil" {
						t.Errorf("%s: sql.Named with an untyped nil (NULLTYPE, which some servers refuse): use params.go's constructor", fset.Position(n.Pos()))
					}
				}
			}
			return true
		})
	}
}

// queryText is a query argument's text: its string literals, with anything
// else (a table name put in) as a plain word.
func queryText(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		l, lok := queryText(e.X)
		r, rok := queryText(e.Y)
		if !lok && !rok {
			return "", false
		}
		return l + r, true
	case *ast.ParenExpr:
		return queryText(e.X)
	}
	return "x", false
}

// go-mssqldb names a positional argument @p1, @p2 …, so a query that uses
// @id and is given its value by position fails on the server ("Must declare
// the scalar variable @id"). Every query the package's source (its tests
// too) sends with arguments either binds only @p1 … by position or passes
// every argument with sql.Named.
func TestNamedPlaceholdersGetNamedArguments(t *testing.T) {
	fset, files := parsePackage(t)
	methods := map[string]int{"ExecContext": 1, "QueryContext": 1, "QueryRowContext": 1, "Exec": 0, "Query": 0, "QueryRow": 0}
	positional := regexp.MustCompile(`^@p\d+$`)
	checked := 0
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			at, ok := methods[sel.Sel.Name]
			if !ok || len(call.Args) <= at+1 || call.Ellipsis.IsValid() {
				return true
			}
			text, ok := queryText(call.Args[at])
			if !ok {
				return true
			}
			checked++
			var named []string
			for _, u := range undeclared(text, nil) {
				v := regexp.MustCompile(`@\w+`).FindString(u)
				if !positional.MatchString(v) {
					named = append(named, v)
				}
			}
			if len(named) == 0 {
				return true
			}
			for _, a := range call.Args[at+1:] {
				if c, ok := a.(*ast.CallExpr); !ok || selector(c.Fun) != "sql.Named" {
					t.Errorf("%s: a query using %v given an argument by position (go-mssqldb names it @p1 …): pass sql.Named", fset.Position(a.Pos()), named)
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Error("no query with arguments found: the check reads nothing")
	}
}
