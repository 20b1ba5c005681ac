package memstore

import (
	"errors"
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
	Limit     Limit
	Cost      int64
	// WinStart and WinEnd are explicit FixedWindow bounds; zero means
	// epoch-aligned windows of Limit.Period. WinNext, if set, is the end of
	// the window after [WinStart, WinEnd).
	WinStart, WinEnd, WinNext int64
	// Slot names the Concurrency slots a Return releases; see slots.release.
	Slot uint64
}

// Store is a sharded map from a 64-bit hash of (rule, key, algorithm) to the
// key's state. GCRA keys keep one int64 each; fixed and sliding windows keep
// a 16-byte window; Concurrency keys keep a queue of slot deadlines. Each
// shard is bounded; see Config.MaxKeys.
//
// A Store is safe for concurrent use. Its zero value is not usable; call New.
type Store struct {
	seed    maphash.Seed
	shift   uint // 64 - log2(number of shards)
	perCap  int  // keys per shard per table
	gcra    []shard[tat]
	windows []shard[window]
	conc    []shard[*slots]
}

// tat is the GCRA state: the theoretical arrival time, which is also when
// the key's bucket is full again and its state can be dropped.
type tat int64

func (t tat) expiry() int64 { return int64(t) }

type state interface {
	tat | window | *slots
	expiry() int64
}

// shard is one lock and map. The padding keeps neighbouring shards' locks
// on different cache lines.
type shard[V state] struct {
	mu sync.Mutex
	t  table[V]
	// floor is at most the expiry of every entry: while now < floor the
	// shard holds no expired entry and a full scan would find nothing.
	floor int64
	// swept is the latest expiry of an entry dropped as expired: whoever
	// dropped it had reached that time, so a key found absent is never
	// counted before it (its dropped window might be the one a request
	// stamped earlier would reopen).
	swept int64
	// seq numbers Concurrency slots: tokens are never reused in a shard.
	seq uint64
	_   [16]byte
}

