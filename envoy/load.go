package envoy

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// source is the content of a configuration path: one file, or every
// .yaml and .yml file of a directory, in name order.
type source struct {
	names []string
	data  [][]byte
}

// readSource reads path, a file or a directory (not recursively; hidden
// files are skipped, so that a Kubernetes ConfigMap's ..data entries are
// not read twice). A directory without a configuration file is an error.
func readSource(path string) (*source, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: envoy configuration: %w", err)
	}
	src := &source{}
	if !fi.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: envoy configuration: %w", err)
		}
		src.names, src.data = []string{path}, [][]byte{data}
		return src, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("ratelimit: envoy configuration: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		ext := filepath.Ext(name)
		if strings.HasPrefix(name, ".") || ext != ".yaml" && ext != ".yml" {
			continue
		}
		full := filepath.Join(path, name)
		if st, err := os.Stat(full); err != nil || st.IsDir() {
			continue
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return nil, fmt.Errorf("ratelimit: envoy configuration: %w", err)
		}
		src.names, src.data = append(src.names, full), append(src.data, data)
	}
	if len(src.names) == 0 {
		// Refused as an empty file is: loaded, it would lift every limit.
		return nil, fmt.Errorf("ratelimit: envoy configuration: %s holds no .yaml or .yml file", path)
	}
	return src, nil
}

// equal reports whether two reads found the same files with the same
// content.
func (s *source) equal(o *source) bool {
	return o != nil && slices.Equal(s.names, o.names) && slices.EqualFunc(s.data, o.data, bytes.Equal)
}

// compile parses and compiles every file, reporting the problems of all
// of them at once.
func (s *source) compile() (*Rules, error) {
	var problems ConfigErrors
	files := make([]*File, 0, len(s.names))
	for i, name := range s.names {
		f, err := ParseFile(name, s.data[i])
		if pe, ok := err.(ConfigErrors); ok {
			problems = append(problems, pe...)
			continue
		}
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return Compile(files...)
}

// Load reads and compiles the configuration at path: a file of the
// reference's format, or a directory of them (every .yaml and .yml file,
// as the reference's runtime directory; at least one, as a file must hold
// a domain).
func Load(path string) (*Rules, error) {
	src, err := readSource(path)
	if err != nil {
		return nil, err
	}
	return src.compile()
}
