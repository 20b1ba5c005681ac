package memstore

import (
	"hash/maphash"
	"math/bits"
)

// Prepared is a check whose rule, algorithm, limit and cost are fixed, so
// that everything but the key is settled once: the rule's part of the hash,
// the refill interval, the validation. Take then hashes the key alone.
//
// A Prepared is immutable and safe for concurrent use. Build one with
// Store.Prepare.
type Prepared struct {
	s   *Store
	mix uint64 // the hash of (rule, alg) that hash folds into the key's
	req Request
	_   [48]byte // whole cache lines: see TestHotStateFillsWholeCacheLines
}

// Prepare returns the prepared form of r, whose Key is ignored. r must be
// valid (as for Take) and use GCRA, SlidingWindow, SlidingLog,
// epoch-aligned FixedWindow (no explicit window) or Concurrency; Prepare
// panics otherwise, since the caller decides this once, when it builds its
// rules.
func (s *Store) Prepare(r Request) *Prepared {
	if r.WinEnd != 0 || r.Limit.Rate <= 0 || r.Limit.Period <= 0 {
		panic("memstore: Prepare: only window-free checks of a valid limit")
	}
	r.Key = ""
	r.Limit.Interval = r.Limit.interval()
	if r.Alg == GCRA {
		r.tag = uint8(s.tags.of(r.Limit.Interval))
	}
	return &Prepared{s: s, mix: s.mix(&r), req: r}
}

// mix is the part of s.hash(r) that does not depend on r's key, which
// hash folds into the key's with XOR.
func (s *Store) mix(r *Request) uint64 {
	var mix uint64
	if r.Rule != "" {
		mix = bits.RotateLeft64(maphash.String(s.seed, r.Rule)*0x9e3779b97f4a7c15, 31)
	}
	return mix ^ uint64(r.Alg)*0xff51afd7ed558ccd
}

// Take checks key at now (Unix nanoseconds) under p and consumes p's cost
// if allowed: the same decision, on the same state, as Store.Take of p's
// request for key.
func (p *Prepared) Take(key string, now int64) Result {
	var res Result
	p.TakeInto(key, now, &res)
	return res
}

// TakeInto is Take that writes the Result into *res, every field: the
// middleware's direct path holds it on its stack. A Result (seven words)
// is too large for the compiler to keep in registers, so one returned by
// value is copied at each return by 16-byte moves that wait for the 8-byte
// stores that built it; written in place, it is not copied at all
// (BenchmarkPreparedTake's into and value cases).
func (p *Prepared) TakeInto(key string, now int64, res *Result) {
	s := p.s
	h := s.keyHash(key, p.mix)
	if a := p.req.Alg; a == FixedWindow || a == SlidingWindow {
		// wshard.take, written out for the same reason as GCRA's below
		sh := &s.windows[s.index(h)]
		if c := sh.hot.Load(); c != nil && c.h == h {
			if n, weighted, ok := c.take(&p.req, now); ok {
				res.setWindow(c.decided(n, weighted, &p.req, now))
				return
			}
		}
		if r, ok := sh.tryTake(h, &p.req, now); ok {
			*res = r
			return
		}
		sh.lockFor(h)
		applyWindow(&sh.shard, s.perCap, h, &p.req, now, res)
		sh.promote(h, &p.req)
		sh.mu.Unlock()
		return
	}
	if p.req.Alg != GCRA {
		if p.req.Alg == SlidingLog {
			s.takeLog(h, &p.req, now, res) // takeHashed's case, one call fewer
			return
		}
		*res = s.takeHashed(&p.req, h, now)
		return
	}
	// takeHashed's GCRA case, written out: a shared helper is too large to
	// inline, and calling it costs the direct path about 7% (measured).
	d := s.gcra[s.index(h)].take(s.perCap, tagged(h, uint64(p.req.tag)), &p.req, s.tags, now)
	d.write(now, &p.req, res)
}

// TakeDelayed is TakeInto with a reservation horizon of maxDelay
// nanoseconds (Request.MaxDelay) in place of p's own: a paced rule's
// horizon is cut to each request's deadline.
func (p *Prepared) TakeDelayed(key string, now, maxDelay int64, res *Result) {
	req := p.req
	req.MaxDelay = maxDelay
	s := p.s
	h := s.keyHash(key, p.mix)
	if req.Alg != GCRA {
		*res = s.takeHashed(&req, h, now)
		return
	}
	d := s.gcra[s.index(h)].take(s.perCap, tagged(h, uint64(req.tag)), &req, s.tags, now)
	d.write(now, &req, res)
}

// Release gives back the Concurrency slot that Take's result named slot
// took for key: Return of p's request with that Slot. It does nothing for
// a check of another algorithm.
func (p *Prepared) Release(key string, slot uint64, now int64) {
	if p.req.Alg != Concurrency {
		return
	}
	s := p.s
	h := s.keyHash(key, p.mix)
	s.conc[s.index(h)].release(h, slot, p.req.Cost, now)
}

// Held is what TakeHeld keeps of a Concurrency acquisition for its
// release by ReleaseHeld: the key's hash and shard, so that the release
// hashes nothing, and the key's queue when the slots came from it as its
// shard's hot queue, so that the release leaves the token there without
// taking a lock. A Held is meant for the stack of the call that holds the
// slots; it is used once, by one ReleaseHeld.
type Held struct {
	sh *cshard
	q  *slots
	h  uint64
}

// TakeHeld is Take, for a Concurrency check, that fills hd for the
// release of what it takes. For another algorithm it is Take, hd zeroed.
func (p *Prepared) TakeHeld(key string, now int64, hd *Held) Result {
	if p.req.Alg != Concurrency {
		*hd = Held{}
		return p.Take(key, now)
	}
	s := p.s
	h := s.keyHash(key, p.mix)
	sh := &s.conc[s.index(h)]
	res, q := sh.takeHeld(s.perCap, h, &p.req, now)
	hd.sh, hd.q, hd.h = sh, q, h
	return res
}

// ReleaseHeld is Release of the slot that TakeHeld's result named slot
// took, hd being what TakeHeld filled. A zero hd releases nothing.
func (p *Prepared) ReleaseHeld(hd *Held, slot uint64, now int64) {
	if hd.sh == nil {
		return
	}
	hd.sh.releaseHeld(hd, slot, p.req.Cost, now)
}
