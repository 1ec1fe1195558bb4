package mssql

// Checks of the package's own Go source.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
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
