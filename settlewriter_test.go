package ratelimit_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// settledLimiter is a limiter of one settled rule ("tokens", 100 an hour,
// one global key) on path, with name as the rule's name.
func settledLimiter(path func(ratelimit.Clock) ratelimit.Option, name string) *ratelimit.Limiter {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: name, Limit: ratelimit.PerHour(100),
		Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(clock), path(clock))
}

// wantRemaining fails t unless l's global key has want units left.
func wantRemaining(t *testing.T, l *ratelimit.Limiter, want int) {
	t.Helper()
	if res, err := l.AllowN(context.Background(), "global", 0); err != nil || res.Remaining != want {
		t.Fatalf("Remaining %d (%v); want %d", res.Remaining, err, want)
	}
}

// TestSettledHandlerGetsTheRequestUnchanged: Limiter.Handler passes a
// settled rule's handler the request it was given, not a copy with a
// context of its own: the admission reaches Settle on the writer, and the
// settled cost is charged, on the direct path and the general one.
func TestSettledHandlerGetsTheRequestUnchanged(t *testing.T) {
	for _, path := range settledPaths {
		t.Run(path.name, func(t *testing.T) {
			l := settledLimiter(path.opt, "tokens")
			r := httptest.NewRequest("GET", "/", nil)
			var got *http.Request
			settled := false
			l.Handler(http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
				got, settled = hr, ratelimit.Settle(hr.Context(), w, 10)
			})).ServeHTTP(httptest.NewRecorder(), r)
			if got != r {
				t.Error("the handler was given a copy of the request")
			}
			if !settled {
				t.Fatal("Settle found no rule to settle")
			}
			wantRemaining(t, l, 90)
		})
	}
}

// unwrapping is a writer that a middleware between the limiter and the
// handler wraps the handler's in (a logger, a compressor), and unwraps as
// http.ResponseController expects.
type unwrapping struct{ http.ResponseWriter }

func (w unwrapping) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// opaque is such a writer without Unwrap.
type opaque struct{ http.ResponseWriter }

// TestSettleFollowsTheWritersUnwrap: a writer that wraps the limiter's and
// unwraps to it keeps Settle reaching the limiter; one that cannot be
// unwrapped hides it, and the request keeps its estimate.
func TestSettleFollowsTheWritersUnwrap(t *testing.T) {
	for _, c := range []struct {
		name    string
		wrap    func(http.ResponseWriter) http.ResponseWriter
		settled bool
		want    int
	}{
		{"unwrapping", func(w http.ResponseWriter) http.ResponseWriter { return unwrapping{unwrapping{w}} }, true, 90},
		{"opaque", func(w http.ResponseWriter) http.ResponseWriter { return opaque{w} }, false, 99},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := settledLimiter(ratelimit.WithClock, "tokens")
			settled := !c.settled
			l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				settled = ratelimit.Settle(r.Context(), c.wrap(w), 10)
			})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
			if settled != c.settled {
				t.Fatalf("Settle reported %v; want %v", settled, c.settled)
			}
			wantRemaining(t, l, c.want)
		})
	}
}

// looping is a writer whose Unwrap returns itself.
type looping struct{ http.ResponseWriter }

func (w *looping) Unwrap() http.ResponseWriter { return w }

// TestSettleStopsOnAnUnwrapCycle: a writer around the limiter's whose
// Unwrap returns itself does not hold Settle forever, and what Settle
// found before the cycle is settled.
func TestSettleStopsOnAnUnwrapCycle(t *testing.T) {
	l := settledLimiter(ratelimit.WithClock, "tokens")
	settled := false
	l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		settled = ratelimit.Settle(r.Context(), w, 10)
	})).ServeHTTP(&looping{httptest.NewRecorder()}, httptest.NewRequest("GET", "/", nil))
	if !settled {
		t.Fatal("Settle found no rule to settle")
	}
	wantRemaining(t, l, 90)
}

// TestSettleReachesLimitersOnWriterAndContext: a handler under
// Limiter.Handler (the admission on the writer) and, inside it, a router
// adapter built on ServeRoute (the admission in the request's context)
// reaches both limiters with one Settle.
func TestSettleReachesLimitersOnWriterAndContext(t *testing.T) {
	outer := settledLimiter(ratelimit.WithClock, "outer")
	inner := settledLimiter(ratelimit.WithClock, "inner")
	h := outer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = inner.ServeRoute(w, r, "/", nil, nil, func(r *http.Request) error {
			if !ratelimit.Settle(r.Context(), w, 11) {
				t.Error("Settle found no rule to settle")
			}
			return nil
		})
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	wantRemaining(t, outer, 89)
	wantRemaining(t, inner, 89)
}

// serverWriter is a recorder that hijacks and sends files (ReadFrom) as
// net/http's writer does, and records that it was asked to.
type serverWriter struct {
	*httptest.ResponseRecorder
	hijacked, readFrom bool
}

func (w *serverWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.hijacked = true
	return nil, nil, nil
}

