package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit/config"
)

// mistake is one kind of error in a rules file: a rule (or top-level line)
// holding it, and the expected position and message of the problem,
// relative to the mistake's first line.
type mistake struct {
	name      string
	yaml      string // a list item of rules (starting "  - "), or top-level text when top
	top       bool
	line, col int    // of the problem, 1-based within yaml
	path      string // with rules[N] standing for this rule's index
	msg       string // a substring of the message
}

var mistakes = []mistake{
	{"unknown top-level field", "storage: redis\n", true, 1, 1, "", `unknown field "storage"`},
	{"bad timeout", "timeout: soon\n", true, 1, 10, "timeout", "positive duration"},
	{"unknown store", "store: mongo\n", true, 1, 8, "store", `unknown store "mongo"`},
	{"unknown rule field", "  - name: a1\n    key: client_ip\n    limit: 1/s\n    limt: 2/s\n", false, 4, 5, "rules[N]", `unknown field "limt"`},
	{"field twice", "  - name: a2\n    key: client_ip\n    limit: 1/s\n    key: tenant\n", false, 4, 5, "rules[N].key", "given twice"},
	{"missing name", "  - key: client_ip\n    limit: 1/s\n", false, 1, 5, "rules[N].name", "missing"},
	{"bad name", "  - name: a b\n    key: client_ip\n    limit: 1/s\n", false, 1, 11, "rules[N].name", "letters, digits"},
	{"duplicate name", "  - name: per-ip\n    key: client_ip\n    limit: 1/s\n", false, 1, 11, "rules[N].name", "duplicate rule name"},
	{"missing key", "  - name: a3\n    limit: 1/s\n", false, 1, 5, "rules[N].key", "missing"},
	{"unknown key", "  - name: a4\n    key: user\n    limit: 1/s\n", false, 2, 10, "rules[N].key", `unknown key "user"`},
	{"bad rate syntax", "  - name: a5\n    key: client_ip\n    limit: 100 per minute\n", false, 3, 12, "rules[N].limit", "want <n>/<period>"},
	{"bad period", "  - name: a6\n    key: client_ip\n    limit: 100/fortnight\n", false, 3, 12, "rules[N].limit", "period"},
	{"zero rate", "  - name: a7\n    key: client_ip\n    limit: 0/min\n", false, 3, 12, "rules[N].limit", "rate 0 must be positive"},
	{"too fast", "  - name: a8\n    key: client_ip\n    limit: 2000000000/s\n", false, 3, 12, "rules[N].limit", "faster than"},
	{"long form missing per", "  - name: a9\n    key: client_ip\n    limit: {rate: 5}\n", false, 3, 12, "rules[N].limit.per", "missing"},
	{"burst on sliding window", "  - name: b1\n    key: client_ip\n    limit: 10/s burst 20\n    algorithm: sliding-window\n", false, 3, 12, "rules[N].limit", "takes no burst"},
	{"sliding log too large", "  - name: b11\n    key: client_ip\n    limit: 20000/min\n    algorithm: sliding-log\n", false, 3, 12, "rules[N].limit", "more than its bound of 10000"},
	{"sliding log override too large", "  - name: b12\n    key: tenant\n    limit: 10/min\n    algorithm: sliding-log\n    overrides:\n      big: 20000/min\n", false, 6, 12, "rules[N].overrides.big", "more than its bound of 10000"},
	{"unknown algorithm", "  - name: b2\n    key: client_ip\n    limit: 1/s\n    algorithm: leaky\n", false, 4, 16, "rules[N].algorithm", `unknown algorithm "leaky"`},
	{"limit and quota", "  - name: b3\n    key: client_ip\n    limit: 1/s\n    quota: {limit: 5, per: day}\n", false, 4, 5, "rules[N].quota", "contradicts limit"},
	{"no limit at all", "  - name: b4\n    key: client_ip\n", false, 1, 5, "rules[N]", "needs one of"},
	{"quota unknown unit", "  - name: b5\n    key: client_ip\n    quota: {limit: 5, per: year}\n", false, 3, 28, "rules[N].quota.per", "day, week or month"},
	{"quota unknown zone", "  - name: b6\n    key: client_ip\n    quota: {limit: 5, per: day, time_zone: Mars/Olympus}\n", false, 3, 44, "rules[N].quota.time_zone", "unknown time zone"},
	{"quota with gcra", "  - name: b7\n    key: client_ip\n    quota: {limit: 5, per: day}\n    algorithm: gcra\n", false, 4, 16, "rules[N].algorithm", "contradicts quota"},
	{"concurrency with algorithm", "  - name: b8\n    key: client_ip\n    concurrency: 4\n    algorithm: fixed-window\n", false, 4, 16, "rules[N].algorithm", "contradicts concurrency"},
	{"concurrency zero", "  - name: b9\n    key: client_ip\n    concurrency: 0\n", false, 3, 18, "rules[N].concurrency", "whole number from 1"},
	{"shadow not a bool", "  - name: c1\n    key: client_ip\n    limit: 1/s\n    shadow: maybe\n", false, 4, 13, "rules[N].shadow", "true or false"},
	{"bad failure policy", "  - name: c2\n    key: client_ip\n    limit: 1/s\n    on_store_error: retry\n", false, 4, 21, "rules[N].on_store_error", "unknown failure policy"},
	{"closed with bad status", "  - name: c3\n    key: client_ip\n    limit: 1/s\n    on_store_error: closed 200\n", false, 4, 21, "rules[N].on_store_error", "429 or 503"},
	{"closed with a status no failure policy answers", "  - name: c3b\n    key: client_ip\n    limit: 1/s\n    on_store_error: closed 500\n", false, 4, 21, "rules[N].on_store_error", "429 or 503"},
	{"fallback to unknown store", "  - name: c4\n    key: client_ip\n    limit: 1/s\n    on_store_error: fallback disk\n", false, 4, 21, "rules[N].on_store_error", `unknown store "disk"`},
	{"unknown rule store", "  - name: c5\n    key: client_ip\n    limit: 1/s\n    store: etcd\n", false, 4, 12, "rules[N].store", `unknown store "etcd"`},
	{"bad method", "  - name: c6\n    key: client_ip\n    limit: 1/s\n    match: {methods: [GET, get]}\n", false, 4, 28, "rules[N].match.methods[1]", "unknown method"},
	{"bad route", "  - name: c7\n    key: client_ip\n    limit: 1/s\n    match: {routes: [api/*]}\n", false, 4, 22, "rules[N].match.routes[0]", "must start with /"},
	{"bad route pattern", "  - name: c8\n    key: client_ip\n    limit: 1/s\n    match: {routes: [\"/a/[\"]}\n", false, 4, 22, "rules[N].match.routes[0]", "syntax error"},
	{"route class matching /", "  - name: c10\n    key: client_ip\n    limit: 1/s\n    match: {routes: [\"/a[^x]b\"]}\n", false, 4, 22, "rules[N].match.routes[0]", "may not hold or match /"},
	{"empty methods list", "  - name: c11\n    unlimited: true\n    match: {methods: [], routes: [\"/api/*\"]}\n", false, 3, 22, "rules[N].match.methods", "empty list matches no request"},
	{"empty routes list", "  - name: c12\n    key: client_ip\n    limit: 1/s\n    match: {routes: []}\n", false, 4, 21, "rules[N].match.routes", "empty list matches no request"},
	{"unknown predicate", "  - name: c9\n    key: client_ip\n    limit: 1/s\n    match: {when: [is_admin]}\n", false, 4, 20, "rules[N].match.when[0]", `unknown predicate "is_admin"`},
	{"unknown match field", "  - name: d1\n    key: client_ip\n    limit: 1/s\n    match: {path: /x}\n", false, 4, 13, "rules[N].match", `unknown field "path"`},
	{"unlimited with limit", "  - name: d2\n    unlimited: true\n    limit: 1/s\n", false, 3, 5, "rules[N].limit", "contradicts unlimited"},
	{"duplicate override key", "  - name: d3\n    key: tenant\n    limit: 1/s\n    overrides:\n      - {key: a, limit: 2/s}\n      - {key: a, limit: 0}\n", false, 6, 15, "rules[N].overrides[1]", "already has an override"},
	{"bad override limit", "  - name: d4\n    key: tenant\n    limit: 1/s\n    overrides:\n      - {key: a, limit: lots}\n", false, 5, 25, "rules[N].overrides[0].limit", "want <n>/<period>"},
	{"override without limit", "  - name: d5\n    key: tenant\n    limit: 1/s\n    overrides:\n      - {key: a}\n", false, 5, 9, "rules[N].overrides[0].limit", "missing"},
	{"overrides on a quota", "  - name: d6\n    key: tenant\n    quota: {limit: 5, per: day}\n    overrides: []\n", false, 4, 5, "rules[N].overrides", "need a limit or concurrency rule"},
	{"duplicate key in compact overrides", "  - name: d7\n    key: tenant\n    limit: 1/s\n    overrides:\n      a: 2/s\n      a: 0\n", false, 6, 7, "rules[N].overrides", "already has an override"},
	{"bad compact override", "  - name: d8\n    key: tenant\n    limit: 1/s\n    overrides:\n      a: 2/fortnight\n", false, 5, 10, "rules[N].overrides.a", "period"},
	{"rule not a mapping", "  - per-ip\n", false, 1, 5, "rules[N]", "want a mapping"},
}

