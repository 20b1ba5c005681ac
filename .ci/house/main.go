// Command house measures how the files of one Go package depend on each
// other: a file references another when it uses a top-level declaration,
// method or field declared there. It reports the number of non-test
// files, of references between them, of mutual pairs (two files that
// reference each other) and the size of the largest knot (a set of files
// that all reach each other through references).
//
//	cd .ci/house && GOWORK=off go run . ../..     # the root package
//	cd .ci/house && GOWORK=off go run . -v ../..  # and its mutual pairs and knot
//	cd .ci/house && GOWORK=off go run . -max-mutual 14 -max-knot 16 ../..
//
// With -max-mutual or -max-knot it exits with status 1 when the package
// exceeds them, so that a knot cannot grow back unnoticed.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list the mutual pairs and the largest knot")
	maxMutual := flag.Int("max-mutual", -1, "fail above this many mutual pairs")
	maxKnot := flag.Int("max-knot", -1, "fail above a knot of this many files")
	flag.Parse()
	dir := "."
	if flag.NArg() > 0 {
		dir = flag.Arg(0)
	}
	// Imports are resolved from the package's own module.
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir = "."
	fset := token.NewFileSet()
	paths, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check(files[0].Name.Name, fset, files, info)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	name := func(pos token.Pos) string { return filepath.Base(fset.Position(pos).Filename) }
	uses := map[string]map[string]bool{}
	for _, f := range files {
		uses[name(f.Pos())] = map[string]bool{}
	}
	add := func(at token.Pos, obj types.Object) {
		if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() {
			return
		}
		// Only top-level declarations and methods and fields: a use of a
		// local variable is not a reference between files.
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			return
		}
		from, to := name(at), name(obj.Pos())
		if from != to {
			if _, ok := uses[to]; ok {
				uses[from][to] = true
			}
		}
	}
	for id, obj := range info.Uses {
		add(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		add(sel.Sel.Pos(), s.Obj())
	}
	var names []string
	for n := range uses {
		names = append(names, n)
	}
	sort.Strings(names)
	edges, mutual := 0, 0
	var pairs []string
	for _, a := range names {
		edges += len(uses[a])
		for b := range uses[a] {
			if a < b && uses[b][a] {
				mutual++
				pairs = append(pairs, a+" <-> "+b)
			}
		}
	}
	sort.Strings(pairs)
	knot := largestKnot(names, uses)
	if *verbose {
		for _, p := range pairs {
			fmt.Println(p)
		}
		fmt.Println("knot:", strings.Join(knot, " "))
	}
	fmt.Printf("files %d  references %d  mutual pairs %d  largest knot %d files\n", len(names), edges, mutual, len(knot))
	if *maxMutual >= 0 && mutual > *maxMutual {
		fmt.Fprintf(os.Stderr, "house: %d mutual pairs, more than %d\n", mutual, *maxMutual)
		os.Exit(1)
	}
	if *maxKnot >= 0 && len(knot) > *maxKnot {
		fmt.Fprintf(os.Stderr, "house: a knot of %d files, more than %d\n", len(knot), *maxKnot)
		os.Exit(1)
	}
}

// largestKnot is the largest set of files that all reach each other
// through references (Tarjan's strongly connected components), sorted.
func largestKnot(names []string, uses map[string]map[string]bool) []string {
	index, low, on := map[string]int{}, map[string]int{}, map[string]bool{}
	var stack []string
	n := 0
	var best []string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = n, n
		n++
		stack = append(stack, v)
		on[v] = true
		for w := range uses[v] {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if on[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			size := 0
			var members []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				on[w] = false
				size++
				members = append(members, w)
				if w == v {
					break
				}
			}
			if size > len(best) {
				best = members
			}
		}
	}
	for _, v := range names {
		if _, seen := index[v]; !seen {
			visit(v)
		}
	}
	sort.Strings(best)
	return best
}