// Config sizes a Store.
type Config struct {
	// MaxKeys bounds the keys kept per table (GCRA, and the counting
	// algorithms together). Zero means DefaultMaxKeys.
	MaxKeys int
	// Shards is rounded to a power of two, at most MaxKeys/1024. Zero means
	// 16 per CPU, at least 64.
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
	// few percent of MaxKeys.
	n = min(n, max(1, cfg.MaxKeys/minShardKeys))
	bitsN := bits.Len(uint(n - 1))
	n = 1 << bitsN
	if n > max(1, cfg.MaxKeys/minShardKeys) && bitsN > 0 { // rounded up past the cap
		bitsN--
		n >>= 1
	}
	s := &Store{
		seed:    maphash.MakeSeed(),
		shift:   uint(64 - bitsN),
		perCap:  max(1, (cfg.MaxKeys+n-1)/n),
		gcra:    make([]shard[tat], n),
		windows: make([]shard[window], n),
		conc:    make([]shard[*slots], n),
	}
	for i := range s.gcra {
		s.gcra[i].t = newTable[tat](s.perCap)
		s.gcra[i].floor = math.MaxInt64
		s.windows[i].t = newTable[window](s.perCap)
		s.windows[i].floor = math.MaxInt64
		s.conc[i].t = newTable[*slots](s.perCap)
		s.conc[i].floor = math.MaxInt64
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
		n += lockedLen(&s.gcra[i])
		n += lockedLen(&s.windows[i])
		n += lockedLen(&s.conc[i])
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

func (s *Store) index(h uint64) int {
	if s.shift == 63 {
		return 0
	}
	return int(h >> s.shift)
}

// Take checks r at now (Unix nanoseconds) and consumes its cost if allowed.
func (s *Store) Take(r *Request, now int64) Result {
	h := s.hash(r)
	i := s.index(h)
	if r.Alg == GCRA {
		sh := &s.gcra[i]
		sh.mu.Lock()
		d := decideGCRA(sh, s.perCap, h, r, now)
		sh.mu.Unlock()
		return d.result(now, r.Limit)
	}
	if r.Alg == Concurrency {
		sh := &s.conc[i]
		sh.mu.Lock()
		res := applySlots(sh, s.perCap, h, r, now)
		sh.mu.Unlock()
		return res
	}
	sh := &s.windows[i]
	sh.mu.Lock()
	res := applyWindow(sh, s.perCap, h, r, now)
	sh.mu.Unlock()
	return res
}

// applySlots acquires Concurrency slots. The key's queue is created only
// when an acquisition is allowed.
func applySlots(sh *shard[*slots], capacity int, h uint64, r *Request, now int64) Result {
	q, ok := sh.t.get(h)
	if !ok {
		if r.Cost == 0 || r.Cost > r.Limit.Rate { // nothing to keep
			var empty slots
			return empty.take(now, r.Limit, r.Cost, &sh.seq)
		}
		q = new(slots)
	}
	res := q.take(now, r.Limit, r.Cost, &sh.seq)
	if res.Allowed && r.Cost > 0 {
		put(sh, capacity, h, q, ok, now)
	}
	return res
}

func applyGCRA(sh *shard[tat], capacity int, h uint64, r *Request, now int64) Result {
	return decideGCRA(sh, capacity, h, r, now).result(now, r.Limit)
}

// decideGCRA is the part of a GCRA check that needs the shard lock.
func decideGCRA(sh *shard[tat], capacity int, h uint64, r *Request, now int64) gcraDecision {
	old, ok := sh.t.get(h)
	next, d := gcraDecide(int64(old), now, r.Limit, r.Cost)
	if d.allowed && r.Cost > 0 {
		put(sh, capacity, h, tat(next), ok, now)
	}
	return d
}

func applyWindow(sh *shard[window], capacity int, h uint64, r *Request, now int64) Result {
	old, ok := sh.t.get(h)
	start, end := r.WinStart, r.WinEnd
	if !ok {
		now, start, end = afterSwept(sh.swept, now, r)
	}
	var next window
	var res Result
	if r.Alg == SlidingWindow {
		next, res = slidingWindow(old, now, r.Limit, r.Cost)
	} else {
		next, res = fixedWindow(old, now, r.Limit, r.Cost, start, end)
	}
	if res.Allowed && r.Cost > 0 {
		put(sh, capacity, h, next, ok, now)
	}
	return res
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

// put stores v under h. A new key first makes room; see makeRoom.
func put[V state](sh *shard[V], capacity int, h uint64, v V, exists bool, now int64) {
	if !exists {
		makeRoom(sh, capacity, h, now)
	}
	set(sh, h, v)
}

// set stores v and keeps the shard's expiry floor a lower bound.
func set[V state](sh *shard[V], h uint64, v V) {
	sh.t.set(h, v)
	sh.floor = min(sh.floor, v.expiry())
}

// sweepSample is how many entries an insertion examines, from a slot
// picked by the new key's hash: a random sample.
const sweepSample = 4

// makeRoom prepares the shard for a new key h. Expired entries are
// equivalent to absent ones, so they go first: each insertion drops the
// expired entries of a small random sample, which keeps the shard tidy
// without a sweep. When the shard is full and the sample freed nothing, but
// its floor says some entry may have expired, the shard scans itself once
// (one shard, never the whole store) and drops every expired entry. Only a
// shard full of live entries evicts one: the entry that would be full again
// soonest, whose state matters least. So no key that is still limited is
// ever reset while an expired entry could make room.
func makeRoom[V state](sh *shard[V], capacity int, h uint64, now int64) {
	if sh.t.len() < capacity {
		var expired [sweepSample]uint64
		n := 0
		sh.t.sample(h, sweepSample, func(k uint64, v V) bool {
			if e := v.expiry(); e <= now {
				expired[n] = k
				n++
				sh.swept = max(sh.swept, e)
			}
			return true
		})
		for _, k := range expired[:n] {
			sh.t.remove(k)
		}
		return
	}
	if now >= sh.floor && scan(sh, now) {
		return
	}
	// Full of live entries: evict the soonest-expiring of a sample.
	var victim uint64
	soonest := int64(math.MaxInt64)
	sh.t.sample(h, 2*sweepSample, func(k uint64, v V) bool {
		if e := v.expiry(); e < soonest {
			victim, soonest = k, e
		}
		return true
	})
	sh.t.remove(victim)
}

// scan drops every expired entry of the shard, recomputes its floor, and
// reports whether it freed any room.
func scan[V state](sh *shard[V], now int64) bool {
	t := &sh.t
	before := t.len()
	floor := int64(math.MaxInt64)
	// Removing shifts later entries back into the hole: look at slot i
	// again until it holds a live entry or none (see table.removeAt).
	for i := 0; i < len(t.keys); {
		if t.keys[i] == 0 {
			i++
			continue
		}
		if e := t.vals[i].expiry(); e <= now {
			t.removeAt(i)
			sh.swept = max(sh.swept, e)
			continue
		} else {
			floor = min(floor, e)
		}
		i++
	}
	sh.floor = floor
	return t.len() < before
}

// Return gives back r.Cost units of r's key.
func (s *Store) Return(r *Request, now int64) {
	h := s.hash(r)
	i := s.index(h)
	if r.Alg == GCRA {
		sh := &s.gcra[i]
		sh.mu.Lock()
		if old, ok := sh.t.get(h); ok {
			set(sh, h, tat(gcraReturn(int64(old), now, r.Limit, r.Cost)))
		}
		sh.mu.Unlock()
		return
	}
	if r.Alg == Concurrency {
		sh := &s.conc[i]
		sh.mu.Lock()
		if q, ok := sh.t.get(h); ok {
			q.release(now, r.Slot, r.Cost)
			set(sh, h, q)
		}
		sh.mu.Unlock()
		return
	}
	sh := &s.windows[i]
	sh.mu.Lock()
	if old, ok := sh.t.get(h); ok {
		if r.Alg == SlidingWindow {
			old = slidingReturn(old, now, r.Limit, r.Cost)
		} else {
			old = fixedReturn(old, now, r.Limit, r.Cost, r.WinEnd)
		}
		set(sh, h, old)
	}
	sh.mu.Unlock()
}

// ErrTooManyRequests is returned by TakeAll for more requests than it takes.
var ErrTooManyRequests = errors.New("too many requests in one call")

// MaxBatch is the most requests one TakeAll accepts.
const MaxBatch = 64

// undo remembers a key's state before TakeAll changed it.
type undo struct {
	h       uint64
	table   int
	existed bool
	tat     tat
	win     window
}

// The tables, numbered for TakeAll's lock order.
const (
	gcraTable = iota
	windowTable
	concTable
)

func tableOf(a Alg) int {
	switch a {
	case GCRA:
		return gcraTable
	case Concurrency:
		return concTable
	}
	return windowTable
}

// apply decides r in its table; the caller holds the shard's lock.
func (s *Store) apply(t int, h uint64, r *Request, now int64) Result {
	i := s.index(h)
	switch t {
	case gcraTable:
		return applyGCRA(&s.gcra[i], s.perCap, h, r, now)
	case concTable:
		return applySlots(&s.conc[i], s.perCap, h, r, now)
	}
	return applyWindow(&s.windows[i], s.perCap, h, r, now)
}

// TakeAll checks every request at now and consumes them only if all are
// allowed. It locks every shard involved, in index order so that concurrent
// calls cannot deadlock, applies the requests one by one (so a key named
// twice sees its own earlier update) and rolls back if any is denied.
func (s *Store) TakeAll(reqs []Request, results []Result, now int64) error {
	if len(reqs) > MaxBatch {
		return ErrTooManyRequests
	}
	var hashes [MaxBatch]uint64
	var locks [MaxBatch]int // shard index + table*len(shards)
	n := len(s.gcra)
	for i := range reqs {
		r := &reqs[i]
		hashes[i] = s.hash(r)
		locks[i] = s.index(hashes[i]) + tableOf(r.Alg)*n
	}
	order := sortUnique(locks[:len(reqs)])
	for _, l := range order {
		s.lockIndex(l, true)
	}
	defer func() {
		for _, l := range order {
			s.lockIndex(l, false)
		}
	}()

	var log [MaxBatch]undo
	denied := false
	for i := range reqs {
		r := &reqs[i]
		h := hashes[i]
		u := &log[i]
		u.h, u.table = h, tableOf(r.Alg)
		switch u.table {
		case gcraTable:
			u.tat, u.existed = s.gcra[s.index(h)].t.get(h)
		case windowTable:
			u.win, u.existed = s.windows[s.index(h)].t.get(h)
		default:
			_, u.existed = s.conc[s.index(h)].t.get(h)
		}
		results[i] = s.apply(u.table, h, r, now)
		denied = denied || !results[i].Allowed
	}
	if !denied {
		return nil
	}
	// Roll back in reverse so a key named twice ends at its first state,
	// then report every request as it stands with nothing consumed.
	for i := len(reqs) - 1; i >= 0; i-- {
		s.rollback(&log[i], &results[i])
	}
	for i := range reqs {
		if !results[i].Allowed {
			continue
		}
		peek := reqs[i]
		peek.Cost = 0
		results[i] = s.apply(log[i].table, hashes[i], &peek, now)
		results[i].Allowed = true
	}
	return nil
}

// rollback undoes one request of a denied TakeAll.
func (s *Store) rollback(u *undo, res *Result) {
	i := s.index(u.h)
	switch u.table {
	case gcraTable:
		restore(&s.gcra[i], u.h, u.tat, u.existed)
	case windowTable:
		restore(&s.windows[i], u.h, u.win, u.existed)
	default:
		sh := &s.conc[i]
		q, ok := sh.t.get(u.h)
		if !ok || res.Slot == 0 {
			return
		}
		q.undo(res.Slot)
		res.Slot = 0
		if !u.existed {
			sh.t.remove(u.h)
		}
	}
}

func restore[V state](sh *shard[V], h uint64, v V, existed bool) {
	if existed {
		set(sh, h, v)
	} else {
		sh.t.remove(h)
	}
}

func (s *Store) lockIndex(l int, lock bool) {
	var mu *sync.Mutex
	n := len(s.gcra)
	switch l / n {
	case gcraTable:
		mu = &s.gcra[l].mu
	case windowTable:
		mu = &s.windows[l-n].mu
	default:
		mu = &s.conc[l-2*n].mu
	}
	if lock {
		mu.Lock()
	} else {
		mu.Unlock()
	}
}

// sortUnique sorts a small slice in place (insertion sort: no allocation)
// and returns it without duplicates.
func sortUnique(a []int) []int {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
	out := a[:0]
	for _, v := range a {
		if len(out) == 0 || v != out[len(out)-1] {
			out = append(out, v)
		}
	}
	return out
}

// Wrap turns an engine and a ratelimit.Clock into the ratelimit.Store that
// package ratelimit implements over it. Package ratelimit sets it in init;
// stores/memory calls it. (The indirection breaks the import cycle between
// ratelimit, which needs a default memory store, and stores/memory, which
// implements ratelimit.Store.)
var Wrap func(e *Store, clock any) any