const base = `version: 1
rules:
  - name: per-ip
    key: client_ip
    limit: 10/s
`

// TestEveryMistakeIsReportedAtItsPosition puts each mistake in a file of
// its own, then all of them in one file, which must report every one with
// its line and column.
func TestEveryMistakeIsReportedAtItsPosition(t *testing.T) {
	if len(mistakes) < 20 {
		t.Fatalf("only %d mistake kinds", len(mistakes))
	}
	for _, m := range mistakes {
		t.Run(m.name, func(t *testing.T) {
			src, want := assemble([]mistake{m})
			check(t, src, want)
		})
	}
	t.Run("all at once", func(t *testing.T) {
		src, want := assemble(mistakes)
		check(t, src, want)
	})
}

// assemble builds a file: the top-level mistakes first, then base, then the
// rule mistakes, and returns the problems expected, in order.
func assemble(ms []mistake) (string, []string) {
	var top, rules strings.Builder
	var want []string
	line := 1
	for _, m := range ms {
		if m.top {
			want = append(want, fmt.Sprintf("f.yaml:%d:%d: %s: %s", line+m.line-1, m.col, m.path, m.msg))
			top.WriteString(m.yaml)
			line += strings.Count(m.yaml, "\n")
		}
	}
	line += strings.Count(base, "\n")
	idx := 1
	for _, m := range ms {
		if !m.top {
			path := strings.ReplaceAll(m.path, "rules[N]", fmt.Sprintf("rules[%d]", idx))
			want = append(want, fmt.Sprintf("f.yaml:%d:%d: %s: %s", line+m.line-1, m.col, path, m.msg))
			rules.WriteString(m.yaml)
			line += strings.Count(m.yaml, "\n")
			idx++
		}
	}
	return top.String() + base + rules.String(), want
}

