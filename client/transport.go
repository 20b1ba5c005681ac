package ratelimitclient

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/ratelimit"
)

// Defaults of the Transport's zero fields.
const (
	DefaultMaxWait    = time.Minute
	DefaultMaxDelay   = time.Hour
	DefaultMaxRetries = 2
	DefaultRetryRatio = 0.1
)

// maxBudget is the most retries a partition's budget holds, in thousandths.
const maxBudget = 10 * 1000

// Transport is an http.RoundTripper that keeps the requests it sends within
// the rate limits servers announce, and waits out the throttles they impose.
//
// Each partition (by default a scheme and host plus a hash of the request's
// credentials) has its own state, per policy name the server gives: a
// throttled host never delays a request to another. From the RateLimit and
// RateLimit-Policy fields (and their earlier and de-facto forms) it learns
// how much quota is left and when it is restored, and spaces requests over
// that time instead of sending them at once. A 429, or a 503 or 403
// with Retry-After, blocks the partition until Retry-After has passed, with
// jitter. A request that would wait longer than MaxWait, or past its
// context's deadline, fails at once with an error matching ErrWouldWait,
// without a network call. Throttled requests are retried only when that is
// safe (see MaxRetries).
//
// The zero Transport is ready to use and sends through
// http.DefaultTransport. Set its fields before its first use and do not
// change them after. A Transport is safe for concurrent use.
type Transport struct {
	// Base sends the requests; http.DefaultTransport when nil.
	Base http.RoundTripper

	// Partition, when set, names the partition of a request instead of the
	// default. Use it when one host applies separate quotas to groups of
	// endpoints (as GitHub's core and search): the fields of one group then
	// never delay another. It must be cheap and never block.
	Partition func(*http.Request) string

	// MaxWait bounds how long a request waits for the rate limit before it
	// is sent, and again before each retry; DefaultMaxWait when zero. A
	// negative MaxWait never waits: any request that would is failed at
	// once, and no retry is made that would.
	MaxWait time.Duration

	// MaxDelay caps what the Transport honours from a server: a reset or a
	// Retry-After further away is taken as MaxDelay, so that a hostile or
	// broken server cannot block a partition for a year. DefaultMaxDelay
	// when zero.
	MaxDelay time.Duration

	// MaxRetries bounds how many times a throttled request is sent again;
	// DefaultMaxRetries when zero, none when negative. Only requests that are
	// safe to repeat are retried: methods that are idempotent by definition
	// (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or requests carrying an
	// Idempotency-Key field, and only when their body can be rewound (no
	// body, or GetBody set, as http.NewRequest does for in-memory bodies).
	MaxRetries int

	// RetryRatio bounds retries to this fraction of a partition's recent
	// requests (plus one), so that retries never multiply a server's load
	// when it is overloaded; DefaultRetryRatio (10%) when zero.
	RetryRatio float64

	// Local, when set, limits each partition locally until its server sends
	// rate-limit fields, which then take over: for APIs that publish a limit
	// in their documentation but not in their responses.
	Local ratelimit.Limit

	// Adaptive makes Local a starting point: each partition then reads the
	// rate a server without rate-limit fields accepts from its throttles
	// (the sends it accepted between two of them; or, when its Date and
	// Retry-After show fixed windows of its clock, the quota of a window,
	// sent in each window) and sends at it, raising it slowly on the
	// responses that are accepted. It requires Local.
	Adaptive bool

	// Observer, when set, is called for each wait, throttle, retry and
	// exhausted retry budget. It runs on the request's goroutine and must not
	// block.
	Observer func(Event)

	once       sync.Once
	base       http.RoundTripper
	maxWait    time.Duration
	maxDelay   time.Duration
	maxRetries int
	deposit    int64     // thousandths of a retry each request adds to the budget
	epoch      time.Time // the zero of the Transport's clock (see mono)
	seed       maphash.Seed
	parts      table
	last       atomic.Pointer[partition] // the partition used last
}

// init applies the defaults and checks the configuration, panicking on a
// bad one.
func (t *Transport) init() {
	t.once.Do(func() {
		t.base = t.Base
		if t.base == nil {
			t.base = http.DefaultTransport
		}
		t.maxWait = zeroDefaultNegativeNone(t.MaxWait, DefaultMaxWait)
		t.maxDelay = t.MaxDelay
		if t.maxDelay <= 0 {
			t.maxDelay = DefaultMaxDelay
		}
		t.maxRetries = zeroDefaultNegativeNone(t.MaxRetries, DefaultMaxRetries)
		ratio := t.RetryRatio
		if ratio == 0 {
			ratio = DefaultRetryRatio
		}
		if !(ratio > 0 && ratio <= 1) {
			panic(fmt.Sprintf("ratelimit: Transport.RetryRatio %v: use a fraction in (0, 1]", t.RetryRatio))
		}
		t.deposit = int64(ratio * 1000)
		if t.Local != (ratelimit.Limit{}) {
			if err := t.Local.Validate(); err != nil {
				panic(fmt.Sprintf("ratelimit: Transport.Local: %v", err))
			}
		} else if t.Adaptive {
			panic("ratelimit: Transport.Adaptive needs Transport.Local as its starting rate")
		}
		t.seed = maphash.MakeSeed()
		t.epoch = time.Now().Add(-time.Second)
	})
}

// now reads the Transport's clock. time.Now reads the wall clock and the
// monotonic one; the Transport needs only the second (its times are
// compared with each other, and a server's with the offset learnt from
// it), and reading one costs half as much on every request.
func (t *Transport) now() mono { return mono(time.Since(t.epoch)) }

// RoundTrip sends req once it fits the rate limits of its partition, and
// again (see MaxRetries) while it is throttled. It returns a *WaitError
// (matching ErrWouldWait) without sending when the wait would not fit, and
// a throttled response as is when it is not retried.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.init()
	if req.URL == nil {
		closeBody(req)
		return nil, errors.New("ratelimit: request has no URL")
	}
	p := t.partition(req)
	retryable := t.maxRetries > 0 && replayable(req)
	if retryable {
		p.deposit(t.deposit, maxBudget)
	}
	tk, err := t.reserve(req, p, 0, 0)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		seq, err := t.wait(req, p, attempt, tk)
		if err != nil {
			if attempt == 0 {
				closeBody(req)
			}
			return nil, err
		}
		r, err := rewind(req, attempt)
		if err != nil {
			return nil, err
		}
		var sent mono
		if t.Adaptive && p.local != nil {
			sent = t.now() // for the rate the server accepts: see learn.go
		}
		resp, err := t.base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		if !t.update(p, resp, seq, sent, attempt) || !retryable || attempt >= t.maxRetries {
			return resp, nil
		}
		if !p.spend() {
			t.observe(Event{Kind: BudgetExhausted, Partition: p.name, Attempt: attempt, Status: resp.StatusCode})
			return resp, nil
		}
		if tk, err = t.reserve(req, p, attempt+1, 0); err != nil {
			p.deposit(1000, maxBudget) // not retried: give the retry back
			return resp, nil
		}
		discard(resp)
		t.observe(Event{Kind: Retried, Partition: p.name, Attempt: attempt + 1, Status: resp.StatusCode})
	}
}

// zeroDefaultNegativeNone resolves a field whose zero value means def and
// whose negative values mean none (0).
func zeroDefaultNegativeNone[T int | time.Duration](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}
