package compose_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// modulePrefix is the import path prefix of the workspace's modules; the
// path below it is the directory under the repository root.
const modulePrefix = "github.com/ethosbuilding/primeflow/"

// goPackage is one directory's non-test Go files.
type goPackage struct {
	dir   string
	files []*ast.File
}

// parseDir parses the non-test Go files of dir (none is not an error).
func parseDir(t *testing.T, dir string) goPackage {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	p := goPackage{dir: dir}
	fset := token.NewFileSet()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parse %s: %v", filepath.Join(dir, name), err)
		}
		p.files = append(p.files, f)
	}
	return p
}

// goDirs lists every directory holding Go files under the given roots.
func goDirs(t *testing.T, roots ...string) []string {
	t.Helper()
	var dirs []string
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				dir := filepath.Dir(path)
				if len(dirs) == 0 || dirs[len(dirs)-1] != dir {
					dirs = append(dirs, dir)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", root, err)
		}
	}
	return dirs
}

func unquote(lit ast.Expr) (string, bool) {
	b, ok := lit.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

// imports maps a file's package names to import paths.
func imports(f *ast.File) map[string]string {
	m := make(map[string]string)
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := filepath.Base(path)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		m[name] = path
	}
	return m
}

// envIndex finds the environment variables that caarlos0/env reads from
// the struct types of the repository: `env:"NAME"` tags, nested structs, and
// `envPrefix:"P_"` on a nested struct field.
type envIndex struct {
	t    *testing.T
	root string
	pkgs map[string]goPackage // by directory
}

func newEnvIndex(t *testing.T, root string) *envIndex {
	return &envIndex{t: t, root: root, pkgs: make(map[string]goPackage)}
}

func (x *envIndex) pkg(dir string) goPackage {
	p, ok := x.pkgs[dir]
	if !ok {
		p = parseDir(x.t, dir)
		x.pkgs[dir] = p
	}
	return p
}

// names is every variable read by any struct type declared in dirs.
func (x *envIndex) names(dirs []string) map[string]bool {
	out := make(map[string]bool)
	for _, dir := range dirs {
		for _, f := range x.pkg(dir).files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.TYPE {
					continue
				}
				for _, spec := range gd.Specs {
					ts := spec.(*ast.TypeSpec)
					if st, ok := ts.Type.(*ast.StructType); ok {
						x.structNames(st, f, dir, "", out, 0)
					}
				}
			}
		}
	}
	return out
}

func (x *envIndex) structNames(st *ast.StructType, f *ast.File, dir, prefix string, out map[string]bool, depth int) {
	if depth > 8 {
		x.t.Fatalf("env structs nest deeper than 8 in %s", dir)
	}
	for _, field := range st.Fields.List {
		var tag reflect.StructTag
		if field.Tag != nil {
			s, _ := unquote(field.Tag)
			tag = reflect.StructTag(s)
		}
		if name, ok := tag.Lookup("env"); ok {
			name, _, _ = strings.Cut(name, ",")
			if name != "" && name != "-" {
				out[prefix+name] = true
				if tag.Get("secret") == "true" {
					out[prefix+name+"_FILE"] = true // pkg/config reads a secret from the file its _FILE twin names
				}
			}
			continue
		}
		// caarlos0/env walks into nested structs, adding envPrefix if set.
		nested, nf, ndir := x.resolve(field.Type, f, dir)
		if nested != nil {
			x.structNames(nested, nf, ndir, prefix+tag.Get("envPrefix"), out, depth+1)
		}
	}
}

