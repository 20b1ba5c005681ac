package config

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// walker reads yaml nodes and collects every problem it meets, so that one
// pass reports them all.
type walker struct {
	file string
	errs Errors
}

func (w *walker) fail(n *yaml.Node, path, format string, a ...any) {
	w.errs = append(w.errs, Problem{File: w.file, Line: n.Line, Col: n.Column, Path: path, Message: fmt.Sprintf(format, a...)})
}

// field is one key of a mapping: its key node (for positions) and value.
type field struct {
	key, val *yaml.Node
}

// fields returns the keys of mapping n that are among allowed, reporting a
// node that is not a mapping, unknown keys and keys given twice.
func (w *walker) fields(n *yaml.Node, path string, allowed ...string) map[string]field {
	if n.Kind != yaml.MappingNode {
		w.fail(n, path, "want a mapping, got %s", kindName(n))
		return nil
	}
	m := make(map[string]field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			w.fail(k, path, "a key must be a plain string")
			continue
		}
		switch {
		case !slices.Contains(allowed, k.Value):
			w.fail(k, path, "unknown field %q (known: %v)", k.Value, allowed)
		case m[k.Value].key != nil:
			prev := m[k.Value].key
			w.fail(k, join(path, k.Value), "field given twice (first at line %d)", prev.Line)
		default:
			m[k.Value] = field{k, v}
		}
	}
	return m
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias (aliases are not supported)"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "a document"
}

func (w *walker) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Value == "" {
		w.fail(n, path, "want a non-empty string, got %s", kindName(n))
		return "", false
	}
	return n.Value, true
}

func (w *walker) boolean(n *yaml.Node, path string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		b, err := strconv.ParseBool(n.Value)
		if err == nil {
			return b, true
		}
	}
	w.fail(n, path, "want true or false, got %s", kindName(n))
	return false, false
}

func (w *walker) count(n *yaml.Node, path string, lo int) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		v, err := strconv.Atoi(n.Value)
		if err == nil && v >= lo && v <= 1<<31-1 {
			return v, true
		}
	}
	w.fail(n, path, "want a whole number from %d to 2147483647, got %s", lo, kindName(n))
	return 0, false
}

func (w *walker) duration(n *yaml.Node, path string) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode {
		if d, err := time.ParseDuration(n.Value); err == nil && d > 0 {
			return d, true
		}
	}
	w.fail(n, path, "want a positive duration such as 30s or 1m, got %s", kindName(n))
	return 0, false
}

// strs reads a list of strings, or a single string as a list of one.
func (w *walker) strs(n *yaml.Node, path string) []string {
	if n.Kind == yaml.ScalarNode {
		if s, ok := w.str(n, path); ok {
			return []string{s}
		}
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		w.fail(n, path, "want a list of strings, got %s", kindName(n))
		return nil
	}
	var out []string
	for i, c := range n.Content {
		if s, ok := w.str(c, fmt.Sprintf("%s[%d]", path, i)); ok {
			out = append(out, s)
		}
	}
	return out
}
