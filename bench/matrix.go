package bench

import (
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// Configuration is one way a user writes this library's middleware: a row of
// the configuration matrix, measured beside go-limiter (the fastest peer) on
// the same cases as BenchmarkMiddleware.
type Configuration struct {
	Name string

	// Denies is false for the rows that cannot deny a sequential request
	// (a Concurrency or adaptive limit, a shadow rule): they have no deny
	// cases.
	Denies bool

	// Fields is false for the rows whose responses carry no rate-limit
	// field (a shadow rule is never reported).
	Fields bool

	// Middleware wraps next under l, as Library.Middleware does.
	Middleware func(l Limit, next http.Handler) http.Handler
}

// Configurations returns the rows of the configuration matrix: every
// algorithm, a store the user built, stacked rules and each capability.
func Configurations() []Configuration {
	rule := func(l Limit) ratelimit.Rule {
		return ratelimit.Rule{Name: "rate", Limit: ours(l), Key: ratelimit.ByIP()}
	}
	rules := func(rs ...ratelimit.Rule) func(Limit, http.Handler) http.Handler {
		return func(_ Limit, next http.Handler) http.Handler { return ratelimit.NewRules(rs)(next) }
	}
	one := func(ru ratelimit.Rule) func(Limit, http.Handler) http.Handler {
		return func(l Limit, next http.Handler) http.Handler {
			ru.Limit, ru.Key = ours(l), ratelimit.ByIP()
			return ratelimit.NewRules([]ratelimit.Rule{ru})(next)
		}
	}
	return []Configuration{
		{Name: "default", Denies: true, Fields: true, Middleware: func(l Limit, next http.Handler) http.Handler {
			return ratelimit.New(ours(l), ratelimit.ByIP())(next)
		}},
		{Name: "sized-store", Denies: true, Fields: true, Middleware: func(l Limit, next http.Handler) http.Handler {
			s := memory.New(memory.WithMaxKeys(MaxKeys))
			return ratelimit.New(ours(l), ratelimit.ByIP(), ratelimit.WithStore(s))(next)
		}},
		{Name: "fixed-window", Denies: true, Fields: true, Middleware: one(ratelimit.Rule{Algorithm: ratelimit.FixedWindow})},
		{Name: "sliding-window", Denies: true, Fields: true, Middleware: one(ratelimit.Rule{Algorithm: ratelimit.SlidingWindow})},
		{Name: "sliding-log", Denies: true, Fields: true, Middleware: func(l Limit, next http.Handler) http.Handler {
			if l.N > 10_000 {
				// A log holds at most 10,000 events: 100 per 5µs (2*10^7/s
				// a key, 800 bytes of log) stands in for Unlimited.
				l = Limit{N: 100, Per: 5 * time.Microsecond}
			}
			return one(ratelimit.Rule{Algorithm: ratelimit.SlidingLog})(l, next)
		}},
		{Name: "stacked", Denies: true, Fields: true, Middleware: func(l Limit, next http.Handler) http.Handler {
			daily := ratelimit.Rule{Name: "daily", Quota: ratelimit.Daily(1_000_000_000, time.UTC), Key: ratelimit.ByIP()}
			return rules(rule(l), daily)(l, next)
		}},
		{Name: "concurrency", Fields: true, Middleware: func(l Limit, next http.Handler) http.Handler {
			c := ratelimit.Rule{Name: "inflight", Algorithm: ratelimit.Concurrency, Limit: ratelimit.Limit{Rate: 1000, Period: time.Minute}, Key: ratelimit.ByIP()}
			return rules(c)(l, next)
		}},
		{Name: "settled", Denies: true, Fields: true, Middleware: one(ratelimit.Rule{Settled: true})},
		{Name: "paced", Denies: true, Fields: true, Middleware: one(ratelimit.Rule{Pace: ratelimit.Pace{MaxDelay: time.Second}})},
		{Name: "adaptive", Middleware: func(l Limit, next http.Handler) http.Handler {
			a := ratelimit.Rule{Name: "adaptive", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Min: 1 << 16, Max: 1 << 16, Initial: 1 << 16}}
			return rules(a)(l, next)
		}},
		{Name: "shadow", Middleware: func(l Limit, next http.Handler) http.Handler {
			r := rule(l)
			r.Shadow = true
			return rules(r)(l, next)
		}},
	}
}

// Cell is one cell of the matrix: a row on one of the cases.
type Cell struct {
	Config Configuration
	Case   Case
}

// Name is the cell's benchmark name, row/case.
func (c Cell) Name() string { return c.Config.Name + "/" + c.Case.String() }

// Cells returns every cell of the matrix, row by row: each row on each of
// Cases, but the deny cases of a row that cannot deny.
func Cells() []Cell {
	var cells []Cell
	for _, cfg := range Configurations() {
		for _, c := range Cases {
			if !c.Deny || cfg.Denies {
				cells = append(cells, Cell{cfg, c})
			}
		}
	}
	return cells
}

// PrepareConfiguration builds cfg's middleware for c and checks it as
// Prepare checks a library: every key's first request allowed, the second
// one given c's status, with rate-limit fields where cfg claims them.
func PrepareConfiguration(cfg Configuration, c Case) (*Prepared, error) {
	if c.Deny && !cfg.Denies {
		return nil, fmt.Errorf("%s cannot deny a sequential request", cfg.Name)
	}
	limit, want := Unlimited, http.StatusOK
	if c.Deny {
		limit, want = OnePerHour, http.StatusTooManyRequests
	}
	h := cfg.Middleware(limit, OK)
	p := &Prepared{Handler: h, Reqs: Requests(c.Keys), Want: want, Close: nop}
	w := ratelimittest.NewDiscardWriter()
	for round, status := range []int{http.StatusOK, want} {
		for i, r := range p.Reqs {
			w.Reset()
			h.ServeHTTP(w, r)
			if w.Status() != status {
				return nil, fmt.Errorf("%s %v: request %d of key %d got %d, want %d", cfg.Name, c, round+1, i, w.Status(), status)
			}
			if cfg.Fields != HasRateLimitHeader(w.Header()) {
				return nil, fmt.Errorf("%s %v: rate-limit fields %v, want %v: %v", cfg.Name, c, !cfg.Fields, cfg.Fields, w.Header())
			}
		}
	}
	return p, nil
}
