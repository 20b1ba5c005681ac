package ratelimitclient

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"
)

// parseRL parses a RateLimit value with one RateLimit-Policy line (none
// when policy is empty), through the caches fc (none when nil).
func parseRL(v, policy string, fc *fieldCaches) (observation, bool) {
	var obs observation
	var pol []string
	if policy != "" {
		pol = []string{policy}
	}
	ok := parseRateLimit([]string{v}, pol, time.Hour, fc, &obs)
	return obs, ok
}

// renumber returns the template's value with the k-th of its numbers
// replaced by digits(k).
func renumber(tp *template, digits func(k int) string) string {
	out, o := "", 0
	for k, nb := range tp.nums[:tp.k] {
		out += tp.value[o:nb.at.from] + digits(k)
		o = int(nb.at.to)
	}
	return out + tp.value[o:]
}

// TestRateLimitValueReadFromTemplateAsParsed: a RateLimit value that
// differs from the one parsed last only in its r and t numbers, as a
// server sends while its quota moves, is read from the template, and reads
// as a parse reads it: numbers of another length, several policies, an
// item that is no quota, a name with escapes, numbers past the caps. A
// value or a policy that changes otherwise is parsed, and becomes the
// template.
func TestRateLimitValueReadFromTemplateAsParsed(t *testing.T) {
	const policy = `"default";q=100;w=60, "burst";q=10;w=1`
	cases := []struct {
		first, next string
		policy      string
		fromTmpl    bool
	}{
		{`"default";r=42;t=17`, `"default";r=41;t=17`, policy, true},
		{`"default";r=100;t=9`, `"default";r=99;t=10`, policy, true},
		{`"default";r=0;t=1, "burst";r=3;t=1;pk=:AAA=:`, `"default";r=7;t=60, "burst";r=2;t=0;pk=:AAA=:`, policy, true},
		{`"def\"ault";r=5;t=5, other;r=3`, `"def\"ault";r=4;t=4, other;r=2`, "", true},
		{`"default";r=42;t=17`, `"default";r=999999999999999;t=999999999999999`, policy, true},
		{`"default";r=42;t=17`, `"default";r=1000000000000000;t=1`, policy, false}, // 16 digits: no Integer
		{`"default";r=42;t=17`, `"default";r=4.5;t=17`, policy, false},
		{`"default";r=42;t=17`, `"default";r=-1;t=17`, policy, false},
		{`"default";r=42;t=17`, `"default";r=;t=17`, policy, false},
		{`"default";r=42;t=17`, `"default";r=41;t=17, "burst";r=1;t=1`, policy, false},
		{`"default";r=42;t=17`, `"other";r=41;t=17`, policy, false},
		{`"default";r=42;t=17`, `"default";r=41;t=17 `, policy, false},
	}
	for _, c := range cases {
		var fc fieldCaches
		parseRL(c.first, c.policy, &fc)
		tp := fc.rateLimit.last.Load()
		got, gotOK := parseRL(c.next, c.policy, &fc)
		want, wantOK := parseRL(c.next, c.policy, nil)
		if got != want || gotOK != wantOK {
			t.Errorf("%s after %s: read %v %+v, parsed %v %+v", c.next, c.first, gotOK, got, wantOK, want)
		}
		if read := fc.rateLimit.last.Load() == tp && tp.matched.Load(); read != c.fromTmpl {
			t.Errorf("%s after %s: read from the template %v, want %v", c.next, c.first, read, c.fromTmpl)
		}
	}

	// The policy changes: the quotas take the new one's.
	var fc fieldCaches
	parseRL(`"default";r=42;t=17`, `"default";q=100;w=60`, &fc)
	got, _ := parseRL(`"default";r=41;t=17`, `"default";q=50;w=30`, &fc)
	if got.n != 1 || got.quotas[0].limit != 50 || got.quotas[0].window != 30*time.Second {
		t.Errorf("after the policy changed: %+v, want the new policy's quota and window", got.quotas[:got.n])
	}
}

