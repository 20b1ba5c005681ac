package memstore

import (
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync"
)

// Request is one check, already validated by the caller.
type Request struct {
	Rule, Key string
	Alg       Alg
	tag       uint8 // GCRA: the tag of Limit's interval, 0 until looked up
	Limit     Limit
	Cost      int64
	// WinStart and WinEnd are explicit FixedWindow bounds; zero means
	// epoch-aligned windows of Limit.Period. WinNext, if set, is the end of
	// the window after [WinStart, WinEnd).
	WinStart, WinEnd, WinNext int64
	// Slot names the Concurrency slots a Return releases (see
	// slots.release), or the end of the window a Return or a forced take
	// applies to; zero for the current one.
	Slot uint64
	// MaxDelay, for GCRA, is how far in the future a reservation may act;
	// see gcraDecide.
	MaxDelay int64
	// Force consumes the cost whether or not it fits (a settlement).
	Force bool
}

// Store is a sharded table from a 64-bit hash of (rule, key, algorithm) to the
// key's state. GCRA keys keep one int64 each, the theoretical arrival time,
// which is also when the key's bucket is full again and its state can be
// dropped, and which a check updates without a lock (see gshard); fixed and
// sliding windows keep a 16-byte window, a hot key's count updated without
// a lock too (see wshard); Concurrency keys keep a queue of slot deadlines;
// sliding logs keep a ring of event times (slidinglog.go). Each shard is
// bounded; see Config.MaxKeys.
//
// A Store is safe for concurrent use. Its zero value is not usable; call New.
type Store struct {
	seed    maphash.Seed
	shift   uint // 64 - log2(number of shards)
	perCap  int  // keys per shard per table
	gcra    []gshard
	windows []wshard
	conc    []cshard   // Concurrency keys: see hotslots.go
	logs    []logShard // SlidingLog keys: see slidinglog.go
	tags    *tags      // the GCRA intervals' tags: see gcratags.go
}

type state interface {
	window | *slots
	expiry() int64
}

// shard is one lock and table. The padding keeps neighbouring shards' locks
// on different cache lines.
type shard[V state] struct {
	mu sync.Mutex
	// seq numbers Concurrency slots: tokens are never reused in a shard.
	// It sits by the lock, which every acquisition writes too: on its
	// line, whatever the shard's offset in its array.
	seq uint64
	t   table[V]
	// floor is at most the expiry of every entry: while now < floor the
	// shard holds no expired entry and a full scan would find nothing.
	floor int64
	// swept is the latest expiry of an entry dropped as expired: whoever
	// dropped it had reached that time, so a key found absent is never
	// counted before it (its dropped window might be the one a request
	// stamped earlier would reopen).
	swept int64
	_     [8]byte
}

// Config sizes a Store.
type Config struct {
	// MaxKeys bounds the keys kept per table (GCRA, and the counting
	// algorithms together). Zero means DefaultMaxKeys.
	MaxKeys int
	// Shards is rounded to a power of two, at most MaxKeys/1024. Zero means
	// 16 per CPU, at least 64. The sliding logs take fewer when a shard's
	// share of MaxKeys would not hold the heaviest log (see logShardsFor).
	Shards int
}

// DefaultMaxKeys is the default bound on tracked keys per table.
const DefaultMaxKeys = 1 << 20

// minShardKeys is the fewest keys a shard is sized for.
const minShardKeys = 1024

