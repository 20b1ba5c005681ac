package redisstore

// The failover harness: Limiters under load through each failure policy,
// and a writer of fresh keys that measures what a failover loses, while a
// primary is killed and a replica promoted. Real time only bounds the
// loops and measures; every wait is on an event.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// foBudget is the middleware's WithTimeout. It must exceed a healthy round
// trip on a loaded 2-core machine under -race: at 50ms, healthy calls after
// the failover timed out three in a row and reopened the breaker after it
// had closed (TestSentinelFailover: opened 25 and closed 8 times, open at
// the end).
const (
	foBudget   = 500 * time.Millisecond
	foMargin   = time.Second // scheduling slack on a loaded 2-core machine
	foWorkers  = 4           // workers per Limiter
	foMaxIters = 20000       // per worker: the loops are bounded in count too
)

// Who decided a request.
const (
	byRedis    = iota // the Redis store
	byPolicy          // the store failed: fail open or fail closed answered
	byFallback        // the store failed: the fallback store decided
)

type foTraceKey struct{}

// foTrace collects the Observer's events of one request.
type foTrace struct {
	storeErr, fallback, decided bool
	err                         error
}

// foReply is what one request got and who decided it.
type foReply struct {
	start, end time.Time
	status     int
	fields     bool
	by         int
	err        error // the store's error, when it failed
}

// foRig is a Limiter on a Breaker on a Store, with one failure policy.
type foRig struct {
	t       *testing.T
	policy  string
	client  redis.UniversalClient
	prefix  string
	budget  time.Duration // the middleware's WithTimeout
	ips     []string      // the workers' client IPs; one each by default
	br      *breaker.Breaker
	h       http.Handler
	opened  atomic.Int32
	closed  atomic.Int32
	mu      sync.Mutex
	replies []foReply
}

var foPolicies = []string{"fail-open", "fail-closed-503", "fallback"}

func newFoRig(t *testing.T, client redis.UniversalClient, policy string) *foRig {
	return newFoRigBudget(t, client, policy, foBudget)
}

// newFoRigBudget is newFoRig with another budget than foBudget.
func newFoRigBudget(t *testing.T, client redis.UniversalClient, policy string, budget time.Duration) *foRig {
	r := &foRig{t: t, policy: policy, client: client, prefix: uniquePrefix(t), budget: budget}
	var p ratelimit.FailurePolicy
	switch policy {
	case "fail-open":
		p = ratelimit.FailurePolicy{}
	case "fail-closed-503":
		p = ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}
	default:
		p = ratelimit.FailurePolicy{Fallback: memory.New()}
	}
	r.br = breaker.New(newStore(client, WithPrefix(r.prefix)), breaker.Config{
		Failures: 3, Cooldown: 50 * time.Millisecond, MaxCooldown: 200 * time.Millisecond,
		OnStateChange: func(_, to breaker.State) {
			switch to {
			case breaker.Open:
				r.opened.Add(1)
			case breaker.Closed:
				r.closed.Add(1)
			}
		},
	})
	obs := ratelimit.ObserverFunc(func(e ratelimit.Event) {
		tr, _ := e.Request.Context().Value(foTraceKey{}).(*foTrace)
		if tr == nil {
			return
		}
		switch e.Outcome {
		case ratelimit.OutcomeStoreError:
			tr.storeErr, tr.err = true, e.Err
		case ratelimit.OutcomeFallback:
			tr.fallback, tr.err = true, e.Err
		case ratelimit.OutcomeAllowed, ratelimit.OutcomeDenied:
			tr.decided = true
		}
	})
	mw := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.PerHour(1_000_000), Key: ratelimit.ByIP(), OnStoreError: p}}, ratelimit.WithStore(r.br), ratelimit.WithTimeout(budget), ratelimit.WithObserver(obs))
	r.h = mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	return r
}

// serve sends one request from ip and records who decided it.
func (r *foRig) serve(ip string) foReply {
	tr := &foTrace{}
	req := httptest.NewRequest("GET", "/", nil).WithContext(context.WithValue(context.Background(), foTraceKey{}, tr))
	req.RemoteAddr = ip + ":1234"
	rec := httptest.NewRecorder()
	rep := foReply{start: time.Now()}
	r.h.ServeHTTP(rec, req)
	rep.end = time.Now()
	rep.status, rep.fields, rep.err = rec.Code, rec.Header().Get("RateLimit") != "", tr.err
	switch {
	case tr.fallback:
		rep.by = byFallback
	case tr.storeErr:
		rep.by = byPolicy
	case tr.decided:
		rep.by = byRedis
	default:
		rep.by = -1
	}
	r.mu.Lock()
	r.replies = append(r.replies, rep)
	r.mu.Unlock()
	return rep
}