// FuzzRateLimitTemplate: whatever value a template is made from, the same
// value with other numbers, and any other value, read through it as a
// parse reads them. Seeds are in testdata/fuzz/FuzzRateLimitTemplate.
func FuzzRateLimitTemplate(f *testing.F) {
	f.Add(`"default";r=42;t=17, "burst";r=0;t=1;pk=:AAA=:`, `"default";q=100;w=60`, `"default";r=41;t=16`, uint64(7), uint64(1))
	f.Fuzz(func(t *testing.T, v, policy, other string, n, step uint64) {
		var fc fieldCaches
		if _, ok := parseRL(v, policy, &fc); !ok {
			return
		}
		values := []string{v, other}
		if tp := fc.rateLimit.last.Load(); tp != nil {
			values = append(values, renumber(tp, func(k int) string {
				return strconv.FormatUint((n+uint64(k)*step)%1e15, 10)
			}))
		}
		for _, x := range values {
			got, gotOK := parseRL(x, policy, &fc)
			want, wantOK := parseRL(x, policy, nil)
			if got != want || gotOK != wantOK {
				t.Fatalf("%q after %q: read %v %+v, parsed %v %+v", x, v, gotOK, got, wantOK, want)
			}
		}
	})
}

// parseLines parses RateLimit and RateLimit-Policy lines through the
// caches fc (none when nil).
func parseLines(rl, policy []string, fc *fieldCaches) (observation, bool) {
	var obs observation
	ok := parseRateLimit(rl, policy, time.Hour, fc, &obs)
	return obs, ok
}

// TestRateLimitTemplateReadsOnlyWhatAParseReads: after a template is made,
// responses that keep its shape but change what a template must not
// overlook read as a parse reads them: a quoted name changed at the same
// length, a policy whose numbers change at the same length or that
// appears or goes, a second RateLimit or RateLimit-Policy line, leading
// and trailing whitespace and tabs, a trailing comma, numbers with
// leading zeros (up to the 15 digits an Integer allows) or a sign.
func TestRateLimitTemplateReadsOnlyWhatAParseReads(t *testing.T) {
	const v, pol = `"aaaa";r=42;t=17, "bbbb";r=7;t=1`, `"aaaa";q=100;w=60, "bbbb";q=10;w=1`
	one := func(s string) []string { return []string{s} }
	cases := []struct {
		name       string
		rl, policy []string
	}{
		{"a name changed at its length", one(`"aaab";r=41;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a name changed inside an escape", one(`"aa\"a";r=41;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"names swapped", one(`"bbbb";r=41;t=17, "aaaa";r=6;t=1`), one(pol)},
		{"a policy's quota changed at its length", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1`), one(`"aaaa";q=200;w=60, "bbbb";q=10;w=1`)},
		{"a policy's window changed at its length", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1`), one(`"aaaa";q=100;w=90, "bbbb";q=10;w=1`)},
		{"the policy gone", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1`), nil},
		{"an empty policy line", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1`), one(``)},
		{"a second policy line", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1`), []string{pol, `"bbbb";q=20;w=2`}},
		{"a second RateLimit line", []string{`"aaaa";r=41;t=17, "bbbb";r=6;t=1`, `"cccc";r=1;t=1`}, one(pol)},
		{"a second, malformed RateLimit line", []string{`"aaaa";r=41;t=17, "bbbb";r=6;t=1`, `"cccc";r=1;t=`}, one(pol)},
		{"a leading space", one(` "aaaa";r=41;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a leading tab", one("\t\"aaaa\";r=41;t=17, \"bbbb\";r=6;t=1"), one(pol)},
		{"a trailing tab", one("\"aaaa\";r=41;t=17, \"bbbb\";r=6;t=1\t"), one(pol)},
		{"a tab after the comma", one("\"aaaa\";r=41;t=17,\t\"bbbb\";r=6;t=1"), one(pol)},
		{"no space after the comma", one(`"aaaa";r=41;t=17,"bbbb";r=6;t=1`), one(pol)},
		{"a trailing comma", one(`"aaaa";r=41;t=17, "bbbb";r=6;t=1,`), one(pol)},
		{"a space after a semicolon", one(`"aaaa"; r=41;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"leading zeros", one(`"aaaa";r=0041;t=017, "bbbb";r=00;t=01`), one(pol)},
		{"15 digits with leading zeros", one(`"aaaa";r=000000000000041;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"16 digits with leading zeros", one(`"aaaa";r=0000000000000041;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a plus sign", one(`"aaaa";r=+41;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a minus zero", one(`"aaaa";r=-0;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a decimal", one(`"aaaa";r=41.0;t=17, "bbbb";r=6;t=1`), one(pol)},
		{"a digit glued to a token", one(`"aaaa";r=41;t=17a, "bbbb";r=6;t=1`), one(pol)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var fc fieldCaches
			if _, ok := parseLines(one(v), one(pol), &fc); !ok {
				t.Fatal("the template's value did not parse")
			}
			if _, ok := parseLines(one(`"aaaa";r=40;t=16, "bbbb";r=5;t=0`), one(pol), &fc); !ok || !fc.rateLimit.last.Load().matched.Load() {
				t.Fatal("a value of other numbers was not read from the template")
			}
			got, gotOK := parseLines(c.rl, c.policy, &fc)
			want, wantOK := parseLines(c.rl, c.policy, nil)
			if got != want || gotOK != wantOK {
				t.Errorf("%q with policy %q: read %v %+v, parsed %v %+v", c.rl, c.policy, gotOK, got, wantOK, want)
			}
		})
	}
}

