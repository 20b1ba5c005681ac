package ratelimitclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// recorder is a base RoundTripper that records every send and throttle and
// flags any send made after a throttle was received and before its
// Retry-After expired.
type recorder struct {
	next http.RoundTripper

	mu         sync.Mutex
	first      time.Time // when the first response arrived
	sent       int       // sends after the first response's arrival
	throttled  int       // 429s to sends after the first response
	blockFrom  time.Time // the latest 429's arrival
	blockUntil time.Time // and its Retry-After's expiry
	early      int       // sends strictly inside a Retry-After
	allSent    int
	onSend     func(time.Time) // when set, called with the time of each send
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	r.mu.Lock()
	if r.onSend != nil {
		r.onSend(now)
	}
	r.allSent++
	// Sends at the instant of the first response raced it: the client could
	// not know what it said.
	after := !r.first.IsZero() && now.After(r.first)
	if after {
		r.sent++
	}
	if now.After(r.blockFrom) && now.Before(r.blockUntil) {
		r.early++
	}
	r.mu.Unlock()
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	now = time.Now()
	r.mu.Lock()
	if r.first.IsZero() {
		r.first = now
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if after {
			r.throttled++
			if debugLoad {
				println("429 at", now.Sub(r.first).String(), resp.Header.Get("Retry-After"))
			}
		}
		if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			if until := now.Add(time.Duration(n) * time.Second); until.After(r.blockUntil) {
				r.blockFrom, r.blockUntil = now, until
			}
		}
	}
	r.mu.Unlock()
	return resp, nil
}

// loadResult is what a load run measured.
type loadResult struct {
	offered, ok, shed, otherErr int
	sent, throttled, early      int
}

// runLoad offers requests to a server behind server (a middleware) at ten
// times its limit of limit per period, for windows periods, through a
// Transport configured by tr, and measures the outcome. It runs inside a
// synctest bubble: time is virtual and the run deterministic in what it
// checks.
func runLoad(t *testing.T, server func(http.Handler) http.Handler, limit int, period time.Duration, windows int, tr *ratelimitclient.Transport) loadResult {
	t.Helper()
	var res loadResult
	synctest.Test(t, func(t *testing.T) {
		url, rec, client := loadClient(t, server, tr)

		start := time.Now()
		end := start.Add(time.Duration(windows) * period)
		arrival := period / time.Duration(10*limit)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for time.Now().Before(end) {
			res.offered++
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithDeadline(context.Background(), end)
				defer cancel()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := client.Do(req)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, ratelimitclient.ErrWouldWait):
					res.shed++
				case err != nil:
					res.otherErr++
				default:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK && !time.Now().After(end) {
						res.ok++
					}
				}
			}()
			time.Sleep(arrival)
		}
		wg.Wait()
		res.sent, res.throttled, res.early = rec.sent, rec.throttled, rec.early
	})
	res.log(t, fmt.Sprintf("offered %d,", res.offered), limit, windows)
	return res
}

// runClosedLoad is runLoad with a closed loop: workers each send a request,
// wait for its response and send the next, as a batch job does. A request
// that would wait past the end of the run is not sent; its worker sleeps
// out the wait.
func runClosedLoad(t *testing.T, server func(http.Handler) http.Handler, limit int, period time.Duration, windows, workers int, tr *ratelimitclient.Transport) loadResult {
	t.Helper()
	var res loadResult
	synctest.Test(t, func(t *testing.T) {
		url, rec, client := loadClient(t, server, tr)
		end := time.Now().Add(time.Duration(windows) * period)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(end) {
					ctx, cancel := context.WithDeadline(context.Background(), end)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
					resp, err := client.Do(req)
					cancel()
					mu.Lock()
					res.offered++
					var we *ratelimitclient.WaitError
					switch {
					case errors.As(err, &we):
						res.shed++
					case err != nil:
						res.otherErr++
					case resp.StatusCode == http.StatusOK && !time.Now().After(end):
						res.ok++
					}
					mu.Unlock()
					if err != nil {
						d := period / 100
						if we != nil {
							d = max(d, min(we.Wait, time.Until(end)))
						}
						time.Sleep(d)
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		res.sent, res.throttled, res.early = rec.sent, rec.throttled, rec.early
	})
	res.log(t, fmt.Sprintf("closed loop of %d:", workers), limit, windows)
	return res
}

// loadClient serves "ok" behind server on an in-memory network and returns
// the URL to request, the recorder of what tr sends, and a client on tr.
func loadClient(t *testing.T, server func(http.Handler) http.Handler, tr *ratelimitclient.Transport) (url string, rec *recorder, client *http.Client) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ts, base := memServer(t, server(ok))
	rec = &recorder{next: base}
	tr.Base = rec
	return ts.URL + "/v1/things", rec, &http.Client{Transport: tr}
}

// log reports a load run, what first.
func (res loadResult) log(t *testing.T, what string, limit, windows int) {
	t.Helper()
	t.Logf("%s ok %d (goodput %.1f%% of the limit), shed %d, other errors %d; sent after the first response %d, 429s %d (%.2f%%), early sends %d",
		what, res.ok, 100*float64(res.ok)/float64(limit*windows), res.shed, res.otherErr,
		res.sent, res.throttled, 100*float64(res.throttled)/float64(max(res.sent, 1)), res.early)
}

// check applies the bounds to a load run.
func (res loadResult) check(t *testing.T, limit, windows int, minGoodput, max429 float64) {
	t.Helper()
	if g := float64(res.ok) / float64(limit*windows); g < minGoodput {
		t.Errorf("goodput %.3f of the limit, want >= %.2f", g, minGoodput)
	}
	if f := float64(res.throttled) / float64(max(res.sent, 1)); f > max429 {
		t.Errorf("%d of %d sends after the first response got 429 (%.2f%%), want <= %.0f%%", res.throttled, res.sent, 100*f, 100*max429)
	}
	if res.early != 0 {
		t.Errorf("%d sends before a Retry-After expired", res.early)
	}
	if res.otherErr != 0 {
		t.Errorf("%d requests failed with errors other than ErrWouldWait", res.otherErr)
	}
}

var debugLoad = false

const (
	loadLimit   = 50
	loadPeriod  = 10 * time.Second
	loadWindows = 20
)

func TestLoadIETFFields(t *testing.T) {
	mw := ratelimit.New(ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, ratelimit.Global())
	res := runLoad(t, mw, loadLimit, loadPeriod, loadWindows, &ratelimitclient.Transport{})
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}

// rewriteHeaders wraps a middleware so that rewrite edits the response
// fields it wrote before they are sent.
func rewriteHeaders(mw func(http.Handler) http.Handler, rewrite func(h http.Header)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		inner := mw(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			inner.ServeHTTP(&headerHook{ResponseWriter: w, rewrite: rewrite}, r)
		})
	}
}