// load runs foWorkers workers until stop is closed (or foMaxIters each).
func (r *foRig) load(stop <-chan struct{}, wg *sync.WaitGroup) {
	for w := range foWorkers {
		wg.Go(func() {
			ip := fmt.Sprintf("192.0.2.%d", 10+w)
			if len(r.ips) > 0 {
				ip = r.ips[w%len(r.ips)]
			}
			for range foMaxIters {
				select {
				case <-stop:
					return
				default:
				}
				r.serve(ip)
				time.Sleep(2 * time.Millisecond) // pacing the load, not a synchronisation
			}
		})
	}
}

// check asserts that every request was answered within the budget plus
// the margin, by Redis or by the policy's own answer, that the breaker
// opened and closed again, and that Redis decides at the end; it logs the
// figures and returns the outage: from killAt to the end of the last
// request Redis did not decide.
func (r *foRig) check(killAt time.Time) time.Duration {
	t := r.t
	r.mu.Lock()
	defer r.mu.Unlock()
	var n [3]int
	var slowest time.Duration
	var lastFail time.Time
	for _, rep := range r.replies {
		d := rep.end.Sub(rep.start)
		slowest = max(slowest, d)
		if d > r.budget+foMargin {
			t.Errorf("%s: a request took %v, beyond the %v budget and %v margin", r.policy, d, r.budget, foMargin)
		}
		ok := false
		switch rep.by {
		case byRedis:
			ok = rep.status == 200 && rep.fields
		case byPolicy:
			ok = (r.policy == "fail-open" && rep.status == 200 && !rep.fields) ||
				(r.policy == "fail-closed-503" && rep.status == 503 && !rep.fields)
		case byFallback:
			ok = r.policy == "fallback" && rep.fields && (rep.status == 200 || rep.status == 429)
		}
		if !ok {
			t.Errorf("%s: a request got %d (fields %v, decided by %d): not Redis's answer nor the policy's", r.policy, rep.status, rep.fields, rep.by)
			continue
		}
		n[rep.by]++
		if rep.by != byRedis && rep.end.After(lastFail) {
			lastFail = rep.end
		}
	}
	outage := time.Duration(0)
	if !lastFail.IsZero() {
		outage = lastFail.Sub(killAt)
	}
	t.Logf("%s: %d requests: %d decided by Redis, %d by the policy, %d by the fallback; Redis back %v after the kill; slowest %v; breaker opened %d, closed %d times",
		r.policy, len(r.replies), n[byRedis], n[byPolicy], n[byFallback], outage.Round(time.Millisecond), slowest.Round(time.Millisecond), r.opened.Load(), r.closed.Load())
	if n[byPolicy]+n[byFallback] == 0 {
		t.Errorf("%s: no request saw the failover: the test did not test it", r.policy)
	}
	if r.opened.Load() == 0 || r.br.State() != breaker.Closed || r.closed.Load() == 0 {
		t.Errorf("%s: breaker opened %d and closed %d times, now %v: want opened, then closed", r.policy, r.opened.Load(), r.closed.Load(), r.br.State())
	}
	if r.policy == "fallback" && n[byPolicy] > 0 {
		t.Errorf("fallback: %d requests were not decided by the fallback while Redis failed", n[byPolicy])
	}
	return outage
}

// recovered sends requests until Redis decides one with the breaker
// closed, within budget.
func (r *foRig) recovered(budget time.Duration) bool {
	ip := "192.0.2.250"
	if len(r.ips) > 0 {
		ip = r.ips[0]
	}
	deadline := time.Now().Add(budget)
	for time.Now().Before(deadline) {
		rep := r.serve(ip)
		if rep.by == byRedis && r.br.State() == breaker.Closed {
			return true
		}
		time.Sleep(20 * time.Millisecond) // polling for the breaker's probe
	}
	return false
}

// loser takes fresh keys (GCRA and fixed window, one unit an hour) through
// a Store without breaker, so that a key admitted twice can only be a
// state lost in the failover.
type loser struct {
	store    *Store
	prefix   string
	seq      atomic.Int64
	mu       sync.Mutex
	admitted map[int64]time.Time // key number -> when its first take was admitted
	failed   map[int64]bool      // first take failed (it may still have run)
	denied   int                 // first takes denied: must stay 0
	count    atomic.Int64        // admissions so far
	window   stores.Window       // the fixed window's explicit bounds: no boundary during a test
}

