package ratelimitclient

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 23, 4, 0, 0, 0, time.UTC)

func parse(h http.Header) observation {
	var obs observation
	c := serverClock{epoch: now} // the Transport's clock reads 0 at now
	parseFields(linesOf(h), 0, &c, time.Hour, nil, true, &obs)
	return obs
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestParseFieldForms(t *testing.T) {
	epoch := strconv.FormatInt(now.Add(90*time.Second).Unix(), 10)
	epochMs := strconv.FormatInt(now.Add(90*time.Second).UnixMilli(), 10)
	cases := []struct {
		name string
		h    http.Header
		want []quota
	}{
		{"current draft", hdr("RateLimit", `"default";r=42;t=17`, "RateLimit-Policy", `"default";q=100;w=60`),
			[]quota{{name: "default", remaining: 42, reset: 17 * time.Second, limit: 100, window: time.Minute}}},
		{"two policies, token names, unknown parameters", hdr("RateLimit", `day;r=900;t=3600, "burst";r=0;t=2;pk=:cHJvZA==:`,
			"RateLimit-Policy", `burst;q=10;w=2;qu="requests", day;q=1000;w=86400`),
			[]quota{{name: "day", remaining: 900, reset: time.Hour, limit: 1000, window: 24 * time.Hour}, {name: "burst", remaining: 0, reset: 2 * time.Second, limit: 10, window: 2 * time.Second}}},
		{"two field lines", hdr("RateLimit", `"a";r=1;t=1`, "RateLimit", `"b";r=2;t=2`),
			[]quota{{name: "a", remaining: 1, reset: time.Second}, {name: "b", remaining: 2, reset: 2 * time.Second}}},
		{"earlier draft dictionary", hdr("RateLimit", `limit=100, remaining=42, reset=17`),
			[]quota{{remaining: 42, reset: 17 * time.Second, limit: 100}}},
		{"earlier draft fields", hdr("RateLimit-Limit", "100, 100;w=60", "RateLimit-Remaining", "42", "RateLimit-Reset", "17"),
			[]quota{{remaining: 42, reset: 17 * time.Second, limit: 100}}},
		{"legacy delta", hdr("X-RateLimit-Limit", "60", "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "30"),
			[]quota{{remaining: 5, reset: 30 * time.Second, limit: 60}}},
		{"legacy fractional delta", hdr("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "1.25"),
			[]quota{{remaining: 5, reset: 1250 * time.Millisecond}}},
		{"legacy epoch seconds", hdr("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", epoch),
			[]quota{{remaining: 5, reset: 90 * time.Second}}},
		{"legacy epoch milliseconds", hdr("X-RateLimit-Remaining", "5", "X-RateLimit-Reset", epochMs),
			[]quota{{remaining: 5, reset: 90 * time.Second}}},
		{"legacy epoch in the past", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", strconv.FormatInt(now.Unix()-100, 10)),
			[]quota{{remaining: 0, reset: 0}}},
		// The server's clock is an hour ahead: the reset is read against its Date.
		{"legacy epoch, skewed server clock", hdr("X-RateLimit-Remaining", "5", "Date", now.Add(time.Hour).Format(http.TimeFormat),
			"X-RateLimit-Reset", strconv.FormatInt(now.Add(time.Hour+90*time.Second).Unix(), 10)),
			[]quota{{remaining: 5, reset: 90 * time.Second}}},
		// A Date decades off is not a clock to read the reset on.
		{"legacy epoch, Date decades off", hdr("X-RateLimit-Remaining", "5", "Date", "Fri, 01 Jan 2100 00:00:00 GMT",
			"X-RateLimit-Reset", epoch), []quota{{remaining: 5, reset: 90 * time.Second}}},
		{"GitHub", hdr("X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Used", "1",
			"X-RateLimit-Resource", "core", "X-RateLimit-Reset", epoch),
			[]quota{{name: "core", remaining: 4999, reset: 90 * time.Second, limit: 5000}}},
		{"hostile reset capped", hdr("RateLimit", `"default";r=0;t=999999999999999`),
			[]quota{{name: "default", reset: time.Hour}}},
		{"cached response", hdr("Age", "10", "RateLimit", `"default";r=0;t=60`), nil},
		{"malformed list ignored", hdr("RateLimit", `"default";r=0;t=60,,`), nil},
		{"negative remaining skipped", hdr("RateLimit", `"default";r=-1;t=60`), nil},
		{"decimal remaining skipped", hdr("RateLimit", `"default";r=1.5;t=60`), nil},
		{"legacy garbage ignored", hdr("X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", "10"), nil},
		{"legacy negative reset ignored", hdr("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "-10"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obs := parse(c.h)
			if obs.n != len(c.want) {
				t.Fatalf("%d quotas %+v, want %+v", obs.n, obs.quotas[:obs.n], c.want)
			}
			for i, w := range c.want {
				got := obs.quotas[i]
				got.least, got.exact, got.slack, got.epoch = 0, 0, 0, 0 // TestEpochResetBoundsTheWindow
				if got != w {
					t.Errorf("quota %d = %+v, want %+v", i, got, w)
				}
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	cases := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{"0", 0, true},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second, true},
		{now.Add(-30 * time.Second).Format(http.TimeFormat), 0, true},
		{"31536000", time.Hour, true}, // a year, capped
		{"Fri, 01 Jan 2100 00:00:00 GMT", time.Hour, true},
		{"-5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	}
	for _, c := range cases {
		obs := parse(hdr("Retry-After", c.v))
		if obs.hasRetry != c.ok || obs.retryAfter != c.want {
			t.Errorf("Retry-After %q = %v, %v; want %v, %v", c.v, obs.retryAfter, obs.hasRetry, c.want, c.ok)
		}
	}
}

func TestParseListSyntax(t *testing.T) {
	valid := []string{`a`, `"a";r=1`, `a;b;c=?1, d;e=:AAA=:`, `a;x=-5;y=1.25;z=@1700000000`, `"q\"uote";r=1`, `*tok/en:x;r=1`, ``}
	invalid := []string{`,`, `a,`, `a;`, `a;B=1`, `a;r=`, `"open`, `a;r=1234567890123456`, `a;r=1.2345`, `(a b)`, `a b`, `"\x"`, `a;r=?2`, `a;r=:bad*:`}
	var items [maxItems]sfItem
	for _, v := range valid {
		if _, ok := parseList(v, &items); !ok {
			t.Errorf("parseList(%q) rejected a valid list", v)
		}
	}
	for _, v := range invalid {
		if _, ok := parseList(v, &items); ok {
			t.Errorf("parseList(%q) accepted an invalid list", v)
		}
	}
	if n, _ := parseList(`"q\"uote";r=1`, &items); n != 1 || items[0].name != `q"uote` || items[0].r != 1 {
		t.Errorf("escaped name parsed as %+v", items[0])
	}
}

// TestEpochResetBoundsTheWindow: a Unix-time reset is read against the
// server's clock as the Date fields bound it, not against the Date alone
// (a second behind at worst), and bounds the window two ways: by the whole
// seconds from the Date (a window aligned on the clock ends on a second) and
// by the whole seconds before it at the latest the clock may read (a reset
// rounded up).
func TestEpochResetBoundsTheWindow(t *testing.T) {
	c := serverClock{epoch: now}
	date := now.Add(5 * time.Second) // the server's clock is 5.x s ahead
	reset := date.Unix() + 10
	h := func(d time.Time) http.Header {
		return hdr("Date", d.Format(http.TimeFormat), "X-RateLimit-Remaining", "3", "X-RateLimit-Reset", strconv.FormatInt(reset, 10))
	}
	// The Date ticks between two responses 50ms apart: the server's clock
	// is known to within 50ms. A response 600ms later, in the same second
	// of the server's, is read 600ms into it.
	c.readWall(h(date.Add(-time.Second)), now.Add(-50*time.Millisecond))
	c.readWall(h(date), now)
	var obs observation
	parseFields(linesOf(h(date)), mono(600*time.Millisecond), &c, time.Hour, nil, true, &obs)
	q := obs.quotas[0]
	if q.reset != 9400*time.Millisecond {
		t.Errorf("reset read as %v, want 9.4s (10s from the Date, 600ms of which has passed)", q.reset)
	}
	if q.exact != 10*time.Second || q.least != 9*time.Second || q.epoch != reset {
		t.Errorf("window bounds %v (aligned), %v (rounded up), epoch %d; want 10s, 9s, %d", q.exact, q.least, q.epoch, reset)
	}
	if q.slack != 50*time.Millisecond {
		t.Errorf("clock known to within %v, want 50ms", q.slack)
	}
}
