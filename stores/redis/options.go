package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit/stores"
)

// DefaultPrefix is the default key prefix. Its version segment changes
// whenever a new release could not read the state an older one wrote, so
// that a new release never misreads old keys. An older release may misread
// a newer one's: a GCRA key's "<time>:<interval>" reads as no state to a
// build from before the interval was kept, so do not run such builds beside
// this one on the same prefix (see docs/redis.md).
const DefaultPrefix = "ratelimit:v1:"

// ClockTTLSlack is added to the TTL of every key written by a Store that
// uses WithClock. Expired state is equivalent to absent state, so keeping a
// key longer never changes a decision; the slack keeps a key alive when the
// given clock runs behind Redis's (a skewed host, or a test clock that moves
// slower than real time).
const ClockTTLSlack = 10 * time.Second

// Defaults of the coalescing and caching options.
const (
	// DefaultMaxBatch is the most checks one coalesced round trip carries.
	DefaultMaxBatch = 128
	// DefaultBatchTimeout bounds a coalesced round trip: its deadline is the
	// latest deadline of the callers in it, and never later than this.
	DefaultBatchTimeout = 3 * time.Second
	// DefaultDeniedCacheSize is the most keys the denied cache remembers.
	DefaultDeniedCacheSize = 1 << 16
	// DefaultLeaseKeys is the most keys lease mode holds leases for.
	DefaultLeaseKeys = 1 << 16
	// DefaultTimeout is the time budget of each call to Redis unless
	// WithTimeout sets another: a check that Redis has not answered by then
	// fails with an error wrapping context.DeadlineExceeded, and the
	// middleware's failure policy decides the request.
	DefaultTimeout = 50 * time.Millisecond
)

// An Option configures a Store.
type Option func(*config)

type config struct {
	prefix       string
	clock        stores.Clock
	coalesce     bool
	maxBatch     int
	maxWait      time.Duration
	batchTimeout time.Duration
	deniedSize   int // 0: no denied cache
	leaseFrac    float64
	leaseLife    time.Duration
	timeout      time.Duration
	hot          *HotKeys // WithHotKeys
}

func defaultConfig() config {
	return config{
		prefix:       DefaultPrefix,
		coalesce:     true,
		maxBatch:     DefaultMaxBatch,
		batchTimeout: DefaultBatchTimeout,
		deniedSize:   DefaultDeniedCacheSize,
		timeout:      DefaultTimeout,
	}
}

// WithTimeout sets the time budget of each Take, TakeAll and Return that
// goes to Redis (DefaultTimeout unless set): the call fails with an error
// wrapping context.DeadlineExceeded once d has passed, or at the deadline
// of its ctx if that comes first. The Store enforces it whatever the
// client's options: with go-redis's ContextTimeoutEnabled (and no -2
// ReadTimeout or WriteTimeout, which turn socket deadlines off) the socket
// read itself is bounded; otherwise the caller returns at the deadline
// while the read finishes (or meets the client's ReadTimeout) on a
// goroutine of its own, a hand-off that costs every call some latency and
// Redis some CPU (see docs/redis.md). Answers from the denied cache and
// leases take no time from it.
// It panics if d is not positive.
func WithTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("redisstore: WithTimeout(%v): must be positive", d))
	}
	return func(c *config) { c.timeout = d }
}

// WithPrefix sets the prefix of every key the Store writes; the default is
// DefaultPrefix. Stores that share a prefix share state. Keep a version
// segment in it ("myapp:rl:v1:"). The prefix must not contain '{' or '}':
// the Store places its own hash tag after it, and a brace in the prefix
// would put every key in one Cluster slot. WithPrefix panics if it does.
func WithPrefix(p string) Option {
	if strings.ContainsAny(p, "{}") {
		panic("redisstore: WithPrefix: the prefix must not contain '{' or '}'")
	}
	return func(c *config) { c.prefix = p }
}