func (w *serverWriter) ReadFrom(src io.Reader) (int64, error) {
	w.readFrom = true
	return io.Copy(w.ResponseRecorder, src)
}

// TestSettledHandlerWriterKeepsTheServersMethods: the writer a settled
// rule's handler is given streams (http.Flusher, http.ResponseController),
// hijacks (http.Hijacker) and hands io.Copy to the server's ReadFrom, as
// the server's own writer does.
func TestSettledHandlerWriterKeepsTheServersMethods(t *testing.T) {
	l := settledLimiter(ratelimit.WithClock, "tokens")
	sw := &serverWriter{ResponseRecorder: httptest.NewRecorder()}
	l.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A file, say: no io.WriterTo, which io.Copy would ask first.
		if _, err := io.Copy(w, io.LimitReader(strings.NewReader("part one, "), 100)); err != nil {
			t.Errorf("io.Copy: %v", err)
		}
		f, ok := w.(http.Flusher)
		if !ok {
			t.Fatal("the handler's writer is no http.Flusher")
		}
		f.Flush()
		io.WriteString(w, "part two")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
		hj, ok := w.(http.Hijacker)
		if !ok {
			t.Fatal("the handler's writer is no http.Hijacker")
		}
		if _, _, err := hj.Hijack(); err != nil {
			t.Errorf("Hijack: %v", err)
		}
	})).ServeHTTP(sw, httptest.NewRequest("GET", "/", nil))
	if !sw.Flushed || !sw.hijacked || !sw.readFrom {
		t.Fatalf("flushed %v, hijacked %v, ReadFrom %v; want all", sw.Flushed, sw.hijacked, sw.readFrom)
	}
	if got := sw.Body.String(); got != "part one, part two" {
		t.Fatalf("body %q", got)
	}
}

// TestConcurrentSettlesChargeEachRequestOnce: requests served at once from
// several goroutines, each handler settling its own cost from three
// goroutines of its own at once, some of them hijacking the connection or
// panicking once settled, and leaving goroutines behind that settle a
// poison cost with the served request's writer and request while later
// requests are served (the first half's writers called on while the
// second half is served). Each
// request is charged its own cost once, every Settle in a handler finds
// its rule and every late one finds none: on the direct path and the
// general one, through Handler and ServeRoute.
func TestConcurrentSettlesChargeEachRequestOnce(t *testing.T) {
	const servers, each, poison = 8, 40, 500
	eachSettledPath(t, 100_000, func(t *testing.T, l *ratelimit.Limiter, serve settledServe) {
		var charged, lost, lateFound atomic.Int64
		var late sync.WaitGroup
		var done atomic.Int64
		release := make(chan struct{})
		next := func(w http.ResponseWriter, r *http.Request) {
			cost, _ := strconv.Atoi(r.Header.Get("X-Cost"))
			var settlers sync.WaitGroup
			for range 3 {
				settlers.Go(func() {
					if !ratelimit.Settle(r.Context(), w, cost) {
						lost.Add(1)
					}
				})
			}
			settlers.Wait()
			charged.Add(int64(cost))
			served := r.Context().Value(servedKey{}).(chan struct{})
			late.Go(func() { // left behind: settles once the request is served
				<-served
				<-release // and, for the first half, while the second is
				if ratelimit.Settle(r.Context(), w, poison) {
					lateFound.Add(1)
				}
			})
			switch cost % 4 {
			case 1:
				_, _, _ = http.NewResponseController(w).Hijack()
			case 2:
				panic(errSettledPanic)
			}
		}
		var wg sync.WaitGroup
		for g := range servers {
			wg.Go(func() {
				for i := range each {
					served := make(chan struct{})
					r := httptest.NewRequest("GET", "/", nil)
					r.Header.Set("X-Cost", strconv.Itoa(1+(g*each+i)%7))
					r = r.WithContext(context.WithValue(r.Context(), servedKey{}, served))
					func() {
						defer func() {
							if p := recover(); p != nil && p != errSettledPanic {
								panic(p)
							}
						}()
						serve(next, &serverWriter{ResponseRecorder: httptest.NewRecorder()}, r)
					}()
					close(served)
					if done.Add(1) == servers*each/2 {
						close(release)
					}
				}
			})
		}
		wg.Wait()
		late.Wait()
		if n := lost.Load(); n != 0 {
			t.Errorf("%d Settle calls in handlers found no rule to settle", n)
		}
		if n := lateFound.Load(); n != 0 {
			t.Errorf("%d Settle calls after the response found a rule to settle", n)
		}
		want := 100_000 - int(charged.Load())
		if res, _ := l.AllowN(context.Background(), "global", 0); res.Remaining != want {
			t.Fatalf("Remaining %d after requests that settled %d in all; want %d", res.Remaining, charged.Load(), want)
		}
	})
}

// servedKey is the context key of the channel closed once the request has
// been served.
type servedKey struct{}

// errSettledPanic is the panic of a handler that settled.
var errSettledPanic = errors.New("handler failed after settling")
