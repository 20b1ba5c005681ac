package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

const unpublished = "unpublished"

// repoModule is one go.mod of the repository.
type repoModule struct {
	Dir     string // relative to the repository root, "." for the core
	AbsDir  string
	Path    string // module path
	Version string // next release, or "unpublished"
	File    *modfile.File
}

// Published reports whether the module is tagged and served to users.
func (m *repoModule) Published() bool { return m.Version != unpublished }

// loadRepo reads .ci/versions.txt and every go.mod below root (except the
// tools under .ci), and fails if the two lists differ.
func loadRepo(root string) ([]*repoModule, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	versions, err := readVersions(filepath.Join(root, ".ci", "versions.txt"))
	if err != nil {
		return nil, err
	}
	var mods []*repoModule
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		v, ok := versions[dir]
		if !ok {
			return fmt.Errorf("%s has no line in .ci/versions.txt (give it a version or %q)", filepath.Join(dir, "go.mod"), unpublished)
		}
		delete(versions, dir)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		f, err := modfile.Parse(p, data, nil)
		if err != nil {
			return err
		}
		mods = append(mods, &repoModule{Dir: dir, AbsDir: filepath.Dir(p), Path: f.Module.Mod.Path, Version: v, File: f})
		return nil
	})
	if err != nil {
		return nil, err
	}
	for dir := range versions {
		return nil, fmt.Errorf(".ci/versions.txt lists %s, which has no go.mod", dir)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Dir < mods[j].Dir })
	return mods, nil
}

func readVersions(name string) (map[string]string, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	versions := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"dir version\"", name, n)
		}
		dir, v := fields[0], fields[1]
		if v != unpublished && (!semver.IsValid(v) || semver.Canonical(v) != v) {
			return nil, fmt.Errorf("%s:%d: %q is not a canonical semantic version", name, n, v)
		}
		if _, dup := versions[dir]; dup {
			return nil, fmt.Errorf("%s:%d: %s listed twice", name, n, dir)
		}
		versions[dir] = v
	}
	return versions, sc.Err()
}