// resolve finds the struct type a field's type names, when it is declared
// in the repository.
func (x *envIndex) resolve(expr ast.Expr, f *ast.File, dir string) (*ast.StructType, *ast.File, string) {
	switch e := expr.(type) {
	case *ast.StarExpr:
		return x.resolve(e.X, f, dir)
	case *ast.Ident:
		return x.lookup(dir, e.Name)
	case *ast.SelectorExpr:
		pkgName, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, nil, ""
		}
		path, ok := imports(f)[pkgName.Name]
		if !ok || !strings.HasPrefix(path, modulePrefix) {
			return nil, nil, ""
		}
		return x.lookup(filepath.Join(x.root, filepath.FromSlash(strings.TrimPrefix(path, modulePrefix))), e.Sel.Name)
	}
	return nil, nil, ""
}

func (x *envIndex) lookup(dir, name string) (*ast.StructType, *ast.File, string) {
	if _, err := os.Stat(dir); err != nil {
		return nil, nil, ""
	}
	for _, f := range x.pkg(dir).files {
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok && ts.Name.Name == name {
					return st, f, dir
				}
			}
		}
	}
	return nil, nil, ""
}

// metricFamily is a metric the Go code exports and the labels its series
// carry.
type metricFamily struct {
	labels map[string]bool
	where  string
}

// codeMetrics finds the Prometheus metrics declared in dirs: the Name of
// the Opts given to prometheus.New{Counter,Gauge,Histogram,Summary}[Vec],
// the name given to prometheus.NewDesc, their variable and constant labels,
// and labels added by prometheus.WrapRegistererWith in the same function.
// A histogram yields its _bucket (with le), _sum and _count series.
func codeMetrics(t *testing.T, dirs []string) map[string]metricFamily {
	t.Helper()
	out := make(map[string]metricFamily)
	for _, dir := range dirs {
		for _, f := range parseDir(t, dir).files {
			for _, decl := range f.Decls {
				var wrap, labelVars map[string]bool
				if fd, ok := decl.(*ast.FuncDecl); ok {
					wrap, labelVars = funcLabels(fd)
				}
				ast.Inspect(decl, func(n ast.Node) bool {
					call, ok := n.(*ast.CallExpr)
					if !ok {
						return true
					}
					fn := promFunc(call.Fun)
					if fn == "" {
						return true
					}
					name, labels, kind, ok := metricCall(fn, call, labelVars)
					if !ok {
						return true
					}
					if name == "" || labels == nil {
						t.Errorf("%s: prometheus.%s: cannot read the metric name or labels (literals expected)", dir, fn)
						return true
					}
					for l := range wrap {
						labels[l] = true
					}
					add := func(n string, extra ...string) {
						ls := make(map[string]bool, len(labels)+1)
						for l := range labels {
							ls[l] = true
						}
						for _, l := range extra {
							ls[l] = true
						}
						out[n] = metricFamily{labels: ls, where: dir}
					}
					switch kind {
					case "histogram":
						add(name+"_bucket", "le")
						add(name + "_sum")
						add(name + "_count")
					case "summary":
						add(name, "quantile")
						add(name + "_sum")
						add(name + "_count")
					default:
						add(name)
					}
					return true
				})
			}
		}
	}
	return out
}

// promFunc is the name of a prometheus.X function a call calls, or "".
func promFunc(fun ast.Expr) string {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "prometheus" {
		return ""
	}
	return sel.Sel.Name
}

// funcLabels finds, in one function, the keys of the labels its metrics are
// wrapped with (prometheus.WrapRegistererWith) and of every
// prometheus.Labels literal (constant labels handed to NewDesc by name).
func funcLabels(fd *ast.FuncDecl) (wrap, vars map[string]bool) {
	wrap, vars = make(map[string]bool), make(map[string]bool)
	ast.Inspect(fd, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if promFunc(n.Fun) == "WrapRegistererWith" && len(n.Args) > 0 {
				for k := range labelKeys(n.Args[0]) {
					wrap[k] = true
				}
			}
		case *ast.CompositeLit:
			if promFunc(n.Type) == "Labels" {
				for k := range labelKeys(n) {
					vars[k] = true
				}
			}
		}
		return true
	})
	return wrap, vars
}

