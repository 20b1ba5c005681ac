// Package bench measures github.com/sluicehq/ratelimit against the other Go
// rate-limiting libraries on the same workload, in the same run: the full
// net/http middleware round trip on in-process memory, memory per tracked
// key, checks per second and round trips per check on one real Redis, the
// accuracy of four instances sharing that Redis, and the latency a real
// loopback HTTP server gains with the middleware.
//
// The benchmarks live in this package's tests (go test -bench); everything
// else, and the tables and charts of bench/results, is produced by one
// command:
//
//	go run ./bench/cmd/report
//
// See docs/benchmarks.md.
package bench

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/didip/tollbooth/v7"
	tblimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/go-chi/httprate"
	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Limit is N events per Per, the one limit every library is configured with.
type Limit struct {
	N   int
	Per time.Duration
}

var (
	// Unlimited is the limit of the allow path: so high that no library ever
	// denies during a benchmark. Per is an hour rather than a second because
	// go-limiter refills ticks x Per/N tokens per elapsed Per (in
	// nanoseconds), which is 1 token for 10^9 per second: it would start
	// denying after the first second.
	Unlimited = Limit{N: 1_000_000_000, Per: time.Hour}

	// OnePerHour is the limit of the deny path (exhausted for every key
	// before the timer starts) and of the key-distinctness check.
	OnePerHour = Limit{N: 1, Per: time.Hour}
)

// MaxKeys bounds the libraries' in-memory stores that take a bound: the
// default bound of ours (1,048,576 keys).
const MaxKeys = 1 << 20

// Library is one rate limiter under test, configured to key by the client IP
// taken from RemoteAddr, with its own rate-limit response headers on.
type Library struct {
	Name   string // short name used in benchmark names and tables
	Module string // Go module path, for the version in the report

	// Algorithm and Headers describe the configuration, for the report.
	Algorithm string
	Headers   string
	Notes     string // fairness notes

	// Middleware wraps next with the library's net/http middleware under l.
	// close releases background goroutines (nil-safe to call).
	Middleware func(l Limit, next http.Handler) (h http.Handler, close func())

	// Tracker returns a function that counts one event for key through the
	// library's limiter API (no HTTP), on a fresh in-memory store, and a
	// value to keep alive while measuring memory.
	Tracker func(l Limit) (take func(key string) bool, keep any, close func())
}

// ClientIP is the key every library is configured with: the host part of
// RemoteAddr. Our ByIP, the peers' own RemoteAddr extractors, and this
// function agree on IPv4 peers, which is what the benchmarks send.
func ClientIP(r *http.Request) (string, error) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return "", err
	}
	return host, nil
}

func nop() {}

// Libraries returns every library whose middleware is measured, ours first.
func Libraries() []Library {
	return []Library{sluicehqLibrary(), httprateLibrary(), ululeLibrary(), goLimiterLibrary(), throttledLibrary(), tollboothLibrary()}
}

// sluicehqLibrary describes sluicehq and builds its middleware and tracker.
func sluicehqLibrary() Library {
	return Library{
		Name: "sluicehq", Module: "github.com/sluicehq/ratelimit",
		Algorithm: "GCRA (default), sharded memory store bounded to 1,048,576 keys (the default)",
		Headers:   "IETF RateLimit + RateLimit-Policy; 429 adds Retry-After, Cache-Control and a problem+json body",
		Notes:     "ratelimit.New(limit, ratelimit.ByIP()) with no other option: what a user gets by default.",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			return ratelimit.New(ours(l), ratelimit.ByIP())(next), nop
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			s := memory.New()
			lim := ratelimit.NewLimiter(ours(l), ratelimit.ByIP(), ratelimit.WithStore(s))
			ctx := context.Background()
			return func(key string) bool {
				res, err := lim.Allow(ctx, key)
				return err == nil && res.Allowed
			}, s, nop
		},
	}
}

// httprateLibrary describes httprate and builds its middleware and tracker.
func httprateLibrary() Library {
	return Library{
		Name: "httprate", Module: "github.com/go-chi/httprate",
		Algorithm: "sliding-window counter, one map under one mutex (local counter)",
		Headers:   "X-RateLimit-Limit/-Remaining/-Reset; 429 adds Retry-After (defaults)",
		Notes:     "httprate.LimitBy(n, per, key) with key = host of RemoteAddr via httprate.CanonicalizeIP (the replacement its docs give for the deprecated KeyByIP).",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			return httprate.LimitBy(l.N, l.Per, httprateKey)(next), nop
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			rl := httprate.NewRateLimiter(l.N, l.Per)
			w := ratelimittest.NewDiscardWriter()
			r, _ := http.NewRequest("GET", "/", nil)
			return func(key string) bool {
				w.Reset()
				return !rl.OnLimit(w, r, key)
			}, rl, nop
		},
	}
}

