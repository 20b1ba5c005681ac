package config

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// sameTree reports where a and b differ, ignoring comments: "" when they
// do not.
func sameTree(a, b *yaml.Node, path string) string {
	if a.Kind != b.Kind || a.Tag != b.Tag || a.Value != b.Value || a.Anchor != b.Anchor ||
		a.Style != b.Style || a.Line != b.Line || a.Column != b.Column || len(a.Content) != len(b.Content) {
		return fmt.Sprintf("%s: %+v\nvs %+v", path, *a, *b)
	}
	for i := range a.Content {
		if d := sameTree(a.Content[i], b.Content[i], fmt.Sprintf("%s/%d", path, i)); d != "" {
			return d
		}
	}
	return ""
}

// compareParse parses src with parse and with the YAML parser. It reports
// whether parse parsed, and how its tree differs from the parser's (""
// when it does not).
func compareParse(src string, parse func([]byte) (*yaml.Node, bool)) (bool, string) {
	var whole yaml.Node
	werr := yaml.Unmarshal([]byte(src), &whole)
	doc, ok := parse([]byte(src))
	switch {
	case !ok:
		return false, ""
	case werr != nil:
		return true, fmt.Sprintf("parsed a file the parser rejects (%v)", werr)
	}
	return true, sameTree(doc, &whole, "")
}

func inPieces(data []byte) (*yaml.Node, bool) { return parseInPieces(data, 0, 3) }

func checkPieces(t *testing.T, src string, wantPieces bool) {
	t.Helper()
	ok, diff := compareParse(src, inPieces)
	if ok != wantPieces || diff != "" {
		t.Fatalf("parsed in pieces: %v (want %v); %s\n%s", ok, wantPieces, diff, src)
	}
}

func TestParsingInPiecesGivesTheSameTree(t *testing.T) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	item := "  - name: r%d\n    key: tenant  # a comment\n    limit: %d/min\n\n    # between fields\n    match: {routes: [\"/a/*\"],\n      methods: [GET]}\n    overrides:\n      a: 0\n      'b': \"1/s\"\n    desc: |\n      text\n       more\n"
	var items strings.Builder
	for i := range 20 {
		fmt.Fprintf(&items, item, i, i+1)
	}
	for _, c := range []struct {
		name   string
		src    string
		pieces bool
	}{
		{"full file", string(full) + items.String(), true},
		{"rules then keys", "version: 1\nrules:\n" + items.String() + "store: redis\ntimeout: 1s\n", true},
		{"items at column 0", "rules:\n" + strings.ReplaceAll(items.String(), "\n  ", "\n")[2:], true},
		{"comment after rules", "rules: # the list\n# lead\n" + items.String(), true},
		{"anchor used across pieces", "rules:\n  - &a {name: x}\n" + items.String() + "  - *a\n", false},
		{"rules twice", "rules:\n" + items.String() + "rules:\n" + items.String(), false},
		{"flow list", "rules: [" + strings.Repeat("{name: a},", 20) + "]\n", false},
		{"quote across lines", "a: \"x\nrules:\n" + items.String() + "z\"\n", false},
		{"document marker", "---\nrules:\n" + items.String(), false},
		{"too few items", "rules:\n  - name: a\n", false},
		{"not a list", "rules:\n  a: b\n" + items.String(), false},
		{"bad piece", "rules:\n" + items.String() + "  - name: [\n", false},
	} {
		t.Run(c.name, func(t *testing.T) { checkPieces(t, c.src, c.pieces) })
	}
}

// FuzzParseInPieces checks that a file parsed in pieces gives the tree the
// parser gives the whole file.
func FuzzParseInPieces(f *testing.F) {
	f.Add("rules:\n  - a: 1\n  - b: [2,\n 3]\n  - c\n  - d: |\n    x\n  - e\n  - f\nx: 1\n")
	f.Add("rules:\n- a\n- b\n- c\n- d\n- e\n- f\n- g\n")
	f.Fuzz(func(t *testing.T, src string) {
		if _, diff := compareParse(src, inPieces); diff != "" {
			t.Fatalf("%s\n%q", diff, src)
		}
	})
}

// BenchmarkParseYAML parses the 1,000-rule, 10,000-override file with the
// YAML parser, in pieces (in parallel), and with fastParse, side by side.
func BenchmarkParseYAML(b *testing.B) {
	var src strings.Builder
	src.WriteString("version: 1\nrules:\n")
	for i := range 1000 {
		fmt.Fprintf(&src, "  - name: rule-%d\n    key: tenant\n    limit: %d/min burst %d\n    match: {methods: [GET, POST], routes: [\"/api/v%d/*\"]}\n    overrides:\n", i, 100+i, 120+i, i)
		for j := range 10 {
			fmt.Fprintf(&src, "      tenant-%d: 1000/min\n", 10*i+j)
		}
	}
	data := []byte(src.String())
	b.Run("yaml.v3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var doc yaml.Node
			if err := yaml.Unmarshal(data, &doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pieces", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseInPieces(data, 0, 2); !ok {
				b.Fatal("not parsed in pieces")
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := fastParse(data); !ok {
				b.Fatal("not parsed")
			}
		}
	})
}

func TestFastParseGivesTheParsersTree(t *testing.T) {
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src  string
		fast bool
	}{
		{string(full), true},
		{"rules:\n- a\n-\n- b: \n  c: d\n- - x\n  - y\nz: [a, 'b', \"c\", {d: e, f: [1, 2]}]\n", true},
		{"a: 1\nb: -5\nc: 123\nd: yes\ne: ~\nf: Null\ng: TRUE\nh: 1000/min burst 20\ni: tenant-1\nj: 5m\nA : x\n", true},
		{"a: 1.5\n", false},
		{"a: 0123\n", false},
		{"a: 00000008\n", false},
		{"a: 2001-12-14\n", false},
		{"a: 'it''s'\n", false},
		{"a: \"x\\ty\"\n", false},
		{"a: &x 1\nb: *x\n", false},
		{"a: |\n  text\n", false},
		{"a: b\n  c\n", false},
		{"a: [1,\n 2]\n", false},
		{"a: - b\n", false},
		{"\x87", false},
		// The parser takes "key:" as a key only within 1,024 characters.
		{strings.Repeat("k", 1100) + ": 1\n", false},
		{"a:\n  " + strings.Repeat("k", 1100) + ": x\n", false},
		{"a: {" + strings.Repeat("k", 1100) + ": x}\n", false},
		// and rejects nesting deeper than 10,000.
		{strings.Repeat("- ", 10001) + "a\n", false},
		{strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "\n", false},
	} {
		ok, diff := compareParse(c.src, fastParse)
		if ok != c.fast || diff != "" {
			t.Errorf("fast: %v (want %v) %s\n%q", ok, c.fast, diff, c.src)
		}
	}
}

// FuzzFastParse checks that fastParse gives the YAML parser's tree
// whenever it parses.
func FuzzFastParse(f *testing.F) {
	full, _ := os.ReadFile("testdata/full.yaml")
	f.Add(string(full))
	f.Add("rules:\n- a\n-\n- b: \n  c: d\n- - x\n  - y\nz: [a, 'b', \"c\", {d: e, f: [1, 2]}]\n")
	f.Add("a: 1\nb: -5\nc: 123\nd: yes\ne: ~\nf: Null\ng: TRUE\nh: 1000/min burst 20\ni: tenant-1\n")
	f.Fuzz(func(t *testing.T, src string) {
		if _, diff := compareParse(src, fastParse); diff != "" {
			t.Fatalf("%s\n%q", diff, src)
		}
	})
}
