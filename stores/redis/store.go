// Package redisstore is a ratelimit.Store on Redis, so that any number of
// instances share one limit with exactly the behaviour of the in-process
// memory store.
//
// The production setup (see Example): the Store's default time budget
// bounds every call, a Breaker stops calling a Redis that keeps failing,
// and the failure policy decides requests meanwhile:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	store := ratelimit.NewBreaker(redisstore.New(client), ratelimit.BreakerConfig{})
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
//		ratelimit.WithStore(store), ratelimit.WithFailurePolicy(ratelimit.FailOpen))
//
// While Redis is down or hung a request then waits at most DefaultTimeout
// (50ms), and nothing once the breaker is open.
//
// New takes any redis.UniversalClient: a *redis.Client (standalone, or a
// Sentinel failover client from redis.NewFailoverClient), a
// *redis.ClusterClient or a *redis.Ring.
//
// # One round trip, one script
//
// Every check is at most one EVALSHA of one Lua script that implements
// every algorithm (GCRA, sliding window, fixed window, concurrency) for one
// or many requests, atomically on the server. The script is run with
// EVALSHA and falls back to EVAL on NOSCRIPT, which caches it again: it
// works on every Redis from 2.6 on, including managed services that forbid
// FUNCTION LOAD, and survives SCRIPT FLUSH, a restart, a failover or a new
// Cluster node without any set-up step. Redis Functions would need loading
// on every node, again after each of those events, and need Redis 7. One
// script means one SHA to manage. A single GCRA check takes a fast path in
// the script.
//
// # Concurrency
//
// Concurrency state is a sorted set of the slots in flight, scored by
// their deadlines: each slot expires on its own Limit.Period after it was
// taken, so a slot lost by a crashed holder, a failed Return or an
// acquisition whose reply came after its budget is free again one Period
// later, whatever other callers do meanwhile. An allowed Take of cost n
// holds n members and returns a token in Result.Slot; Return with that
// token in Request.Slot (and the same Cost) releases exactly those slots,
// and nothing once they expired; Return with Slot 0 releases the Cost
// slots that expire soonest. An acquisition or a release is still one
// script call.
//
// # Retries and budgets
//
// go-redis resends a command after a network error (MaxRetries, 3 by
// default). For a client that may do so, every script call carries a call
// key: a resent call finds it and replies the first run's reply without
// applying anything again, so a take or a return is never applied twice.
// The key lives as long as the call's deadline plus 100ms (one more SET per
// call, in the same script).
//
// Every Take, TakeAll and Return that goes to Redis is bounded by the
// Store's budget (DefaultTimeout unless WithTimeout), or by its ctx's
// deadline if that comes first, whether or not the client has
// ContextTimeoutEnabled: see WithTimeout.
//
// # Fewer round trips
//
// Three mechanisms cut round trips further. The first two keep every
// decision exact and are on by default; the third is opt-in.
//
// Coalescing (WithCoalescing, WithoutCoalescing). A Take or Return made
// while no call is in flight is sent at once, alone: an idle Store adds no
// latency. Calls made while one is in flight queue, and when it returns
// everything queued goes out as one script call that decides each check on
// its own, in order, each exactly as if it were alone (the script is
// atomic, so each check is too). One call carries up to DefaultMaxBatch
// checks, and amortises the per-call cost on the server as well as the
// network round trip: under 64 concurrent callers about 0.03 round trips
// per check. Calls are grouped by what one script may touch: everything on
// a single node, one slot on Cluster, one hash tag on a Ring (so there
// coalescing pays for hot keys, such as a flood on one client or a global
// rule, rather than for many distinct keys). TakeAll is not coalesced.
//
// A caller whose ctx ends while its check is queued or in flight returns
// ctx's error at once. A check still queued is then never sent; one already
// in flight completes on the server, and what it consumed stays consumed,
// exactly as when the reply to a lone EVALSHA arrives after its caller gave
// up. A coalesced call carries no caller's ctx: its deadline is the latest
// of its callers' deadlines, capped by WithBatchTimeout. No goroutine
// outlives the work: a queued batch is sent by a goroutine that exits once
// the queue is empty, so a Store needs no Close.
//
// The denied cache (WithDeniedCacheSize, WithoutDeniedCache). When Redis
// denies a GCRA, sliding-window or fixed-window check with Remaining 0, the
// Store remembers the key until one unit is back and answers its checks
// locally in the meantime, with RetryAfter and ResetAfter counted down: a
// denied hot key, such as an attacker's flood, costs no round trip. This is
// exact because while a key has nothing left no check can consume from it,
// so its state only ages: the Result Redis would give is a function of the
// elapsed time. The one exception is a refund: a Return through this Store
// forgets the key, but a Return on another instance cannot reach this
// cache, so this instance may keep denying the key until its cached time
// passes. The cache times a denial from when its request was sent, so it
// never denies longer than Redis would. GCRA and fixed-window denials
// answer any cost; sliding-window denials answer cost 1 only (other costs
// depend on state a denial does not reveal); Concurrency is never cached,
// nor are cost-0 peeks. The cache holds DefaultDeniedCacheSize keys.
//
// Lease mode (WithLease, opt-in, GCRA only). A Store takes a few units of
// a key at a time and spends them locally until they run out or the lease
// expires. With I instances and leases of n units, admitted requests in any
// window exceed the exact bound by at most I×n units (2% of the limit with
// 4 instances and a lease fraction of 0.005); see WithLease. A check that
// finds a grant in flight for its key never waits for it: it asks Redis
// directly (coalesced with the others, and exact), so on a hot key lease
// mode makes no check wait longer than the default mode does.
//
// Stats reports round trips, checks sent, and the checks the denied cache
// and leases answered.
//
// # Time
//
// The script reads the Redis server's TIME, in integer microseconds, so the
// clocks of the instances do not matter. (WithClock sends the client's time
// instead, for tests.) Time never goes back for a key: a request whose
// time falls before the window the key holds (a clock stepped back, a
// skewed instance with WithClock, TakeAt with an old time) counts against
// the stored, later window and never restarts it; GCRA keeps its
// theoretical arrival time. A calendar quota's request carries its
// neighbour windows (ratelimit.Window's PrevStart and NextEnd, which the
// middleware fills): the script counts it against whichever of the three
// contains the server's time, so instances whose clocks disagree by up to a
// window still agree on when a day or a month turns. All durations are whole microseconds: the refill
// interval of GCRA is ceil(Period/Rate) rounded up to the microsecond, where
// the memory store rounds up to the nanosecond, so for a limit whose interval
// is not a whole number of microseconds (PerSecond(3): 333,334µs instead of
// 333,333,334ns) this store is stricter by less than a microsecond per event.
// Likewise a sliding window's RetryAfter is the memory store's rounded up to
// the microsecond. For limits with whole-microsecond intervals, on a
// millisecond time grid, every Result equals the memory store's.
//
// Lua numbers are doubles; the script keeps every integer below 2^53 and
// computes the sliding window's weighted count, whose product can reach
// 2^84 (a count of 2^31 times a period of a century in microseconds),
// exactly with split multiplication.
//
// # Keys and TTLs
//
// A request's state lives in one key, "<prefix>{<key>}:<algorithm>:<rule>",
// with the default prefix "ratelimit:v1:" (see WithPrefix; the version
// changes with the state format). The client key, with '%' and '}' escaped,
// is the Cluster hash tag, so all rules of one client share a slot and no
// user input can pick another tag. The state is one small string: the GCRA
// theoretical arrival time, or a window's bounds and counts. Every write sets
// a TTL in the same SET (PX, in milliseconds rounded up, at least 1): the
// time until the state becomes equivalent to an absent one. A Return never
// creates a key.
//
// # Cluster and TakeAll
//
// On a single node, and whenever all keys of a TakeAll share a slot (all
// rules of one client key do), TakeAll is one script and exactly
// all-or-nothing. Otherwise the requests are grouped by slot (by hash tag on
// a Ring) and each group runs its script in parallel, all-or-nothing within
// the group. If any group denies or fails, the groups that consumed are
// compensated by returning their cost, and the results are reported as the
// memory store does (allowed requests as a peek with nothing consumed). Until
// the compensation lands, one round trip later, other callers may see those
// units consumed: a brief over-count, never an under-count. If the
// compensation fails, the units stay consumed until they refill. A
// Concurrency request compensated this way gives back exactly the slots it
// took, by token. Each shard uses its own TIME; keep the nodes' clocks in
// sync (NTP), as Redis Cluster itself expects.
//
// # Errors
//
// A backend failure (connection refused, timeout, cancelled ctx, a script
// error) is returned as an error prefixed "ratelimit: redis:" that wraps the
// cause, never as a denial; the middleware's failure policy decides what
// happens then. A call that ran out of budget wraps
// context.DeadlineExceeded (errors.Is), also when the client reported an
// i/o timeout.
//
// A request's Rule and Key together may be up to MaxKeyLen bytes; the
// middleware hashes long keys, so only direct callers can reach the bound.
package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
)

