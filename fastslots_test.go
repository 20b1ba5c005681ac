package ratelimit_test

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// nestingHandler serves a request and, while it is in flight, depth[0]
// more requests of the same client through h (each one in turn holding its
// own slot while the next is served), recording every response: requests
// in flight together without goroutines, so that a Concurrency rule fills
// up deterministically.
type nestingHandler struct {
	h     http.Handler
	depth int
	rec   []*httptest.ResponseRecorder
	panic bool // the innermost admitted request's handler panics
}

func (n *nestingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if n.depth == 0 {
		if n.panic {
			panic("handler failed")
		}
		return
	}
	n.depth--
	rec := httptest.NewRecorder()
	n.rec = append(n.rec, rec)
	n.h.ServeHTTP(rec, r)
}

// TestConcurrencyDirectPathAnswersAsTheGeneralPath: a Concurrency rule on
// the memory store takes the direct path; on a store it does not recognise
// (generalPath), the general one. With requests in flight together (nested
// in one another's handlers, up to past the limit) and handlers that
// panic, both give the same statuses, fields and bodies, and both give
// every slot back: after each round, a full set of requests is admitted
// again.
func TestConcurrencyDirectPathAnswersAsTheGeneralPath(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	var paths [2]*nestingHandler
	for i, opt := range []func(ratelimit.Clock) ratelimit.Option{
		func(c ratelimit.Clock) ratelimit.Option { return ratelimit.WithClock(c) },
		generalPath,
	} {
		clock := ratelimittest.NewClock(start)
		n := &nestingHandler{}
		n.h = ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
			Limit: ratelimit.Limit{Rate: 3, Period: time.Minute}, Key: ratelimit.ByIP()}}, ratelimit.WithClock(clock), opt(clock))(n)
		paths[i] = n
	}
	rng := rand.New(rand.NewPCG(9, 9))
	denied := 0
	for round := range 500 {
		depth, panics, client := rng.IntN(6), rng.IntN(4) == 0, rng.IntN(3)
		var recs [2][]*httptest.ResponseRecorder
		for i, n := range paths {
			n.depth, n.panic, n.rec = depth, panics, nil
			outer := httptest.NewRecorder()
			func() {
				defer func() {
					if p := recover(); p != nil && !panics {
						panic(p)
					}
				}()
				n.h.ServeHTTP(outer, clientReq(client))
			}()
			recs[i] = append([]*httptest.ResponseRecorder{outer}, n.rec...)
		}
		if len(recs[0]) != len(recs[1]) {
			t.Fatalf("round %d: %d responses on the direct path, %d on the general", round, len(recs[0]), len(recs[1]))
		}
		for j := range recs[0] {
			a, b := recs[0][j], recs[1][j]
			if a.Code != b.Code || !reflect.DeepEqual(a.Header(), b.Header()) || a.Body.String() != b.Body.String() {
				t.Fatalf("round %d, response %d: direct %d %v %q, general %d %v %q", round, j, a.Code, a.Header(), a.Body, b.Code, b.Header(), b.Body)
			}
			if a.Code == http.StatusTooManyRequests {
				denied++
			}
		}
	}
	if denied == 0 {
		t.Fatal("no request was denied: the test compared allow paths only")
	}
}

// TestConcurrencyDirectPathReleasesOnPanic: a request admitted on the
// direct path whose handler panics gives its slot back: a rule of one slot
// admits the next request.
func TestConcurrencyDirectPathReleasesOnPanic(t *testing.T) {
	n := &nestingHandler{panic: true}
	n.h = ratelimit.NewRules([]ratelimit.Rule{{Name: "inflight", Algorithm: ratelimit.Concurrency,
		Limit: ratelimit.Limit{Rate: 1, Period: time.Hour}, Key: ratelimit.ByIP()}})(n)
	for i := range 3 {
		n.panic = i < 2
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }()
			n.h.ServeHTTP(w, clientReq(1))
		}()
		if w.Code == http.StatusTooManyRequests {
			t.Fatalf("request %d denied: a panicking handler kept its slot", i)
		}
	}
}
