package adaptive

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"
)

// Config configures an adaptive concurrency limit: a cap on requests in
// flight that nobody has to guess, because it follows the latency of the
// requests it admits. Set it as a ratelimit.Rule's Adaptive, keyed like any
// rule (usually Global or per route), or give it to New for a standalone
// Limiter:
//
//	ratelimit.Rule{Name: "inflight", Key: ratelimit.Global(), Adaptive: &adaptive.Config{Max: 500}}
//
// Once per sample window (Window, and at least MinSamples outcomes) a
// controller compares the window's latency (the mean of its fastest 90%)
// with the lowest window latency of the recent past (the minimum RTT,
// learned from live traffic: no probing, no pinning of the limit). While the ratio stays under Tolerance and the
// limit is in use, the limit grows by a sixteenth a window; above it, the
// limit drops to the in-flight count divided by the ratio, at most by half
// in one window; if a cut took effect and latency did not follow, the
// service got slower and the minimum RTT is relearned instead. A window
// that holds only drops (502-504 the server answered: a dependency failed
// or timed out) halves it, one with more than 10% drops cuts it by a
// fifth. Min and Max are always enforced. docs/adaptive.md has the details
// and when not to use it.
//
// A rejected request gets 503 Service Unavailable (the server, not the
// client, is over capacity) with Retry-After: 1 and the problem type
// https://iana.org/assignments/http-problem-types#temporary-reduced-capacity,
// never 429. The rule's other fields (Limit, LimitFunc, Quota, Algorithm,
// Cost, Store, OnStoreError) are ignored: an adaptive rule keeps its state
// in process memory, whatever the Limiter's store, and each instance learns
// its own capacity. That is per instance by nature (a replica's capacity is
// its own) and needs no shared store.
//
// The zero value is usable: Min 1, Max 1000, Initial 20, Window 100ms,
// MinSamples 10, Tolerance 1.25, MinRTTHorizon 10s, DefaultClassify, every
// request critical. A Config must not be modified once its rule is built.
type Config struct {
	// Min, Max and Initial bound and seed the limit (requests in flight).
	Min, Max, Initial int

	// Window is the shortest sample window; a window also waits for
	// MinSamples outcomes (up to 10 Windows).
	Window     time.Duration
	MinSamples int

	// Tolerance is how much the window's latency may exceed the
	// minimum RTT before the limit comes down; at least 1.1.
	Tolerance float64

	// MinRTTHorizon is how long the minimum RTT is remembered: a service
	// that became slower for good is relearned within this horizon.
	MinRTTHorizon time.Duration

	// Classify tells what a finished request says about capacity; see
	// Sample. DefaultClassify when nil. It runs on the request path. A
	// rule that sets it times every request, to give it elapsed; with
	// DefaultClassify, which ignores elapsed, only the sampled requests
	// read the clock (elapsed is then -1).
	Classify func(r *http.Request, status int, elapsed time.Duration) Sample

	// Critical, if set, splits requests in two priorities: at the limit,
	// a request for which it returns false is rejected first, as it may
	// only fill LowPriorityShare of the limit. Every request is critical
	// when nil.
	Critical         func(r *http.Request) bool
	LowPriorityShare float64 // in (0, 1]; 0.75 when zero

	// MaxKeys bounds the controllers of a keyed rule: a new key once
	// MaxKeys keys exist takes the place of an idle one (see
	// Limiter.IdleAt), whose controller is dropped; while none is idle,
	// new keys share one more controller. 64 when zero.
	MaxKeys int

	// OnWindow, if set, is called after every sample window with the new
	// state, on the goroutine of the request that closed the window: keep
	// it fast. For metrics: export Limit, InFlight, MinRTT and SampleRTT.
	OnWindow func(State)
}

// Sample is what a finished request tells an adaptive limit.
type Sample uint8

// The classes of Config.Classify.
const (
	// SampleSuccess samples the request's latency.
	SampleSuccess Sample = iota
	// SampleDrop counts the request as lost to overload (a server-side
	// timeout, a 503 from a dependency): windows of drops bring the limit
	// down. Never classify by a deadline the caller chose: see
	// DefaultClassify.
	SampleDrop
	// SampleIgnore leaves the request out of the sample (a cached answer,
	// a 500 that says nothing about load).
	SampleIgnore
	// SampleAbandoned is a request its caller gave up on (its deadline
	// passed, or it went away) after the elapsed time. It is a drop when
	// that time is already longer than Tolerance times the minimum RTT:
	// the server was too slow for its callers, which must bring the limit
	// down (its latency cannot: it is cut at the caller's deadline). A
	// request abandoned sooner says nothing of the server, only that its
	// caller chose to wait that little, and is ignored: a caller's short
	// deadlines cannot shrink the limit. Before the minimum RTT is learned,
	// every abandoned request is ignored. (At high rates a request sampled
	// out is never timed, and its outcome is not recorded; a timed one
	// found slow counts as a drop for each of the 2^k it stands for.)
	SampleAbandoned
)

