package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRepo lays out files (path → content) under a temporary directory.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// goodRepo is a core and one nested module laid out as the repository's.
func goodRepo() map[string]string {
	return map[string]string{
		".ci/versions.txt":  ".  v0.1.0\nadapters/x  v0.1.0\nexamples unpublished\n",
		"go.mod":            "module example.com/rl\n\ngo 1.25.0\n",
		"rl.go":             "package rl\n",
		"internal/in/in.go": "package in\n",
		"adapters/x/go.mod": "module example.com/rl/adapters/x\n\ngo 1.25.0\n\n" +
			"require example.com/rl v0.1.0\n\nreplace example.com/rl => ../..\n",
		"adapters/x/x.go": "package x\n\nimport _ \"example.com/rl\"\n",
		"examples/go.mod": "module example.com/rl/examples\n\ngo 1.25.0\n\n" +
			"require example.com/rl/adapters/x v0.1.0\n\nreplace example.com/rl/adapters/x => ../adapters/x\n",
	}
}

func checkErrors(t *testing.T, files map[string]string) string {
	t.Helper()
	mods, err := loadRepo(writeRepo(t, files))
	if err != nil {
		return err.Error()
	}
	var msgs []string
	for _, e := range check(mods) {
		msgs = append(msgs, e.Error())
	}
	return strings.Join(msgs, "\n")
}

func TestConsistentRepoPasses(t *testing.T) {
	if got := checkErrors(t, goodRepo()); got != "" {
		t.Fatalf("errors on a consistent layout:\n%s", got)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]string)
		want string
	}{
		{"pseudo version", func(f map[string]string) {
			f["adapters/x/go.mod"] = strings.Replace(f["adapters/x/go.mod"], "v0.1.0", "v0.0.0", 1)
		}, "requires example.com/rl v0.0.0; .ci/versions.txt says v0.1.0"},
		{"no replace", func(f map[string]string) {
			f["adapters/x/go.mod"] = strings.Replace(f["adapters/x/go.mod"], "replace example.com/rl => ../..\n", "", 1)
		}, "without a replace"},
		{"replace elsewhere", func(f map[string]string) {
			f["adapters/x/go.mod"] = strings.Replace(f["adapters/x/go.mod"], "=> ../..", "=> ../../..", 1)
		}, "not its directory"},
		{"another module's internal package", func(f map[string]string) {
			f["adapters/x/bad.go"] = "package x\n\nimport _ \"example.com/rl/internal/in\"\n"
		}, "imports example.com/rl/internal/in, an internal package of module example.com/rl"},
		{"requires an unpublished module", func(f map[string]string) {
			f[".ci/versions.txt"] = strings.Replace(f[".ci/versions.txt"], "adapters/x  v0.1.0", "adapters/x unpublished", 1)
		}, "which is unpublished"},
		{"module missing from versions.txt", func(f map[string]string) {
			f["stores/y/go.mod"] = "module example.com/rl/stores/y\n\ngo 1.25.0\n"
		}, "stores/y/go.mod has no line in .ci/versions.txt"},
		{"path does not match directory", func(f map[string]string) {
			f["adapters/x/go.mod"] = strings.Replace(f["adapters/x/go.mod"], "module example.com/rl/adapters/x", "module example.com/other", 1)
		}, "want example.com/rl/adapters/x"},
		{"bad version", func(f map[string]string) {
			f[".ci/versions.txt"] = strings.Replace(f[".ci/versions.txt"], ".  v0.1.0", ".  0.1", 1)
		}, "not a canonical semantic version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := goodRepo()
			tc.edit(files)
			if got := checkErrors(t, files); !strings.Contains(got, tc.want) {
				t.Fatalf("errors:\n%s\nwant one containing %q", got, tc.want)
			}
		})
	}
}

func TestOwnInternalPackagesAreFine(t *testing.T) {
	files := goodRepo()
	files["adapters/x/internal/y/y.go"] = "package y\n"
	files["adapters/x/z.go"] = "package x\n\nimport _ \"example.com/rl/adapters/x/internal/y\"\n"
	files["rl2.go"] = "package rl\n\nimport _ \"example.com/rl/internal/in\"\n"
	if got := checkErrors(t, files); got != "" {
		t.Fatalf("a module importing its own internal packages was flagged:\n%s", got)
	}
}
