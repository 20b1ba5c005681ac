package ratelimitclient

import (
	"net/http"
	"testing"
	"time"
)

// FuzzParseFields feeds arbitrary values to every field the Transport reads:
// parsing must never panic, and what it keeps must stay within the caps.
// Seeds are in testdata/fuzz/FuzzParseFields.
func FuzzParseFields(f *testing.F) {
	f.Add(`"default";r=42;t=17`, `"default";q=100;w=60`, "", "", "", "")
	f.Fuzz(func(t *testing.T, rl, policy, remaining, reset, retryAfter, date string) {
		h := http.Header{}
		for k, v := range map[string]string{
			hdrRateLimit: rl, hdrPolicy: policy, hdrXRemaining: remaining, hdrXReset: reset,
			hdrOldRemaining: remaining, hdrOldReset: reset, hdrOldLimit: policy, hdrXLimit: policy,
			hdrRetryAfter: retryAfter, hdrDate: date,
		} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		const maxDelay = time.Hour
		var a, b, fresh observation
		clock := serverClock{epoch: now}
		var caches fieldCaches
		parseFields(linesOf(h), 0, &clock, maxDelay, &caches, true, &a)
		parseFields(linesOf(h), 0, &clock, maxDelay, &caches, true, &b) // from the caches
		if a != b {
			t.Fatalf("parsing is not deterministic: %+v vs %+v", a, b)
		}
		parseFields(linesOf(h), 0, &serverClock{epoch: now}, maxDelay, nil, true, &fresh)
		if _, ok := h[hdrXReset]; !ok && (fresh.n != a.n || fresh.quotas != a.quotas) {
			t.Fatalf("the caches changed what was parsed: %+v vs %+v", a, fresh) // Unix times aside: they are read on the server's clock
		}
		if a.n < 0 || a.n > maxItems {
			t.Fatalf("%d quotas", a.n)
		}
		for _, q := range a.quotas[:a.n] {
			if q.remaining < 0 || q.remaining > maxCount || q.limit < 0 || q.limit > maxCount ||
				q.reset < 0 || q.reset > maxDelay || q.window < 0 || q.window > maxWindow ||
				q.least < 0 || q.least > maxWindow || q.exact < 0 || q.exact > maxWindow || q.slack < 0 {
				t.Fatalf("quota out of bounds: %+v", q)
			}
		}
		if a.retryAfter < 0 || a.retryAfter > maxDelay || !a.hasRetry && a.retryAfter != 0 {
			t.Fatalf("Retry-After out of bounds: %v (%v)", a.retryAfter, a.hasRetry)
		}
		// Served from a cache, the same fields say nothing.
		h[hdrAge] = []string{"1"}
		var c observation
		parseFields(linesOf(h), 0, &serverClock{epoch: now}, maxDelay, nil, true, &c)
		if c != (observation{}) {
			t.Fatalf("fields of a cached response were used: %+v", c)
		}
	})
}

// FuzzParseList checks the Structured Fields list parser: no panic, bounded
// results, and a valid list stays valid with one more member.
// Seeds are in testdata/fuzz/FuzzParseList.
func FuzzParseList(f *testing.F) {
	f.Add(`"default";r=42;t=17, burst;r=0;t=1;pk=:AAA=:`)
	f.Fuzz(func(t *testing.T, v string) {
		var items [maxItems]sfItem
		n, ok := parseList(v, &items)
		if !ok {
			if n != 0 {
				t.Fatalf("invalid list kept %d items", n)
			}
			return
		}
		if n < 0 || n > maxItems {
			t.Fatalf("%d items", n)
		}
		for _, it := range items[:n] {
			for _, p := range []int64{it.r, it.t, it.q, it.w} {
				if p < absent || p > 999_999_999_999_999 {
					t.Fatalf("parameter out of range: %+v", it)
				}
			}
		}
		if len(v) > 0 && v[len(v)-1] != ' ' {
			if _, ok := parseList(v+`, "x";r=1`, &items); !ok {
				t.Fatalf("%q is valid but not with one more member", v)
			}
		}
	})
}