// MaxBatch is the most requests one TakeAll accepts, as for the memory store.
const MaxBatch = 64

// Store keeps rate-limit state in Redis. It is safe for concurrent use, and
// any number of Stores, in any number of processes, sharing a Redis and a
// prefix share their limits. A Store starts no goroutine that outlives the
// calls in progress, so it needs no Close.
//
// Take, TakeAll and Return use the server's time; TakeAt, TakeAllAt and
// ReturnAt take an explicit time for deterministic tests.
type Store struct {
	client redis.UniversalClient
	prefix string
	clock  ratelimit.Clock // nil: server time
	route  routing
	epoch  time.Time // origin of the local monotonic clock of the caches

	coalesce     bool
	maxBatch     int
	maxWait      time.Duration
	maxInFlight  int // coalesced calls of one lane on the wire at once
	batchTimeout time.Duration
	single       lane // the lane of a one-node client
	singleMu     sync.Mutex
	lanes        [laneShards]laneShard // Cluster slots, Ring tags

	denied    *deniedCache // nil: off
	leases    *leaseTable  // nil: lease mode off
	leaseFrac float64
	leaseLife time.Duration

	timeout  time.Duration // each call's budget
	ctxReads bool          // the client bounds socket reads by ctx
	retries  bool          // the client may resend a command: use call keys
	callID   string        // this Store's prefix of call key names
	calls    atomic.Uint64

	stats struct {
		roundTrips, sent, deniedHits, leaseHits atomic.Int64
	}
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store on client. The Store does not own the client: closing
// it is the caller's business.
func New(client redis.UniversalClient, opts ...Option) *Store {
	if client == nil {
		panic("redisstore: New needs a client")
	}
	c := defaultConfig()
	for _, o := range opts {
		o(&c)
	}
	s := &Store{
		client: client, prefix: c.prefix, clock: c.clock, route: routingFor(client), epoch: time.Now(),
		coalesce: c.coalesce, maxBatch: c.maxBatch, maxWait: c.maxWait, batchTimeout: c.batchTimeout,
		leaseFrac: c.leaseFrac, leaseLife: c.leaseLife,
		maxInFlight: defaultMaxInFlight, timeout: c.timeout,
		callID: newCallID(),
	}
	s.ctxReads, s.retries = clientTraits(client)
	if ps := poolSize(client); ps > 0 {
		s.maxInFlight = min(s.maxInFlight, ps) // never wait for a connection
	}
	s.single.mu = &s.singleMu
	if c.deniedSize > 0 {
		s.denied = newDeniedCache(c.deniedSize)
	}
	if c.leaseLife > 0 {
		s.leases = newLeaseTable(DefaultLeaseKeys)
	}
	return s
}

// Stats counts what a Store did since it was created.
type Stats struct {
	// RoundTrips is the number of script calls made by Take and Return
	// (TakeAll's calls are not counted).
	RoundTrips int64
	// Sent is the number of Take and Return checks those calls carried;
	// Sent/RoundTrips is the average batch size.
	Sent int64
	// DeniedCacheHits is the number of checks the denied cache answered.
	DeniedCacheHits int64
	// LeaseHits is the number of checks served from a lease.
	LeaseHits int64
}

// Stats returns the Store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		RoundTrips: s.stats.roundTrips.Load(), Sent: s.stats.sent.Load(),
		DeniedCacheHits: s.stats.deniedHits.Load(), LeaseHits: s.stats.leaseHits.Load(),
	}
}