func labelKeys(e ast.Expr) map[string]bool {
	out := make(map[string]bool)
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return out
	}
	for _, elt := range cl.Elts {
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			if k, ok := unquote(kv.Key); ok {
				out[k] = true
			}
		}
	}
	return out
}

func stringList(e ast.Expr) map[string]bool {
	if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
		return map[string]bool{}
	}
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	out := make(map[string]bool)
	for _, elt := range cl.Elts {
		s, ok := unquote(elt)
		if !ok {
			return nil
		}
		out[s] = true
	}
	return out
}

// metricCall reads one prometheus constructor call; ok is false for calls
// that declare no metric.
func metricCall(fn string, call *ast.CallExpr, labelVars map[string]bool) (name string, labels map[string]bool, kind string, ok bool) {
	kinds := map[string]string{
		"NewCounter": "counter", "NewCounterVec": "counter", "NewCounterFunc": "counter",
		"NewGauge": "gauge", "NewGaugeVec": "gauge", "NewGaugeFunc": "gauge",
		"NewHistogram": "histogram", "NewHistogramVec": "histogram",
		"NewSummary": "summary", "NewSummaryVec": "summary",
	}
	if fn == "NewDesc" {
		if len(call.Args) < 4 {
			return "", nil, "", false
		}
		name, _ = unquote(call.Args[0])
		labels = stringList(call.Args[2])
		if labels != nil {
			switch c := call.Args[3].(type) {
			case *ast.CompositeLit:
				for k := range labelKeys(c) {
					labels[k] = true
				}
			case *ast.Ident:
				if c.Name != "nil" {
					for k := range labelVars {
						labels[k] = true
					}
				}
			}
		}
		// A Desc's type is chosen at collection time; the _bucket of a
		// const histogram would be missed here, and none is used.
		return name, labels, "desc", true
	}
	kind, ok = kinds[fn]
	if !ok || len(call.Args) == 0 {
		return "", nil, "", false
	}
	opts, isLit := call.Args[0].(*ast.CompositeLit)
	if !isLit {
		return "", nil, kind, true
	}
	var parts [3]string // namespace, subsystem, name
	constLabels := map[string]bool{}
	for _, elt := range opts.Elts {
		kv, isKV := elt.(*ast.KeyValueExpr)
		if !isKV {
			continue
		}
		key, _ := kv.Key.(*ast.Ident)
		if key == nil {
			continue
		}
		v, _ := unquote(kv.Value)
		switch key.Name {
		case "Namespace":
			parts[0] = v
		case "Subsystem":
			parts[1] = v
		case "Name":
			parts[2] = v
		case "ConstLabels":
			constLabels = labelKeys(kv.Value)
		}
	}
	if parts[2] == "" {
		return "", nil, kind, true
	}
	var full []string
	for _, p := range parts {
		if p != "" {
			full = append(full, p)
		}
	}
	name = strings.Join(full, "_")
	labels = map[string]bool{}
	if strings.HasSuffix(fn, "Vec") {
		if len(call.Args) < 2 {
			return name, nil, kind, true
		}
		if labels = stringList(call.Args[1]); labels == nil {
			return name, nil, kind, true
		}
	}
	for k := range constLabels {
		labels[k] = true
	}
	return name, labels, kind, true
}

// durables is every string constant named Durable… in the services' own
// packages: the JetStream consumers they create.
func durables(t *testing.T, servicesDir string) map[string]string {
	t.Helper()
	out := make(map[string]string) // consumer → service
	entries, err := os.ReadDir(servicesDir)
	if err != nil {
		t.Fatalf("read %s: %v", servicesDir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for _, f := range parseDir(t, filepath.Join(servicesDir, e.Name())).files {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !strings.HasPrefix(n.Name, "Durable") || i >= len(vs.Values) {
							continue
						}
						if v, ok := unquote(vs.Values[i]); ok {
							out[v] = e.Name()
						}
					}
				}
			}
		}
	}
	return out
}