// WithClock makes the Store read time from clock and send it with every
// call, instead of reading the Redis server's TIME.
//
// It is meant for tests (pass a ratelimittest.Clock to drive time) and for
// a deliberately client-clocked setup. With it, the instances sharing a
// limit must agree on the time: clock skew between them shifts their
// decisions, which server time avoids. Keys written with a client clock
// live ClockTTLSlack longer. Times are truncated to the microsecond. The
// denied cache and lease mode then read time from clock too.
func WithClock(clock stores.Clock) Option {
	if clock == nil {
		panic("redisstore: WithClock needs a clock")
	}
	return func(c *config) { c.clock = clock }
}

// WithCoalescing tunes coalescing, which is on by default: concurrent Take
// and Return calls are sent to Redis together, as one script call that
// decides each of them on its own (see the package documentation).
//
// maxBatch is the most checks in one round trip (DefaultMaxBatch if 0).
// maxWait is how long a round trip may wait for more checks before it is
// sent: 0, the default, never waits. A check is then sent at once, alone,
// while fewer than 4 script calls (or the client's pool size, if smaller)
// are in flight, so that coalescing adds no latency at any concurrency;
// checks made while that many are in flight go out together when one
// returns. A positive maxWait queues every check and sends a batch maxWait
// after the first check of an idle Store. WithCoalescing panics on
// negative values.
func WithCoalescing(maxBatch int, maxWait time.Duration) Option {
	if maxBatch < 0 || maxWait < 0 {
		panic(fmt.Sprintf("redisstore: WithCoalescing(%d, %v): negative value", maxBatch, maxWait))
	}
	if maxBatch == 0 {
		maxBatch = DefaultMaxBatch
	}
	return func(c *config) { c.coalesce, c.maxBatch, c.maxWait = true, maxBatch, maxWait }
}

// WithoutCoalescing sends every Take and Return as its own script call.
func WithoutCoalescing() Option {
	return func(c *config) { c.coalesce = false }
}

// WithBatchTimeout bounds each coalesced round trip (DefaultBatchTimeout
// unless set). A round trip's deadline is the latest deadline among the
// callers it carries, capped by d; a caller whose own deadline passes
// returns at once in any case. It panics if d is not positive.
func WithBatchTimeout(d time.Duration) Option {
	if d <= 0 {
		panic(fmt.Sprintf("redisstore: WithBatchTimeout(%v): must be positive", d))
	}
	return func(c *config) { c.batchTimeout = d }
}

// WithDeniedCacheSize sets how many keys the denied cache remembers
// (DefaultDeniedCacheSize unless set); 0 turns the cache off. It panics on
// a negative size.
func WithDeniedCacheSize(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("redisstore: WithDeniedCacheSize(%d): negative size", n))
	}
	return func(c *config) { c.deniedSize = n }
}

// WithoutDeniedCache turns the denied cache off: every check of a denied
// key goes to Redis. Same as WithDeniedCacheSize(0).
func WithoutDeniedCache() Option { return WithDeniedCacheSize(0) }

// WithLease turns lease mode on, for GCRA requests (other algorithms are
// unaffected). When a key has no local lease, a check takes from Redis its
// own cost plus up to max(1, fraction×Capacity) units in all, if they are
// available, and later checks of that key on this Store spend the leased
// units locally, without a round trip, until they run out or lifetime
// passes; units left when a lease expires are not given back (the limit is
// then slightly stricter than configured, never looser).
//
// Lease mode trades exactness for round trips: with I instances, admitted
// requests in any window exceed the exact bound by at most
// I×max(1, fraction×Capacity) units, and by at most lifetime/interval
// units (the refill during one lifetime). With 4 instances, fraction 0.005
// keeps them within 2% of the limit. Results served from a lease report
// Remaining and ResetAfter as of when the lease was taken, less the units
// spent since.
//
// WithLease panics unless 0 < fraction <= 1 and lifetime > 0.
func WithLease(fraction float64, lifetime time.Duration) Option {
	if !(fraction > 0 && fraction <= 1) || lifetime <= 0 {
		panic(fmt.Sprintf("redisstore: WithLease(%v, %v): want 0 < fraction <= 1 and a positive lifetime", fraction, lifetime))
	}
	return func(c *config) { c.leaseFrac, c.leaseLife = fraction, lifetime }
}