func (s *Store) now() instant {
	if s.clock == nil {
		return instant{}
	}
	return at(s.clock.Now())
}

// Take checks req and, if it is allowed, consumes req.Cost units, in one
// round trip at most: none when the denied cache or a lease answers, and a
// shared one when coalesced with concurrent calls. The error is non-nil only
// when no decision could be made: an invalid request (wrapping
// ratelimit.ErrInvalidRequest or ErrInvalidLimit), a Redis failure, or ctx
// ending first; the Result is then the zero value.
func (s *Store) Take(ctx context.Context, req ratelimit.Request) (ratelimit.Result, error) {
	return s.take(ctx, s.now(), req)
}

// TakeAt is Take at an explicit time instead of the server's (or the
// WithClock clock's). On a Store with server time it bypasses the denied
// cache and leases.
func (s *Store) TakeAt(ctx context.Context, now time.Time, req ratelimit.Request) (ratelimit.Result, error) {
	return s.take(ctx, at(now), req)
}

func (s *Store) take(ctx context.Context, now instant, req ratelimit.Request) (ratelimit.Result, error) {
	if err := validate(&req); err != nil {
		return ratelimit.Result{}, err
	}
	cached := s.denied != nil && req.Cost > 0 && req.Algorithm != ratelimit.Concurrency
	leased := s.leases != nil && req.Cost > 0 && req.Algorithm == ratelimit.GCRA
	var t int64
	if cached || leased {
		var ok bool
		if t, ok = s.cacheTime(now); !ok {
			cached, leased = false, false
		}
	}
	if cached {
		if res, ok := s.denied.get(&req, t); ok {
			s.stats.deniedHits.Add(1)
			return res, nil
		}
	}
	if leased {
		if res, direct, err := s.leaseTake(ctx, now, &req, t, cached); !direct {
			return res, err
		}
	}
	vals, err := s.check(ctx, now, &req, opTake, 0)
	if err != nil {
		return ratelimit.Result{}, err
	}
	res := takeResult(&req, vals[:])
	if cached {
		s.denied.observe(&req, &res, t)
	}
	return res, nil
}