// New returns an empty Store.
func New(cfg Config) *Store {
	if cfg.MaxKeys <= 0 {
		cfg.MaxKeys = DefaultMaxKeys
	}
	n := cfg.Shards
	if n <= 0 {
		n = max(64, 16*runtime.GOMAXPROCS(0))
	}
	// Each shard is bounded on its own, and keys spread over shards by
	// hash, unevenly: a shard that fills first evicts while others have
	// room. Shards of at least minShardKeys keys keep that unevenness to a
	// few percent of MaxKeys. Each holds MaxKeys/n keys, rounded down, so
	// that a table never holds more than MaxKeys (and at most n-1 fewer,
	// under 0.1% of it, when n does not divide MaxKeys).
	n = min(n, max(1, cfg.MaxKeys/minShardKeys))
	bitsN := bits.Len(uint(n - 1))
	n = 1 << bitsN
	if n > max(1, cfg.MaxKeys/minShardKeys) && bitsN > 0 { // rounded up past the cap
		bitsN--
		n >>= 1
	}
	nl := logShardsFor(n, cfg.MaxKeys)
	s := &Store{
		seed:    maphash.MakeSeed(),
		shift:   uint(64 - bitsN),
		perCap:  cfg.MaxKeys / n, // rounded down: the shards together never exceed MaxKeys
		gcra:    make([]gshard, n),
		windows: make([]wshard, n),
		conc:    make([]cshard, n),
		logs:    make([]logShard, nl),
		tags:    new(tags),
	}
	for i := range s.gcra {
		s.gcra[i].floor = math.MaxInt64
		s.windows[i].t = newTable[window](s.perCap)
		s.windows[i].floor = math.MaxInt64
		s.conc[i].t = newTable[*slots](s.perCap)
		s.conc[i].floor = math.MaxInt64
	}
	for i := range s.logs {
		s.logs[i].capacity = cfg.MaxKeys / nl // rounded down, as perCap
		s.logs[i].t = newTable[*eventLog](s.logs[i].capacity)
		s.logs[i].swept = math.MinInt64
	}
	if bitsN == 0 {
		s.shift = 63 // one shard: every hash maps to index 0
	}
	return s
}

// Len returns the number of keys currently tracked, expired or not.
func (s *Store) Len() int {
	n := 0
	for i := range s.gcra {
		n += s.gcra[i].len()
		n += lockedLen(&s.windows[i].shard)
		n += lockedLen(&s.conc[i].shard)
	}
	for i := range s.logs {
		n += s.logs[i].len()
	}
	return n
}

func lockedLen[V state](sh *shard[V]) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.t.len()
}

// hash identifies (rule, key, alg). Sliding and fixed windows share a table,
// so the algorithm is part of the hash.
func (s *Store) hash(r *Request) uint64 {
	h := maphash.String(s.seed, r.Key)
	if r.Rule != "" {
		h ^= bits.RotateLeft64(maphash.String(s.seed, r.Rule)*0x9e3779b97f4a7c15, 31)
	}
	h ^= uint64(r.Alg) * 0xff51afd7ed558ccd
	if h == 0 { // 0 marks an empty table slot
		h = 1
	}
	return h
}

// keyHash is hash of a request for key whose rule and algorithm hash to
// mix (see Store.mix): a Prepared check's hash, inlined into it.
func (s *Store) keyHash(key string, mix uint64) uint64 {
	h := maphash.String(s.seed, key) ^ mix
	if h == 0 {
		h = 1
	}
	return h
}

// gcraKey is r's GCRA table key for hash h: h tagged with r's interval.
func (s *Store) gcraKey(r *Request, h uint64) uint64 {
	tag := uint64(r.tag)
	if tag == 0 {
		tag = s.tags.of(r.Limit.interval())
	}
	return tagged(h, tag)
}

func (s *Store) index(h uint64) int {
	if s.shift == 63 {
		return 0
	}
	return int(h >> s.shift)
}

// logIndex is the index of the log shard of hash h: the low bits of its
// shard index, as many as the log shards (as many or fewer) need.
func (s *Store) logIndex(h uint64) int { return int(h>>s.shift) & (len(s.logs) - 1) }

// Take checks r at now (Unix nanoseconds) and consumes its cost if allowed.
func (s *Store) Take(r *Request, now int64) Result {
	return s.takeHashed(r, s.hash(r), now)
}

// takeHashed is Take for a request whose hash h is already known.
func (s *Store) takeHashed(r *Request, h uint64, now int64) Result {
	i := s.index(h)
	if r.Alg == GCRA {
		k := s.gcraKey(r, h)
		if r.Force {
			return s.gcra[i].force(s.perCap, k, r, s.tags, now)
		}
		d := s.gcra[i].take(s.perCap, k, r, s.tags, now)
		res := d.result(now, r)
		return res
	}
	if r.Alg == Concurrency {
		return s.conc[i].take(s.perCap, h, r, now)
	}
	if r.Alg == SlidingLog {
		var res Result
		s.takeLog(h, r, now, &res)
		return res
	}
	return s.windows[i].take(s.perCap, h, r, now)
}

