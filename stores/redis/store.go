// Package redisstore is a ratelimit.Store on Redis, so that any number of
// instances share one limit with exactly the behaviour of the in-process
// memory store.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	store := redisstore.New(client)
//	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(), ratelimit.WithStore(store))
//
// New takes any redis.UniversalClient: a *redis.Client (standalone, or a
// Sentinel failover client from redis.NewFailoverClient), a
// *redis.ClusterClient or a *redis.Ring.
//
// # One round trip, one script
//
// Every check is a single EVALSHA of one Lua script that implements every
// algorithm (GCRA, sliding window, fixed window, concurrency) for one or many
// requests, so Take, TakeAll and Return each cost one round trip and are
// atomic on the server. The script is run with EVALSHA and falls back to EVAL
// on NOSCRIPT, which caches it again: it works on every Redis from 2.6 on,
// including managed services that forbid FUNCTION LOAD, and survives SCRIPT
// FLUSH, a restart, a failover or a new Cluster node without any set-up step.
// Redis Functions would need loading on every node, again after each of
// those events, and need Redis 7. One script means one SHA to manage.
//
// # Time
//
// The script reads the Redis server's TIME, in integer microseconds, so the
// clocks of the instances do not matter. (WithClock sends the client's time
// instead, for tests.) All durations are whole microseconds: the refill
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
// Concurrency request compensated this way keeps the later expiry its
// acquisition set. Each shard uses its own TIME; keep the nodes' clocks in
// sync (NTP), as Redis Cluster itself expects.
//
// # Errors
//
// A backend failure (connection refused, timeout, cancelled ctx, a script
// error) is returned as an error prefixed "ratelimit: redis:" that wraps the
// cause, never as a denial; the middleware's failure policy decides what
// happens then. go-redis bounds socket reads by the ctx deadline only when
// the client has ContextTimeoutEnabled (otherwise by its ReadTimeout, 3s by
// default): set it, so that the middleware's WithTimeout budget holds.
//
// A request's Rule and Key together may be up to MaxKeyLen bytes; the
// middleware hashes long keys, so only direct callers can reach the bound.
package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
)

// MaxBatch is the most requests one TakeAll accepts, as for the memory store.
const MaxBatch = 64

// Store keeps rate-limit state in Redis. It is safe for concurrent use, and
// any number of Stores, in any number of processes, sharing a Redis and a
// prefix share their limits.
//
// Take, TakeAll and Return use the server's time; TakeAt, TakeAllAt and
// ReturnAt take an explicit time for deterministic tests.
type Store struct {
	client redis.UniversalClient
	prefix string
	clock  ratelimit.Clock // nil: server time
	route  routing
}

var _ ratelimit.Store = (*Store)(nil)

// New returns a Store on client. The Store does not own the client: closing
// it is the caller's business.
func New(client redis.UniversalClient, opts ...Option) *Store {
	if client == nil {
		panic("redisstore: New needs a client")
	}
	c := config{prefix: DefaultPrefix}
	for _, o := range opts {
		o(&c)
	}
	return &Store{client: client, prefix: c.prefix, clock: c.clock, route: routingFor(client)}
}

func (s *Store) now() instant {
	if s.clock == nil {
		return instant{}
	}
	return at(s.clock.Now())
}

// Take checks req and, if it is allowed, consumes req.Cost units, in one
// round trip. The error is non-nil only when no decision could be made: an
// invalid request (wrapping ratelimit.ErrInvalidRequest or ErrInvalidLimit)
// or a Redis failure; the Result is then the zero value.
func (s *Store) Take(ctx context.Context, req ratelimit.Request) (ratelimit.Result, error) {
	return s.take(ctx, s.now(), req)
}

// TakeAt is Take at an explicit time instead of the server's (or the
// WithClock clock's).
func (s *Store) TakeAt(ctx context.Context, now time.Time, req ratelimit.Request) (ratelimit.Result, error) {
	return s.take(ctx, at(now), req)
}

func (s *Store) take(ctx context.Context, now instant, req ratelimit.Request) (ratelimit.Result, error) {
	if err := validate(&req); err != nil {
		return ratelimit.Result{}, err
	}
	args := s.header(make([]any, 0, 3+fieldsPerRequest), modeTake, now)
	args, err := appendRequest(args, &req)
	if err != nil {
		return ratelimit.Result{}, err
	}
	vals, err := s.run(ctx, []string{stateKey(s.prefix, &req)}, args, takeWidth)
	if err != nil {
		return ratelimit.Result{}, err
	}
	return result(req.Limit, vals), nil
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
	keys := make([]string, len(reqs))
	args := s.header(make([]any, 0, 3+fieldsPerRequest*len(reqs)), modeTake, now)
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
		results[i] = result(reqs[i].Limit, vals[takeWidth*i:])
	}
	return nil
}

// Return gives back req.Cost units taken earlier for the same key, in one
// round trip: a refund after a failed operation, or the release of
// Concurrency slots. It never raises the state above full capacity, and
// does nothing for a key with no state (it never creates a key).
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
	args := s.header(make([]any, 0, 3+fieldsPerRequest), modeReturn, now)
	args, err := appendRequest(args, &req)
	if err != nil {
		return err
	}
	return s.runReturn(ctx, []string{stateKey(s.prefix, &req)}, args)
}

// validate is Request.Validate plus the Store's bound on key length.
func validate(req *ratelimit.Request) error {
	if err := req.Validate(); err != nil {
		return err
	}
	if n := len(req.Rule) + len(req.Key); n > MaxKeyLen {
		return fmt.Errorf("%w: rule and key of %d bytes exceed the Redis store's bound of %d", ratelimit.ErrInvalidRequest, n, MaxKeyLen)
	}
	return nil
}