func check(t *testing.T, src string, want []string) {
	t.Helper()
	cfg, err := config.Parse("f.yaml", []byte(src), testRegistry(t, nil))
	var errs config.Errors
	if cfg != nil || !errors.As(err, &errs) {
		t.Fatalf("cfg %v, err %v; want Errors\n%s", cfg, err, src)
	}
	if len(errs) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v\nfile:\n%s", len(errs), len(want), err, src)
	}
	for i, p := range errs {
		// want[i] is "file:line:col: path: substring"
		if got := p.String(); !matches(got, want[i]) {
			t.Errorf("problem %d:\n got  %s\n want %s", i, p, want[i])
		}
	}
}

// matches reports whether got has want's position and path and contains
// its message.
func matches(got, want string) bool {
	parts := strings.SplitN(want, ": ", 3)
	gparts := strings.SplitN(got, ": ", 3)
	if parts[1] == "" { // a top-level problem has an empty path
		parts = []string{parts[0], "", strings.TrimPrefix(want, parts[0]+": : ")}
		gparts = []string{gparts[0], "", strings.TrimPrefix(got, gparts[0]+": : ")}
	}
	return len(gparts) == 3 && gparts[0] == parts[0] && gparts[1] == parts[1] && strings.Contains(gparts[2], parts[2])
}
