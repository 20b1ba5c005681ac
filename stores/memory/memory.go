// Package memory is the in-process Store: sharded, bounded, O(1) and free of
// allocations per check (a Concurrency key allocates its queue of slots when
// it is first taken and when the queue grows). It is what ratelimit.New uses
// when no store is given; create one yourself to share it between
// middleware, to bound its size, or to inject a clock in tests. A Limiter
// runs the rules it keeps here on the same direct path as the default
// store's, so a store of your own costs nothing more per request.
package memory

import (
	"context"
	"time"

	"github.com/sluicehq/ratelimit/internal/memstore"
	"github.com/sluicehq/ratelimit/stores"
)

// Store keeps rate-limit state in process memory.
//
// Keys are kept as 64-bit hashes of (rule, key, algorithm) with a per-process
// random seed, so clients cannot choose keys that collide, in open-addressing
// tables sized for the bound: a GCRA key takes one 16-byte slot and a fixed
// or sliding window key one 24-byte slot, in tables that grow by half when
// 3/4 full, up to the size that holds the bound at 3/4. Measured at the default bound
// (1,048,576 keys, the test TestMemoryAtFullBound): 23.6 bytes per GCRA key
// (24 MiB for a full table) and 32.5 per window key (33 MiB); at 200,000
// keys, 26 and 39. A GCRA reservation given back while later ones wait
// is kept as a hole of its key until its turn passes, outside the bound: at
// most 65,536 a shard, 38 to 225 bytes each, dropped with their key. A
// Concurrency key also keeps a queue of its slots in flight (about 64
// bytes, plus 24 per acquisition held; room for up to 16 more is kept from
// a busier moment, and a larger queue gives its room back once its
// acquisitions fill less than a quarter of it). A SlidingLog key
// keeps a ring of Rate timestamps after a 64-byte header and counts for
// those bytes, as the allocator rounds them, and 64 more, in units of 32
// bytes (a Rate of 100 counts as 32 keys, 10,000 as 2,564; see
// docs/sliding-log.md). The store holds at most MaxKeys keys per table
// (GCRA; fixed and sliding windows together; Concurrency; sliding logs, by
// that weight, over fewer shards when a shard's share would not hold a log
// of 10,000 events, so that only a bound below 2,564 is passed, by one such
// log kept alone). A key whose state has
// expired is equivalent to an absent one and is swept a few at a time as new
// keys arrive in a shard at least half full (below that, there is room and
// nothing to gain); only when a shard is full of live keys does a new key evict the
// sampled key that would have been full again soonest. There is no background
// goroutine and no stop-the-world sweep.
//
// Time never goes back for a key: a request stamped before the window the
// key already counts in (a caller that read the clock before another that
// was served first, or a clock stepped back) counts against that window, and
// a key dropped as expired is never counted before the time at which it was
// dropped; GCRA holds because its state only moves forward. Each
// Concurrency slot expires a Period after it was taken, and Return with a
// Result.Slot releases exactly that acquisition's slots. See
// docs/exact-limits.md.
//
// A Store is safe for concurrent use. Most callers want Take; TakeAt and its
// twins take an explicit time for deterministic tests.
type Store struct {
	engine *memstore.Store
	clock  stores.Clock
}

var _ stores.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*config)

type config struct {
	engine memstore.Config
	clock  stores.Clock
}

// WithMaxKeys bounds the number of keys kept per table. The default is
// 1,048,576: about 24 MiB of GCRA state at its fullest, and 33 MiB of
// window state if fixed or sliding windows fill their table too. The bound is
// exact: no table ever holds more than n keys, however many new keys arrive.
// It applies per shard (n/shards each, rounded down, with shards of at least
// 1,024 keys; sliding logs, by weight, in shards of at least 2,564), and
// keys spread over shards by hash, so a shard may start evicting a few
// percent before the store as a whole holds n keys.
func WithMaxKeys(n int) Option {
	if n <= 0 {
		panic("memory: WithMaxKeys needs a positive bound")
	}
	return func(c *config) { c.engine.MaxKeys = n }
}

// WithShards sets the number of lock shards, rounded to a power of two and
// at most MaxKeys/1024. The default, 16 per CPU and at least 64, suits most
// servers.
func WithShards(n int) Option {
	if n <= 0 {
		panic("memory: WithShards needs a positive count")
	}
	return func(c *config) { c.engine.Shards = n }
}

// WithClock sets the clock Take, TakeAll and Return read; the default is
// stores.SystemClock(). Tests pass a ratelimittest.Clock.
func WithClock(clock stores.Clock) Option {
	if clock == nil {
		panic("memory: WithClock needs a clock")
	}
	return func(c *config) { c.clock = clock }
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	c := config{clock: stores.SystemClock()}
	for _, o := range opts {
		o(&c)
	}
	return &Store{engine: memstore.New(c.engine), clock: c.clock}
}

// Take checks req at the store clock's current time and, if it is allowed,
// consumes its cost. The error is non-nil only for an invalid request.
func (s *Store) Take(_ context.Context, req stores.Request) (stores.Result, error) {
	return s.TakeAt(s.clock.Now(), req)
}

// TakeAt is Take at an explicit time.
func (s *Store) TakeAt(now time.Time, req stores.Request) (stores.Result, error) {
	m, err := memstore.Convert(&req)
	if err != nil {
		return stores.Result{}, err
	}
	return memstore.Back(&req, s.engine.Take(&m, now.UnixNano())), nil
}

// TakeAll checks all requests and consumes them only if every one is
// allowed. It accepts at most 64 requests.
func (s *Store) TakeAll(_ context.Context, reqs []stores.Request, results []stores.Result) error {
	return s.TakeAllAt(s.clock.Now(), reqs, results)
}

// TakeAllAt is TakeAll at an explicit time.
func (s *Store) TakeAllAt(now time.Time, reqs []stores.Request, results []stores.Result) error {
	return memstore.TakeBatch(s.engine, now.UnixNano(), reqs, results, stores.ErrInvalidRequest, memstore.Convert, memstore.Back)
}

// Return gives back req.Cost units of req.Key.
func (s *Store) Return(_ context.Context, req stores.Request) error {
	return s.ReturnAt(s.clock.Now(), req)
}

// ReturnAt is Return at an explicit time.
func (s *Store) ReturnAt(now time.Time, req stores.Request) error {
	m, err := memstore.Convert(&req)
	if err == nil {
		s.engine.Return(&m, now.UnixNano())
	}
	return err
}

// Len returns the number of keys tracked, including expired keys not yet swept.
func (s *Store) Len() int { return s.engine.Len() }

// Local reports that the store answers from process memory, so a Limiter
// checks its rules before those on networked stores.
func (s *Store) Local() bool { return true }

var _ stores.LocalStore = (*Store)(nil)