type headerHook struct {
	http.ResponseWriter
	rewrite func(http.Header)
	done    bool
}

func (h *headerHook) WriteHeader(code int) {
	if !h.done {
		h.done = true
		h.rewrite(h.Header())
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *headerHook) Write(b []byte) (int, error) {
	if !h.done {
		h.WriteHeader(http.StatusOK)
	}
	return h.ResponseWriter.Write(b)
}

func TestLoadLegacyEpochReset(t *testing.T) {
	mw := ratelimit.New(ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, ratelimit.Global(),
		ratelimit.WithHeaders(ratelimit.HeadersLegacy))
	res := runLoad(t, mw, loadLimit, loadPeriod, loadWindows, &ratelimitclient.Transport{})
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}

func TestLoadLegacyDeltaReset(t *testing.T) {
	mw := ratelimit.New(ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, ratelimit.Global(),
		ratelimit.WithHeaders(ratelimit.HeadersLegacy))
	delta := rewriteHeaders(mw, func(h http.Header) {
		epoch, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil {
			return
		}
		h.Set("X-RateLimit-Reset", strconv.FormatInt(max(epoch-time.Now().Unix(), 0), 10))
	})
	res := runLoad(t, delta, loadLimit, loadPeriod, loadWindows, &ratelimitclient.Transport{})
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}

// TestLoadGitHubStyle: a fixed window per period, announced as GitHub does:
// X-RateLimit-Limit, -Remaining, -Used, -Resource and -Reset as a Unix time.
func TestLoadGitHubStyle(t *testing.T) {
	mw := ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, Key: ratelimit.Global(), Algorithm: ratelimit.FixedWindow}}, ratelimit.WithHeaders(ratelimit.HeadersLegacy))
	github := rewriteHeaders(mw, func(h http.Header) {
		h.Set("X-RateLimit-Resource", "core")
		if rem, err := strconv.Atoi(h.Get("X-RateLimit-Remaining")); err == nil {
			h.Set("X-RateLimit-Used", strconv.Itoa(loadLimit-rem))
		}
	})
	res := runLoad(t, github, loadLimit, loadPeriod, loadWindows, &ratelimitclient.Transport{})
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}

// TestLoadEarlierDraftFields: RateLimit-Limit, -Remaining and -Reset (delay
// seconds), as drafts before -07 had them.
func TestLoadEarlierDraftFields(t *testing.T) {
	mw := ratelimit.New(ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, ratelimit.Global(),
		ratelimit.WithHeaders(ratelimit.HeadersLegacy))
	old := rewriteHeaders(mw, func(h http.Header) {
		epoch, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
		if err != nil {
			return
		}
		h.Set("RateLimit-Limit", h.Get("X-RateLimit-Limit"))
		h.Set("RateLimit-Remaining", h.Get("X-RateLimit-Remaining"))
		h.Set("RateLimit-Reset", strconv.FormatInt(max(epoch-time.Now().Unix(), 0), 10))
		h.Del("X-RateLimit-Limit")
		h.Del("X-RateLimit-Remaining")
		h.Del("X-RateLimit-Reset")
	})
	res := runLoad(t, old, loadLimit, loadPeriod, loadWindows, &ratelimitclient.Transport{})
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}

// TestLoadNoFieldsAdaptive: the server sends no rate-limit fields, only
// Retry-After on its 429s; the adaptive mode reads its rate from them (41
// 429s of 1086 sends, 3.8%, when it cut and probed).
func TestLoadNoFieldsAdaptive(t *testing.T) {
	mw := ratelimit.New(ratelimit.Limit{Rate: loadLimit, Period: loadPeriod}, ratelimit.Global(),
		ratelimit.WithHeaders(ratelimit.HeadersNone))
	tr := &ratelimitclient.Transport{Local: ratelimit.Limit{Rate: 2 * loadLimit, Period: loadPeriod}, Adaptive: true}
	res := runLoad(t, mw, loadLimit, loadPeriod, loadWindows, tr)
	res.check(t, loadLimit, loadWindows, 0.95, 0.01)
}
