package redisstore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit/stores"
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
	clock  stores.Clock // nil: server time
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
	leaseAll  bool         // WithLease: every GCRA key; otherwise hot keys only
	hot       *hotDetector // nil: hot-key handling off

	timeout  time.Duration  // each call's budget
	ctxReads bool           // the client bounds socket reads by ctx
	plainOK  bool           // plain takes may run plainScript (plain.go)
	keysHeld atomic.Bool    // the last plain take found its key holding state (absentHint)
	direct   redis.Scripter // plain takes' client on the caller's goroutine, or nil (callctx.go)
	retries  bool           // the client may resend a command: use call keys
	callID   string         // this Store's prefix of call key names
	calls    atomic.Uint64

	stats struct {
		roundTrips, sent, deniedHits, leaseHits atomic.Int64
	}
}

var _ stores.Store = (*Store)(nil)

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
	s.plainOK = plainClient(client)
	s.direct = directClient(client, s.ctxReads)
	if ps := poolSize(client); ps > 0 {
		s.maxInFlight = min(s.maxInFlight, ps) // never wait for a connection
	}
	s.single.mu = &s.singleMu
	if c.deniedSize > 0 {
		s.denied = newDeniedCache(c.deniedSize)
	}
	if c.leaseLife > 0 {
		s.leases, s.leaseAll = newLeaseTable(DefaultLeaseKeys), true
	}
	if c.hot != nil {
		s.hot = newHotDetector(*c.hot)
		if c.hot.Mode == HotLease && s.leases == nil {
			s.leases = newLeaseTable(c.hot.MaxKeys)
			s.leaseFrac, s.leaseLife = c.hot.LeaseFraction, c.hot.LeaseLifetime
		}
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
// stores.ErrInvalidRequest or ErrInvalidLimit), a Redis failure, or ctx
// ending first; the Result is then the zero value.
func (s *Store) Take(ctx context.Context, req stores.Request) (stores.Result, error) {
	res, err := s.take(ctx, s.now(), req)
	markerDenial(&res)
	return res, err
}

// TakeAt is Take at an explicit time instead of the server's (or the
// WithClock clock's). On a Store with server time it bypasses the denied
// cache and leases.
func (s *Store) TakeAt(ctx context.Context, now time.Time, req stores.Request) (stores.Result, error) {
	res, err := s.take(ctx, at(now), req)
	markerDenial(&res)
	return res, err
}

func (s *Store) take(ctx context.Context, now instant, req stores.Request) (stores.Result, error) {
	if err := validate(&req); err != nil {
		return stores.Result{}, err
	}
	// A reservation or a settlement always goes to Redis (shaped).
	sh := shaped(&req)
	cached := s.denied != nil && req.Cost > 0 && req.Algorithm != stores.Concurrency && !sh
	leased := s.leaseAll && req.Cost > 0 && req.Algorithm == stores.GCRA && !sh
	hot := s.hot != nil && hotEligible(&req) && !sh
	var t int64
	if cached || leased || hot {
		var ok bool
		if t, ok = s.cacheTime(now); !ok {
			cached, leased, hot = false, false, false
		}
	}
	if cached {
		if res, ok := s.denied.get(&req, t); ok {
			s.stats.deniedHits.Add(1)
			return res, nil
		}
	}
	if hot {
		if res, done, err := s.hotTake(ctx, now, &req, t); done {
			return res, err
		}
	}
	if leased {
		if res, direct, err := s.leaseTake(ctx, now, &req, t, cached); !direct {
			if err == nil && s.hot != nil && isMarker(&res) { // split by another Store
				return s.adopt(ctx, now, &req, t, res)
			}
			return res, err
		}
	}
	vals, err := s.check(ctx, now, &req, opTake, 0)
	if err != nil {
		return stores.Result{}, err
	}
	if sh && s.denied != nil {
		// A reservation or a debt postpones what a cached denial says.
		s.denied.forget(&req)
	}
	res := takeResult(&req, vals[:])
	if s.hot != nil && isMarker(&res) { // the key is split (hottake.go)
		if req.Cost == 0 {
			return s.splitPeek(ctx, now, &req, res)
		}
		if req.Force {
			return s.settleSplit(ctx, now, &req, res)
		}
		return s.adopt(ctx, now, &req, t, res)
	}
	if cached {
		s.denied.observe(&req, &res, t)
	}
	return res, nil
}

// check sends one request to Redis, coalesced or on its own, and returns
// its reply: code, remaining, retry µs, reset µs, token.
func (s *Store) check(ctx context.Context, now instant, req *stores.Request, kind opKind, n int) ([takeWidth]int64, error) {
	return s.checkKey(ctx, now, stateKey(s.prefix, req), req, kind, n)
}

// checkKey is check on the explicit state key key: the part of a split
// key (hotsplit.go).
func (s *Store) checkKey(ctx context.Context, now instant, key string, req *stores.Request, kind opKind, n int) ([takeWidth]int64, error) {
	var out [takeWidth]int64
	if kind == opTake && s.plain(req) {
		if vals, sent, err := s.soloPlain(ctx, now, key, req); sent {
			return vals, err
		}
	}
	ctx, cancel := s.budget(ctx)
	defer cancel()
	if !s.coalesce {
		mode := modeTake
		if kind != opTake || req.Force {
			// A negative cost returns; a lease; a settlement is
			// consumed even when it does not fit.
			mode = modeIndependent
		}
		o := op{req: *req, kind: kind, n: n}
		args := s.header(make([]any, 0, headerLen+fieldsPerRequest), mode, now)
		args = appendOp(args, &o)
		keys := []string{key}
		s.stats.roundTrips.Add(1)
		s.stats.sent.Add(1)
		vals, err := s.run(ctx, keys, args, takeWidth)
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
	o.ctx, o.key, o.req, o.kind, o.n, o.now = ctx, key, *req, kind, n, now
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
func (s *Store) TakeAll(ctx context.Context, reqs []stores.Request, results []stores.Result) error {
	return markerDenials(s.takeAll(ctx, s.now(), reqs, results), results)
}

// TakeAllAt is TakeAll at an explicit time.
func (s *Store) TakeAllAt(ctx context.Context, now time.Time, reqs []stores.Request, results []stores.Result) error {
	return markerDenials(s.takeAll(ctx, at(now), reqs, results), results)
}

func (s *Store) takeAll(ctx context.Context, now instant, reqs []stores.Request, results []stores.Result) error {
	if len(results) != len(reqs) {
		return fmt.Errorf("%w: %d results for %d requests", stores.ErrInvalidRequest, len(results), len(reqs))
	}
	if len(reqs) > MaxBatch {
		return fmt.Errorf("%w: %d requests in one call, at most %d", stores.ErrInvalidRequest, len(reqs), MaxBatch)
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
		if reqs[i].Force {
			return fmt.Errorf("%w: request %d: a forced request (a settlement) is taken alone, with Take", stores.ErrInvalidRequest, i)
		}
		var err error
		if args, err = appendRequest(args, &reqs[i]); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		keys[i] = stateKey(s.prefix, &reqs[i])
	}
	if s.splitIn(now, reqs) { // a split key: one request at a time (hottake.go)
		return s.takeAllEach(ctx, now, reqs, results)
	}
	if groups := s.route.groups(keys); groups != nil {
		err := s.takeAllGroups(ctx, now, groups, keys, reqs, results)
		return s.unlessMarked(ctx, now, reqs, results, err)
	}
	vals, err := s.run(ctx, keys, args, takeWidth*len(reqs))
	if err != nil {
		return err
	}
	for i := range reqs {
		results[i] = takeResult(&reqs[i], vals[takeWidth*i:])
	}
	return s.unlessMarked(ctx, now, reqs, results, nil)
}

// Return gives back req.Cost units taken earlier for the same key, in one
// round trip (coalesced with concurrent calls): a refund after a failed
// operation, or the release of Concurrency slots. It never raises the state
// above full capacity, and does nothing for a key with no state (it never
// creates a key). It drops the key from this Store's denied cache.
func (s *Store) Return(ctx context.Context, req stores.Request) error {
	return s.ret(ctx, s.now(), req)
}

// ReturnAt is Return at an explicit time.
func (s *Store) ReturnAt(ctx context.Context, now time.Time, req stores.Request) error {
	return s.ret(ctx, at(now), req)
}

func (s *Store) ret(ctx context.Context, now instant, req stores.Request) error {
	if err := validate(&req); err != nil {
		return err
	}
	if s.denied != nil {
		s.denied.forget(&req)
	}
	if _, ok := s.cacheTime(now); ok { // a split key's units go back to a part
		if done, err := s.hotReturn(ctx, now, &req); done {
			return err
		}
	}
	_, err := s.check(ctx, now, &req, opReturn, 0)
	return err
}

// validate is Request.Validate plus the Store's bound on key length.
func validate(req *stores.Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if n := len(req.Rule) + len(req.Key); n > MaxKeyLen {
		return fmt.Errorf("%w: rule and key of %d bytes exceed the Redis store's bound of %d", stores.ErrInvalidRequest, n, MaxKeyLen)
	}
	if w := req.Window; w != (stores.Window{}) {
		for _, b := range [...]int64{w.PrevStart, w.Start, w.End, w.NextEnd} {
			if e := ceilMicros(b); e > maxSafe || e < -maxSafe {
				return fmt.Errorf("%w: window bound %d is beyond the range of the Redis store", stores.ErrInvalidRequest, b)
			}
		}
	}
	return nil
}

// shaped reports whether req is a reservation (GCRA with a MaxDelay of a
// microsecond or more) or a settlement (Force): the Store's local answers
// (the denied cache, leases, a hot key's share) are exact for neither, so
// such a request always goes to Redis, in one script call.
func shaped(req *stores.Request) bool {
	return req.Force || req.Algorithm == stores.GCRA && req.MaxDelay >= time.Microsecond
}

// wrongType is the error of a request whose key holds another type of value.
func wrongType(req *stores.Request) error {
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