func newLoser(t *testing.T, client redis.UniversalClient) *loser {
	p := uniquePrefix(t)
	now := time.Now().UnixNano()
	return &loser{store: newStore(client, WithPrefix(p), WithTimeout(foBudget)), prefix: p,
		admitted: map[int64]time.Time{}, failed: map[int64]bool{},
		window: stores.Window{Start: now - int64(time.Hour), End: now + int64(time.Hour)}}
}

func (l *loser) req(n int64) stores.Request {
	r := stores.Request{Rule: "fo", Key: fmt.Sprintf("k%d", n), Limit: ratelimit.PerHour(1), Cost: 1}
	if n%2 == 1 {
		r.Algorithm, r.Window = stores.FixedWindow, l.window
	}
	return r
}

func (l *loser) load(stop <-chan struct{}, wg *sync.WaitGroup) {
	for range foWorkers {
		wg.Go(func() {
			for range foMaxIters {
				select {
				case <-stop:
					return
				default:
				}
				n := l.seq.Add(1)
				res, err := l.store.Take(context.Background(), l.req(n))
				l.mu.Lock()
				switch {
				case err != nil:
					l.failed[n] = true
				case res.Allowed:
					l.admitted[n] = time.Now()
					l.count.Add(1)
				default:
					l.denied++
				}
				l.mu.Unlock()
				if err != nil {
					time.Sleep(2 * time.Millisecond) // pacing while Redis is down
				}
			}
		})
	}
}

// snapshot returns the key numbers that have state on the given nodes.
func (l *loser) snapshot(t *testing.T, addrs ...string) map[int64]bool {
	t.Helper()
	have := map[int64]bool{}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1})
		iter := c.Scan(context.Background(), 0, l.prefix+"*", 1000).Iterator()
		for iter.Next(context.Background()) {
			k := iter.Val()
			i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}')
			var n int64
			if i >= 0 && j > i {
				if _, err := fmt.Sscanf(k[i+1:j], "k%d", &n); err == nil {
					have[n] = true
				}
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("scanning %s: %v", a, err)
		}
		c.Close()
	}
	return have
}

// check takes every key a second time, after recovery: a second admission
// is an overshoot, which must be a key admitted before killAt whose state
// the snapshot (the replica right after the kill) lacks. It logs the
// figures.
func (l *loser) check(t *testing.T, killAt time.Time, snap map[int64]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.denied > 0 {
		t.Errorf("%d first takes of fresh keys were denied", l.denied)
	}
	lost, before := 0, 0
	for n, at := range l.admitted {
		if at.Before(killAt) {
			before++
			if !snap[n] {
				lost++
			}
		}
	}
	// A store of its own (no denied cache, a generous budget); a call that
	// fails while the client finds the new primary is tried again.
	again := newStore(l.store.client, WithPrefix(l.prefix), WithTimeout(2*time.Second))
	over, retook, retries := 0, 0, 0
	for n := range l.seq.Load() + 1 {
		_, adm := l.admitted[n]
		if !adm && !l.failed[n] {
			continue
		}
		res, err := again.Take(context.Background(), l.req(n))
		for ; err != nil && retries < 50; retries++ {
			time.Sleep(20 * time.Millisecond) // the client reconnects
			res, err = again.Take(context.Background(), l.req(n))
		}
		if err != nil {
			t.Fatalf("after recovery, Take(k%d): %v", n, err)
		}
		switch {
		case res.Allowed && adm:
			over++
			if snap[n] {
				t.Errorf("k%d: admitted twice though its state had reached the replica", n)
			}
			if at := l.admitted[n]; !at.Before(killAt.Add(foBudget + foMargin)) {
				t.Errorf("k%d: admitted twice, first at %v after the kill: only the old primary loses state", n, at.Sub(killAt))
			}
		case res.Allowed:
			retook++
		}
	}
	t.Logf("exact limits: %d keys of one unit admitted (%d before the kill); %d admitted before the kill never reached the replica; "+
		"%d admitted a second time after the failover (overshoot: %.2f%% of the admitted keys); %d first takes failed, %d of those admitted later; %d second takes retried",
		len(l.admitted), before, lost, over, 100*float64(over)/float64(max(1, len(l.admitted))), len(l.failed), retook, retries)
	// Every key admitted before the kill and missing on the replica is
	// admitted again; beyond those, only calls in flight at the kill.
	if over < lost || over > lost+foWorkers {
		t.Errorf("overshoot %d: want the %d unreplicated admissions (+ up to %d in flight)", over, lost, foWorkers)
	}
}