// TestRateLimitTemplateSharedByGoroutinesReadsAsParsed: one partition's
// caches, read from many goroutines at once with values that keep the
// template's shape, change it, and change the policy, give each reader
// what a parse of its own value gives, whichever template another
// goroutine made meanwhile (run with -race).
func TestRateLimitTemplateSharedByGoroutinesReadsAsParsed(t *testing.T) {
	shapes := []func(n int) string{ // values of n's numbers, of four shapes
		func(n int) string { return fmt.Sprintf(`"default";r=%d;t=%d`, n%1000, n%61) },
		func(n int) string {
			return fmt.Sprintf(`"default";r=%d;t=%d, "burst";r=%d;t=%d`, n%1000, n%61, n%11, n%3)
		},
		func(n int) string { return fmt.Sprintf(`"deflaut";r=%d;t=%d`, n%1000, n%61) }, // a name of the same length
		func(n int) string { return fmt.Sprintf(`"default";t=%d;r=%d`, n%61, n%1000) },
	}
	policies := [][]string{{`"default";q=100;w=60, "burst";q=10;w=1`}, {`"default";q=900;w=60, "burst";q=10;w=1`}, nil}
	var fc fieldCaches
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 400 {
				n := g*1000 + i
				v := shapes[(n/7)%len(shapes)](n)
				pol := policies[(n/13)%len(policies)]
				got, gotOK := parseLines([]string{v}, pol, &fc)
				want, wantOK := parseLines([]string{v}, pol, nil)
				if got != want || gotOK != wantOK {
					t.Errorf("%q with policy %q: read %v %+v, parsed %v %+v", v, pol, gotOK, got, wantOK, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if tp := fc.rateLimit.last.Load(); tp == nil {
		t.Fatal("no template was made")
	}
}

// FuzzRateLimitTemplateAcrossPolicies: after a template is made from a
// value and a policy, the value with other numbers under another policy,
// in one line or two, and under two policy lines, reads as a parse reads
// it: what FuzzRateLimitTemplate, whose policy never changes, leaves out.
func FuzzRateLimitTemplateAcrossPolicies(f *testing.F) {
	f.Add(`"default";r=42;t=17, "burst";r=0;t=1`, `"default";q=100;w=60`, `"default";q=200;w=60`, uint64(7), uint64(1))
	f.Add(`"a";r=1;t=1`, `"a";q=10`, ``, uint64(0), uint64(3))
	f.Fuzz(func(t *testing.T, v, policy, other string, n, step uint64) {
		var fc fieldCaches
		if _, ok := parseLines([]string{v}, []string{policy}, &fc); !ok {
			return
		}
		tp := fc.rateLimit.last.Load()
		if tp == nil {
			return
		}
		x := renumber(tp, func(k int) string { return strconv.FormatUint((n+uint64(k)*step)%1e15, 10) })
		for _, c := range []struct{ rl, policy []string }{
			{[]string{x}, []string{policy}}, // a template read, to make it matched
			{[]string{x}, []string{other}},
			{[]string{x}, nil},
			{[]string{x, v}, []string{policy}},
			{[]string{x}, []string{policy, other}},
			{[]string{v}, []string{policy}},
		} {
			got, gotOK := parseLines(c.rl, c.policy, &fc)
			want, wantOK := parseLines(c.rl, c.policy, nil)
			if got != want || gotOK != wantOK {
				t.Fatalf("%q under %q after %q under %q: read %v %+v, parsed %v %+v", c.rl, c.policy, v, policy, gotOK, got, wantOK, want)
			}
		}
	})
}
