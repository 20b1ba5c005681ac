package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLintReportsTheSameProblemsAndExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("store: redis\nrules:\n  - name: a\n    key: client_ip\n    limit: 5/s\n    match: {when: [from_lb]}\n"), 0o644)
	os.WriteFile(bad, []byte("rules:\n  - name: a\n    key: user\n    limit: 5/fortnight\n"), 0o644)
	flags := []string{"-keys", "client_ip, tenant", "-stores", "redis", "-predicates", "from_lb"}
	for _, c := range []struct {
		args []string
		code int
		out  []string
	}{
		{append(flags, good), 0, nil},
		{append(flags, good, bad), 1, []string{bad + ":3:10: rules[0].key: unknown key \"user\"", bad + ":4:12: rules[0].limit:"}},
		{[]string{good}, 1, []string{good + ":1:8: store: unknown store \"redis\""}},
		{append(flags, filepath.Join(dir, "missing.yaml")), 2, nil},
		{nil, 2, nil},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code {
			t.Errorf("%v: exit %d, want %d (%s%s)", c.args, code, c.code, out.String(), errOut.String())
		}
		for _, want := range c.out {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, want, out.String())
			}
		}
	}
}
