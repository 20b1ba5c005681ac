package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// check returns every violation of the module layout:
//   - a module's path does not match its directory;
//   - a requirement of a sibling module names a version other than the one
//     in .ci/versions.txt, or names an unpublished module;
//   - a required sibling has no replace directive to its local directory,
//     or a replace names a sibling that is not required;
//   - a package imports an internal package of another module (Go allows it
//     inside one repository path, but a user with other versions of the two
//     modules can break).
func check(mods []*repoModule) []error {
	var errs []error
	byPath := map[string]*repoModule{}
	root := mods[0]
	for _, m := range mods {
		byPath[m.Path] = m
		if m.Dir == "." {
			root = m
		}
	}
	for _, m := range mods {
		want := root.Path + "/" + m.Dir
		if m.Dir == "." {
			want = root.Path
		}
		if m.Path != want {
			errs = append(errs, fmt.Errorf("%s/go.mod: module %s, want %s", m.Dir, m.Path, want))
		}
		errs = append(errs, checkRequires(m, byPath)...)
		errs = append(errs, checkInternalImports(m, mods)...)
	}
	return errs
}

func checkRequires(m *repoModule, byPath map[string]*repoModule) []error {
	var errs []error
	replaced := map[string]string{}
	for _, r := range m.File.Replace {
		if _, ours := byPath[r.Old.Path]; ours {
			replaced[r.Old.Path] = r.New.Path
		}
	}
	required := map[string]bool{}
	for _, r := range m.File.Require {
		s, ours := byPath[r.Mod.Path]
		if !ours {
			continue
		}
		required[s.Path] = true
		switch {
		case !s.Published():
			errs = append(errs, fmt.Errorf("%s/go.mod requires %s, which is unpublished", m.Dir, s.Path))
		case r.Mod.Version != s.Version:
			errs = append(errs, fmt.Errorf("%s/go.mod requires %s %s; .ci/versions.txt says %s", m.Dir, s.Path, r.Mod.Version, s.Version))
		}
		to, ok := replaced[s.Path]
		if !ok {
			errs = append(errs, fmt.Errorf("%s/go.mod requires %s without a replace to its local directory", m.Dir, s.Path))
			continue
		}
		if filepath.Clean(filepath.Join(m.AbsDir, to)) != s.AbsDir {
			errs = append(errs, fmt.Errorf("%s/go.mod replaces %s with %s, not its directory %s", m.Dir, s.Path, to, s.Dir))
		}
	}
	for p := range replaced {
		if !required[p] {
			errs = append(errs, fmt.Errorf("%s/go.mod replaces %s, which it does not require", m.Dir, p))
		}
	}
	return errs
}

// checkInternalImports parses the imports of every .go file of m.
func checkInternalImports(m *repoModule, mods []*repoModule) []error {
	var errs []error
	fset := token.NewFileSet()
	err := filepath.WalkDir(m.AbsDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == m.AbsDir {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !isInternal(path) {
				continue
			}
			if owner := ownerOf(path, mods); owner != nil && owner != m {
				rel, _ := filepath.Rel(m.AbsDir, p)
				errs = append(errs, fmt.Errorf("%s/%s imports %s, an internal package of module %s",
					m.Dir, filepath.ToSlash(rel), path, owner.Path))
			}
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errs
}

func isInternal(path string) bool {
	return strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// ownerOf returns the repository module whose path is the longest prefix of
// the package path, or nil.
func ownerOf(pkg string, mods []*repoModule) *repoModule {
	var best *repoModule
	for _, m := range mods {
		if pkg == m.Path || strings.HasPrefix(pkg, m.Path+"/") {
			if best == nil || len(m.Path) > len(best.Path) {
				best = m
			}
		}
	}
	return best
}
