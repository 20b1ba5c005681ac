package ratelimit_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// The entry points of entryHandler.
const (
	viaHandler         = iota // Limiter.Handler
	viaCheck                  // Check, Write, next and Done, as an adapter
	viaServeRouteDeny         // ServeRoute with a deny callback, which writes the verdict
	viaServeRouteError        // ServeRoute with an onError callback that lets failures through
	viaServeRoute             // ServeRoute without callbacks
	viaAllow                  // Allow of the client's address, no response written
	entryPoints               // how many there are
)

// entryHandler serves each request through one of a limiter's entry points
// (entry), as an http.Handler, so that the differential tests drive every
// entry point alike. seen records what the caller is told beside the
// response: a verdict handed to it, or Allow's answer.
type entryHandler struct {
	l     *ratelimit.Limiter
	mw    http.Handler
	next  http.Handler
	entry int
	seen  []string
}

// clientKey is the key of the differential tests' rules.
var clientKey = ratelimit.ByIP()

func newEntryHandler(l *ratelimit.Limiter, next http.Handler) *entryHandler {
	return &entryHandler{l: l, mw: l.Handler(next), next: next}
}

func (e *entryHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	next := func(r *http.Request) error { e.next.ServeHTTP(w, r); return nil }
	switch e.entry {
	case viaHandler:
		e.mw.ServeHTTP(w, r)
	case viaCheck:
		v := e.l.Check(r)
		e.see(&v)
		v.Write(w)
		if v.Allowed() {
			defer v.Done()
			e.next.ServeHTTP(w, r.WithContext(v.Context(r.Context())))
		}
	case viaServeRouteDeny:
		e.l.ServeRoute(w, r, "/", func(v *ratelimit.Verdict) error { e.see(v); v.Write(w); return nil }, nil, next)
	case viaServeRouteError:
		e.l.ServeRoute(w, r, "/", nil, func(error) error { return nil }, next)
	case viaServeRoute:
		e.l.ServeRoute(w, r, "/", nil, nil, next)
	case viaAllow:
		key, _ := clientKey(r) // the key of the rules' requests: Allow counts with them
		res, err := e.l.Allow(r.Context(), key)
		e.seen = append(e.seen, fmt.Sprintf("allow %+v %v", res, err))
	}
}

// see records v. A Result's Slot is recorded as held or not: its value is
// a token drawn from a counter of the store's shard, which other keys of
// that shard draw from too, and two stores place keys in shards with
// different hash seeds.
func (e *entryHandler) see(v *ratelimit.Verdict) {
	res := v.Result()
	res.Slot = min(res.Slot, 1)
	e.seen = append(e.seen, fmt.Sprintf("verdict %v %v %d %q %+v %q %v", v.Allowed(), v.Denied(), v.Status(), v.Rule(), res, v.Violated(), v.Err()))
}

// TestEveryEntryPointDecidesOnce: on the general path (stores the direct
// path does not run: wrappers that count their calls), every entry point
// asks each store once per request, whether the request is admitted,
// denied, or let through a store's failure (its rule fails open, and
// ServeRoute's onError says go on), and gives nothing back to a store
// that decided alone. TestEveryEntryPointDecidesOnTheDirectPath is its
// twin on the in-process store.
func TestEveryEntryPointDecidesOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fail, spent bool
		admitted    bool
	}{
		{name: "admitted", admitted: true},
		{name: "denied", spent: true},
		{name: "let through a failure", fail: true, admitted: true},
	} {
		for entry := range entryPoints {
			clock := newClock()
			healthy, second := countedPair(clock, tc.fail)
			l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
				{Name: "healthy", Limit: ratelimit.PerMinute(2), Key: clientKey, Store: healthy},
				{Name: "second", Limit: ratelimit.PerMinute(10), Key: clientKey, Store: second},
			}, ratelimit.WithClock(clock))
			e := newEntryHandler(l, okHandler)
			e.entry = entry
			serve := func() int {
				w := httptest.NewRecorder()
				e.ServeHTTP(w, clientReq(1))
				return w.Code
			}
			if tc.spent {
				for range 2 {
					serve()
				}
				for _, s := range []*ratelimittest.CountingStore{healthy, second} {
					s.Takes.Store(0)
					s.TakeAlls.Store(0)
				}
			}
			e.seen = nil
			code := serve()
			admitted := code == http.StatusOK
			if entry == viaAllow {
				admitted = strings.HasPrefix(e.seen[0], "allow {Allowed:true")
			}
			if admitted != tc.admitted {
				t.Errorf("%s through entry point %d: admitted %v (%d %q), want %v", tc.name, entry, admitted, code, e.seen, tc.admitted)
			}
			if got := healthy.Decisions(); got != 1 {
				t.Errorf("%s through entry point %d: the healthy store was asked %d times, want 1", tc.name, entry, got)
			}
			if got, want := second.Decisions(), map[bool]int64{false: 1, true: 0}[tc.spent]; got != want {
				t.Errorf("%s through entry point %d: the second store was asked %d times, want %d", tc.name, entry, got, want)
			}
			if got := healthy.Returns.Load() + second.Returns.Load(); got != 0 {
				t.Errorf("%s through entry point %d: %d units given back, want none", tc.name, entry, got)
			}
		}
	}
}