// check sends one request to Redis, coalesced or on its own, and returns
// its reply: code, remaining, retry µs, reset µs.
func (s *Store) check(ctx context.Context, now instant, req *ratelimit.Request, kind opKind, n int) ([takeWidth]int64, error) {
	var out [takeWidth]int64
	ctx, cancel := s.budget(ctx)
	defer cancel()
	if !s.coalesce {
		mode := modeTake
		if kind != opTake {
			mode = modeIndependent // a negative cost returns; a lease
		}
		o := op{req: *req, kind: kind, n: n}
		args := s.header(make([]any, 0, headerLen+fieldsPerRequest), mode, now)
		args = appendOp(args, &o)
		key := []string{stateKey(s.prefix, req)}
		s.stats.roundTrips.Add(1)
		s.stats.sent.Add(1)
		vals, err := s.run(ctx, key, args, takeWidth)
		if err != nil {
			return out, err
		}
		if vals[0] < 0 {
			return out, wrongType(req)
		}
		copy(out[:], vals)
		return out, nil
	}
	o := opPool.Get().(*op)
	o.ctx, o.key, o.req, o.kind, o.n, o.now = ctx, stateKey(s.prefix, req), *req, kind, n, now
	if err := s.do(o); err != nil {
		return out, err // o may still be in a batch: not pooled
	}
	out, err := o.vals, o.err
	*o = op{done: o.done}
	opPool.Put(o)
	return out, err
}

