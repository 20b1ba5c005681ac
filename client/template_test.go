package ratelimitclient

import (
	"strconv"
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