// applySlots acquires Concurrency slots; the caller holds the shard's
// lock. The key's queue is created only when an acquisition is allowed.
func applySlots(sh *cshard, capacity int, h uint64, r *Request, now int64) Result {
	q, ok := sh.t.get(h)
	if !ok {
		if r.Cost == 0 || r.Cost > r.Limit.Rate { // nothing to keep
			var empty slots
			return empty.take(now, r.Limit, r.Cost, &sh.seq)
		}
		q = new(slots)
	} else if sh.hot.Load() == q {
		return sh.takeHot(q, r, now)
	}
	res := q.take(now, r.Limit, r.Cost, &sh.seq)
	if res.Allowed && r.Cost > 0 && !ok {
		// A key already held changed in place: its entry stays, and the
		// shard's floor stays below its expiry, which only grows.
		if sh.t.len() >= capacity {
			sh.demote() // the eviction may pick any key
		}
		put(&sh.shard, capacity, h, q, false, now)
	}
	return res
}

// applyWindow decides r for key h into *res, every field, and stores the
// key's new state when r is allowed; the caller holds the shard's lock.
// (res is written where the caller holds it: see Result.setWindow.)
func applyWindow(sh *shard[window], capacity int, h uint64, r *Request, now int64, res *Result) {
	slot, old := sh.t.lookup(h)
	start, end := r.WinStart, r.WinEnd
	if slot < 0 {
		now, start, end = afterSwept(sh.swept, now, r)
	}
	if r.Force {
		rs := *r
		rs.WinStart, rs.WinEnd = start, end
		next, settled := settleWindow(old, now, &rs, r.Cost)
		if next != old {
			store(sh, capacity, h, slot, next, now)
		}
		*res = settled
		return
	}
	// slidingWindow and fixedWindow, written out to build the Result once
	// (see windowResult)
	p, cost := r.Limit.Period, r.Cost
	var next window
	var ok bool
	var remaining, retryAfter, resetAfter, nextAfter int64
	var taken uint64
	if r.Alg == SlidingWindow {
		now := slidingNow(old, now, p)
		start := now - mod(now, p)
		cur, prev := slidingCounts(old, start, p)
		weighted := slidingWeighted(prev, now-start, p)
		ok, remaining, retryAfter, resetAfter, nextAfter, taken =
			slidingDecide(cur, prev, weighted, start, now, r.Limit, cost, uint64(start+p))
		next = window{Expires: start + 2*p, A: uint32(cur + cost), B: uint32(prev)}
	} else {
		var count int64
		end, count = fixedCount(old, now, p, end)
		ok, remaining, retryAfter, resetAfter, nextAfter, taken =
			fixedDecide(count, max(0, end-now), r.Limit, cost, uint64(end))
		next = window{Expires: end, A: uint32(count + cost)}
	}
	if ok && cost > 0 {
		store(sh, capacity, h, slot, next, now)
	}
	res.setWindow(ok, remaining, retryAfter, resetAfter, nextAfter, taken)
}

// afterSwept moves a request for an absent key to the shard's swept time
// when it is stamped before it: the key may have been dropped there with a
// count in a window the request would otherwise reopen. An explicit window
// that ended by then gives way to the next one when the caller named it.
func afterSwept(swept, now int64, r *Request) (int64, int64, int64) {
	start, end := r.WinStart, r.WinEnd
	if now >= swept {
		return now, start, end
	}
	if end != 0 && end <= swept && r.WinNext > end {
		start, end = end, r.WinNext
	}
	return swept, start, end
}

// Return gives back r.Cost units of r's key.
func (s *Store) Return(r *Request, now int64) {
	s.returnHashed(r, s.hash(r), now)
}

// returnHashed is Return for a request whose hash h is already known.
func (s *Store) returnHashed(r *Request, h uint64, now int64) {
	i := s.index(h)
	if r.Alg == GCRA {
		sh := &s.gcra[i]
		sh.mu.Lock()
		sh.refund(s.perCap, s.gcraKey(r, h), r, s.tags, now)
		sh.mu.Unlock()
		return
	}
	if r.Alg == Concurrency {
		s.conc[i].release(h, r.Slot, r.Cost, now)
		return
	}
	if r.Alg == SlidingLog {
		s.returnLog(h, r)
		return
	}
	sh := &s.windows[i]
	sh.lockFor(h)
	if old, ok := sh.t.get(h); ok {
		next, _ := settleWindow(old, now, r, -r.Cost)
		set(&sh.shard, h, next)
	}
	sh.mu.Unlock()
}
