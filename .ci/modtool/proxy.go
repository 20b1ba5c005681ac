package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// writeProxy writes a GOPROXY directory (the layout of the module proxy
// protocol, served with file://) holding every published module at its
// declared version, made from the working tree: the files git tracks or
// would track (ignored files such as built binaries stay out).
func writeProxy(mods []*repoModule, out string) error {
	return eachPublished(mods, out, func(m *repoModule, dir string) error {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		base := filepath.Join(dir, m.Version)
		var buf bytes.Buffer
		if err := zipModule(&buf, m); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{m.Version, time.Now().UTC().Truncate(time.Second)})
		gomod, err := os.ReadFile(filepath.Join(m.AbsDir, "go.mod"))
		if err != nil {
			return err
		}
		for name, data := range map[string][]byte{
			base + ".zip":              buf.Bytes(),
			base + ".info":             info,
			base + ".mod":              gomod,
			filepath.Join(dir, "list"): []byte(m.Version + "\n"),
		} {
			if err := os.WriteFile(name, data, 0o644); err != nil {
				return err
			}
		}
		fmt.Printf("modtool: %s@%s (%d bytes)\n", m.Path, m.Version, buf.Len())
		return nil
	})
}

func zipModule(w io.Writer, m *repoModule) error {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate")
	cmd.Dir = m.AbsDir
	cmd.Stderr = os.Stderr
	listed, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	var files []zip.File
	for _, name := range strings.Split(strings.TrimRight(string(listed), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		abs := filepath.Join(m.AbsDir, filepath.FromSlash(name))
		if _, err := os.Lstat(abs); err != nil {
			continue // deleted in the working tree
		}
		files = append(files, file{name: name, abs: abs})
	}
	return zip.Create(w, module.Version{Path: m.Path, Version: m.Version}, files)
}

// file is one file of the working tree, for zip.Create.
type file struct{ name, abs string }

func (f file) Path() string                 { return f.name }
func (f file) Lstat() (os.FileInfo, error)  { return os.Lstat(f.abs) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(f.abs) }

// eachPublished calls f with every published module of mods and the
// directory of its versions in the GOPROXY directory proxyDir (<escaped
// module path>/@v), stopping at the first error.
func eachPublished(mods []*repoModule, proxyDir string, f func(m *repoModule, vdir string) error) error {
	for _, m := range mods {
		if !m.Published() {
			continue
		}
		esc, err := module.EscapePath(m.Path)
		if err != nil {
			return err
		}
		if err := f(m, filepath.Join(proxyDir, filepath.FromSlash(esc), "@v")); err != nil {
			return err
		}
	}
	return nil
}

// extract unpacks every published module's zip from the proxy at proxyDir
// into out/<module dir>: the files a user's go command would download.
func extract(mods []*repoModule, proxyDir, out string) error {
	return eachPublished(mods, proxyDir, func(m *repoModule, vdir string) error {
		z := filepath.Join(vdir, m.Version+".zip")
		dir := filepath.Join(out, filepath.FromSlash(m.Dir))
		if m.Dir == "." {
			dir = filepath.Join(out, "core")
		}
		return zip.Unzip(dir, module.Version{Path: m.Path, Version: m.Version}, z)
	})
}