// DefaultClassify is the classifier used when Config.Classify is nil.
//
// Only what the server decided counts as a drop: a 502, 503 or 504 its
// handler answered while the caller still waited (a dependency failed or
// timed out, or a server-side timeout such as the 503 of an
// http.TimeoutHandler that the limiter wraps). A deadline the caller
// brought is not a drop: the deadline on r's context, which the request
// carried into the limiter (a gRPC client's grpc-timeout, one your
// middleware took from a header), is the caller's choice, and counting it
// as a drop would let a client shrink everyone's limit by sending requests
// it gives up on at once. So a request whose context has ended (its
// deadline passed, or the client went away), a 502-504 that ends once that
// deadline has passed, before the context's timer fired (a dependency gave
// up on the caller's deadline), and a 499 (client closed request) are
// SampleAbandoned: drops only when the server had already been slower
// for them than Tolerance times the minimum RTT (see SampleAbandoned). 429 and
// other 5xx are ignored. The rest, including status 0 (unknown, with Admit
// on a writer that does not report it), are successes. elapsed is not
// used: set Classify to also count requests slower than a deadline of
// yours as drops.
func DefaultClassify(r *http.Request, status int, elapsed time.Duration) Sample {
	ctx := r.Context()
	if ctx.Err() != nil {
		return SampleAbandoned // the caller's deadline or cancellation
	}
	switch {
	case status == http.StatusBadGateway || status == http.StatusServiceUnavailable || status == http.StatusGatewayTimeout:
		if callerDeadlinePassed(ctx) {
			// The deadline passed and its timer has yet to end the
			// context: the dependency gave up on the caller's deadline.
			return SampleAbandoned
		}
		return SampleDrop
	case status == statusClientClosedRequest:
		return SampleAbandoned
	case status == http.StatusTooManyRequests || status >= 500:
		return SampleIgnore
	}
	return SampleSuccess
}

// statusClientClosedRequest is 499, the status nginx and gRPC gateways log
// for a request whose client went away before the answer.
const statusClientClosedRequest = 499

// callerDeadlinePassed reports whether ctx has a deadline that is now past.
// It reads the clock only for a context with a deadline.
func callerDeadlinePassed(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// State is a snapshot of one adaptive limit.
type State struct {
	Rule      string        // the rule's name ("" for a standalone Limiter)
	Key       string        // the key; OverflowKey for keys beyond MaxKeys
	Limit     int           // requests in flight allowed now (critical ones)
	InFlight  int           // requests in flight now
	MinRTT    time.Duration // the minimum RTT in use; 0 until learned
	SampleRTT time.Duration // the last window's latency (mean of its fastest 90%); 0 until a window closed
	// The last window's counts: successes (estimated from the sampled
	// ones when the rate is high enough to sample), drops and rejections.
	Successes, Drops, Rejected int
	Windows                    int64 // sample windows closed so far
}

// OverflowKey is the key of the controller shared by the keys of an
// adaptive rule beyond its MaxKeys.
const OverflowKey = "\x00overflow"

// Normalize returns c with its defaults filled in. It panics, naming rule,
// on a configuration that cannot work, as a ratelimit.Rule does when built.
func (c Config) Normalize(rule string) Config { return c.normalized(rule) }

// normalized fills a's defaults (cmp.Or keeps a field that is set, and
// gives the default to one that is zero) and panics on a configuration
// that cannot work.
func (a Config) normalized(name string) Config {
	a.Max = cmp.Or(a.Max, 1000)
	a.Min = cmp.Or(a.Min, 1)
	a.Initial = cmp.Or(a.Initial, min(max(20, a.Min), a.Max))
	a.Window = cmp.Or(a.Window, 100*time.Millisecond)
	a.MinSamples = cmp.Or(a.MinSamples, 10)
	a.Tolerance = cmp.Or(a.Tolerance, 1.25)
	a.MinRTTHorizon = cmp.Or(a.MinRTTHorizon, 10*time.Second)
	a.LowPriorityShare = cmp.Or(a.LowPriorityShare, 0.75)
	a.MaxKeys = cmp.Or(a.MaxKeys, 64)
	if a.Classify == nil {
		a.Classify = DefaultClassify
	}
	switch {
	case a.Min < 1 || a.Max < a.Min || a.Max > maxLimit:
		panic(fmt.Sprintf("ratelimit: rule %q: adaptive bounds [%d, %d] must satisfy 1 <= Min <= Max", name, a.Min, a.Max))
	case a.Initial < a.Min || a.Initial > a.Max:
		panic(fmt.Sprintf("ratelimit: rule %q: adaptive Initial %d is outside [%d, %d]", name, a.Initial, a.Min, a.Max))
	case a.Window < 0 || a.MinSamples < 0 || a.MinRTTHorizon < 0 || a.MaxKeys < 0:
		panic(fmt.Sprintf("ratelimit: rule %q: negative adaptive Window, MinSamples, MinRTTHorizon or MaxKeys", name))
	case a.Window > time.Hour || a.MinRTTHorizon > 7*24*time.Hour:
		panic(fmt.Sprintf("ratelimit: rule %q: adaptive Window over an hour or MinRTTHorizon over a week", name))
	case !(a.Tolerance >= 1.1) || a.Tolerance > 100:
		panic(fmt.Sprintf("ratelimit: rule %q: adaptive Tolerance %v must be in [1.1, 100]", name, a.Tolerance))
	case !(a.LowPriorityShare > 0 && a.LowPriorityShare <= 1):
		panic(fmt.Sprintf("ratelimit: rule %q: adaptive LowPriorityShare %v must be in (0, 1]", name, a.LowPriorityShare))
	}
	return a
}

// maxLimit bounds Max, as ratelimit bounds a count: it fits in 32 bits.
const maxLimit = 1<<31 - 1
