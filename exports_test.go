package ratelimit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxExports is the ceiling on the root package's exported names: top-level
// types, functions, variables and constants of its non-test files (each
// constant of a block counts; methods and struct fields do not). Lower it
// when you cut names; raising it needs a reason in review. 159 before the
// front door was cut (CHANGELOG, Renamed and removed); 106, then 108 for
// PeerIPConfig and ParseLimit (users looked for a parser of "100/min" and
// found none); 89 once the admin handler and tiers had packages of their
// own, the rule-level options gave way to Rule's fields, the policies
// became structs, and PeerIPConfig and ByIPPrefix became
// ClientIPConfig{Source: SourcePeer}; 90 for SlidingLog (the one algorithm
// exact in every trailing window); 85 when the store contract (Request,
// Window, Resetter, LocalStore, SystemClock) moved to package stores.
const maxExports = 85

// rootExports parses the package's non-test files and returns its exported
// top-level names, and separately its exported package-level variables.
func rootExports(t *testing.T) (names, vars []string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name.Name != "ratelimit" {
			continue
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if !n.IsExported() {
								continue
							}
							names = append(names, n.Name)
							if d.Tok == token.VAR {
								vars = append(vars, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names, vars
}

// TestExportedNamesStayUnderCeiling keeps the package's front door from
// growing back: a new exported name must replace one.
func TestExportedNamesStayUnderCeiling(t *testing.T) {
	names, _ := rootExports(t)
	if len(names) < 20 {
		t.Fatalf("found only %d exported names; is the parser reading the package?", len(names))
	}
	if len(names) > maxExports {
		t.Fatalf("package ratelimit exports %d names, more than maxExports (%d):\n%s",
			len(names), maxExports, strings.Join(names, "\n"))
	}
	t.Logf("%d exported names (ceiling %d)", len(names), maxExports)
}

// TestNoExportedMutableVariables: the only exported package-level variables
// are Err* sentinel errors. Anything else (a default, a hook, a clock) can be
// reassigned by any importer and changes every Limiter in the process.
func TestNoExportedMutableVariables(t *testing.T) {
	_, vars := rootExports(t)
	for _, v := range vars {
		if !strings.HasPrefix(v, "Err") {
			t.Errorf("exported package-level variable %s: make it a function, a constant or unexported", v)
		}
	}
}
