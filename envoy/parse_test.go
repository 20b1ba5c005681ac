package envoy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every mistake the reference rejects is rejected, each at its line and
// column, all of them at once.
func TestConfigMistakesAreReportedAtTheirLineAndColumn(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each problem's file:line:col and a part of its message
	}{
		{"unknown key", "domain: d\ndescriptors:\n  - key: a\n    rate_limits:\n      unit: second\n",
			[]string{`f.yaml:4:5: descriptors[0].rate_limits: unknown key "rate_limits"`}},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
			[]string{`f.yaml:3:5: descriptors[0].rate_limit.unit: invalid unit "fortnight"`}},
		{"unlimited with a unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
			[]string{"f.yaml:3:5: descriptors[0].rate_limit.unit: an unlimited rate_limit takes no unit"}},
		{"negative requests", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: -1\n",
			[]string{`f.yaml:6:26: descriptors[0].rate_limit.requests_per_unit: want a whole number`}},
		{"no domain and an empty key", "descriptors:\n  - value: v\n",
			[]string{"f.yaml:2:5: descriptors[0].key: descriptor has an empty key", "f.yaml:1:1: domain: the file has no domain"}},
		{"duplicate descriptor", "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a\n    value: b\n",
			[]string{`f.yaml:5:5: descriptors[1]: duplicate descriptor composite key "d.a_b"`}},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: n\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: n\n",
			[]string{"f.yaml:3:5: descriptors[0].rate_limit.replaces: a limit cannot replace itself"}},
		{"share_threshold without a wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: b\n    share_threshold: true\n",
			[]string{"f.yaml:3:5: descriptors[0].share_threshold: share_threshold needs a wildcard value"}},
		{"not a boolean", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: sometimes\n",
			[]string{`f.yaml:4:18: descriptors[0].shadow_mode: want true or false, not "sometimes"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile("f.yaml", []byte(tc.yaml))
			if err == nil {
				_, err = Compile(f)
			}
			var ce ConfigErrors
			if !errors.As(err, &ce) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v, want ConfigErrors wrapping ErrInvalidConfig", err)
			}
			if len(ce) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(ce), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(ce[i].String(), w) {
					t.Errorf("problem %d: %q, want it to start with %q", i, ce[i].String(), w)
				}
			}
		})
	}
}

// Two files of one domain are rejected, as the reference does by default.
func TestDuplicateDomainAcrossFilesIsRejected(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("domain: same\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `duplicate domain "same"`) {
		t.Fatalf("error %v, want a duplicate domain", err)
	}
}

// A YAML syntax error is an ErrInvalidConfig naming the file and line.
func TestYAMLSyntaxErrorNamesTheFile(t *testing.T) {
	_, err := ParseFile("bad.yaml", []byte("domain: d\ndescriptors: [\n"))
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "line") {
		t.Fatalf("error %v", err)
	}
}