// ululeLibrary describes ulule and builds its middleware and tracker.
func ululeLibrary() Library {
	return Library{
		Name: "ulule", Module: "github.com/ulule/limiter/v3",
		Algorithm: "fixed window, memory store (sync.Map of counters, background cleaner)",
		Headers:   "X-RateLimit-Limit/-Remaining/-Reset (defaults)",
		Notes:     "stdlib.NewMiddleware(limiter.New(memory.NewStore(), rate)); the default key getter is RemoteAddr's IP (TrustForwardHeader false, IPv4 mask /32).",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			lim := ululeLimiter(l)
			return ululestdlib.NewMiddleware(lim).Handler(next), nop
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			lim := ululeLimiter(l)
			ctx := context.Background()
			return func(key string) bool {
				c, err := lim.Get(ctx, key)
				return err == nil && !c.Reached
			}, lim, nop
		},
	}
}

// goLimiterLibrary describes go-limiter and builds its middleware and tracker.
func goLimiterLibrary() Library {
	return Library{
		Name: "go-limiter", Module: "github.com/sethvargo/go-limiter",
		Algorithm: "token bucket per key, memorystore (one map under one RWMutex, per-bucket lock)",
		Headers:   "X-RateLimit-Limit/-Remaining/-Reset; 429 adds Retry-After",
		Notes:     "httplimit.NewMiddleware(memorystore.New(&Config{Tokens: n, Interval: per}), httplimit.IPKeyFunc()); IPKeyFunc with no header names is RemoteAddr's host.",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			st := goLimiterStore(l)
			mw, err := httplimit.NewMiddleware(st, httplimit.IPKeyFunc())
			if err != nil {
				panic(err)
			}
			return mw.Handle(next), func() { st.Close(context.Background()) }
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			st := goLimiterStore(l)
			ctx := context.Background()
			return func(key string) bool {
					_, _, _, ok, err := st.Take(ctx, key)
					return err == nil && ok
				}, st, func() {
					st.Close(context.Background())
				}
		},
	}
}

// throttledLibrary describes throttled and builds its middleware and tracker.
func throttledLibrary() Library {
	return Library{
		Name: "throttled", Module: "github.com/throttled/throttled/v2",
		Algorithm: "GCRA, memstore bounded to 1,048,576 keys (LRU under one mutex)",
		Headers:   "X-RateLimit-Limit/-Remaining/-Reset, Retry-After",
		Notes:     "HTTPRateLimiterCtx{RateLimiter: GCRA(memstore.NewCtx(1<<20), RateQuota{PerDuration(n, per), MaxBurst: n-1}), VaryBy: &VaryBy{RemoteAddr: true}}; the bound matches ours (unbounded would be a plain map).",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			rl := throttledLimiter(l)
			h := &throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
			return h.RateLimit(next), nop
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			rl := throttledLimiter(l)
			ctx := context.Background()
			return func(key string) bool {
				limited, _, err := rl.RateLimitCtx(ctx, key, 1)
				return err == nil && !limited
			}, rl, nop
		},
	}
}

// tollboothLibrary describes tollbooth and builds its middleware and tracker.
func tollboothLibrary() Library {
	return Library{
		Name: "tollbooth", Module: "github.com/didip/tollbooth/v7",
		Algorithm: "token bucket (x/time/rate) per key in an expirable cache under one mutex",
		Headers:   "X-Rate-Limit-Limit/-Duration/-Request-Remote-Addr, RateLimit-Limit/-Reset/-Remaining",
		Notes:     "tollbooth.NewLimiter(n/per in events per second, nil) with burst n and SetIPLookups([\"RemoteAddr\"]); its key also holds the path (same for every request here). v8 is not on the module proxy; v7.0.2 is its latest.",
		Middleware: func(l Limit, next http.Handler) (http.Handler, func()) {
			return tollbooth.LimitHandler(tollboothLimiter(l), next), nop
		},
		Tracker: func(l Limit) (func(string) bool, any, func()) {
			lmt := tollboothLimiter(l)
			return func(key string) bool { return !lmt.LimitReached(key) }, lmt, nop
		},
	}
}

func ululeLimiter(l Limit) *ulule.Limiter {
	return ulule.New(ululemem.NewStore(), ulule.Rate{Period: l.Per, Limit: int64(l.N)})
}

func goLimiterStore(l Limit) limiter.Store {
	st, err := memorystore.New(&memorystore.Config{Tokens: uint64(l.N), Interval: l.Per})
	if err != nil {
		panic(err)
	}
	return st
}

func ours(l Limit) ratelimit.Limit { return ratelimit.Limit{Rate: l.N, Period: l.Per} }

func httprateKey(r *http.Request) (string, error) {
	ip, err := ClientIP(r)
	return httprate.CanonicalizeIP(ip), err
}

func throttledLimiter(l Limit) *throttled.GCRARateLimiterCtx {
	st, err := throttledmem.NewCtx(MaxKeys)
	if err != nil {
		panic(err)
	}
	rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerDuration(l.N, l.Per), MaxBurst: l.N - 1})
	if err != nil {
		panic(err)
	}
	return rl
}

func tollboothLimiter(l Limit) *tblimiter.Limiter {
	lmt := tollbooth.NewLimiter(float64(l.N)/l.Per.Seconds(), nil)
	lmt.SetBurst(l.N)
	lmt.SetIPLookups([]string{"RemoteAddr"})
	return lmt
}