// TakeAll checks every request and consumes them only if all are allowed.
// results must have the length of reqs, at most MaxBatch. A key named twice
// sees its own earlier update. When any request is denied nothing is
// consumed, and the allowed ones report Allowed with their state as it
// stands. See the package documentation for TakeAll on Redis Cluster.
func (s *Store) TakeAll(ctx context.Context, reqs []ratelimit.Request, results []ratelimit.Result) error {
	return s.takeAll(ctx, s.now(), reqs, results)
}

// TakeAllAt is TakeAll at an explicit time.
func (s *Store) TakeAllAt(ctx context.Context, now time.Time, reqs []ratelimit.Request, results []ratelimit.Result) error {
	return s.takeAll(ctx, at(now), reqs, results)
}

func (s *Store) takeAll(ctx context.Context, now instant, reqs []ratelimit.Request, results []ratelimit.Result) error {
	if len(results) != len(reqs) {
		return fmt.Errorf("%w: %d results for %d requests", ratelimit.ErrInvalidRequest, len(results), len(reqs))
	}
	if len(reqs) > MaxBatch {
		return fmt.Errorf("%w: %d requests in one call, at most %d", ratelimit.ErrInvalidRequest, len(reqs), MaxBatch)
	}
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := s.budget(ctx)
	defer cancel()
	keys := make([]string, len(reqs))
	args := s.header(make([]any, 0, headerLen+fieldsPerRequest*len(reqs)), modeTake, now)
	for i := range reqs {
		if err := validate(&reqs[i]); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		var err error
		if args, err = appendRequest(args, &reqs[i]); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		keys[i] = stateKey(s.prefix, &reqs[i])
	}
	if groups := s.route.groups(keys); groups != nil {
		return s.takeAllGroups(ctx, now, groups, keys, reqs, results)
	}
	vals, err := s.run(ctx, keys, args, takeWidth*len(reqs))
	if err != nil {
		return err
	}
	for i := range reqs {
		results[i] = takeResult(&reqs[i], vals[takeWidth*i:])
	}
	return nil
}

// Return gives back req.Cost units taken earlier for the same key, in one
// round trip (coalesced with concurrent calls): a refund after a failed
// operation, or the release of Concurrency slots. It never raises the state
// above full capacity, and does nothing for a key with no state (it never
// creates a key). It drops the key from this Store's denied cache.
func (s *Store) Return(ctx context.Context, req ratelimit.Request) error {
	return s.ret(ctx, s.now(), req)
}

// ReturnAt is Return at an explicit time.
func (s *Store) ReturnAt(ctx context.Context, now time.Time, req ratelimit.Request) error {
	return s.ret(ctx, at(now), req)
}

func (s *Store) ret(ctx context.Context, now instant, req ratelimit.Request) error {
	if err := validate(&req); err != nil {
		return err
	}
	if s.denied != nil {
		s.denied.forget(&req)
	}
	_, err := s.check(ctx, now, &req, opReturn, 0)
	return err
}

// validate is Request.Validate plus the Store's bound on key length.
func validate(req *ratelimit.Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if n := len(req.Rule) + len(req.Key); n > MaxKeyLen {
		return fmt.Errorf("%w: rule and key of %d bytes exceed the Redis store's bound of %d", ratelimit.ErrInvalidRequest, n, MaxKeyLen)
	}
	if w := req.Window; w != (ratelimit.Window{}) {
		for _, b := range [...]int64{w.PrevStart, w.Start, w.End, w.NextEnd} {
			if e := ceilMicros(b); e > maxSafe || e < -maxSafe {
				return fmt.Errorf("%w: window bound %d is beyond the range of the Redis store", ratelimit.ErrInvalidRequest, b)
			}
		}
	}
	return nil
}

// wrongType is the error of a request whose key holds another type of value.
func wrongType(req *ratelimit.Request) error {
	return fmt.Errorf("ratelimit: redis: the state of rule %q key %q is not a rate-limit state (WRONGTYPE)", req.Rule, req.Key)
}

// budget bounds ctx by the Store's time budget (see WithTimeout), unless
// its own deadline comes first.
func (s *Store) budget(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}
