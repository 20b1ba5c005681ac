package memstore

import "hash/maphash"

// MaxPrepared is the most requests a PreparedBatch holds.
const MaxPrepared = 4

// PreparedBatch is a TakeAll whose requests are fixed but for their keys,
// as Prepared is a Take: the rules' parts of the hashes, the GCRA tags and
// the validation settled once, and the working memory sized for a few
// requests rather than MaxBatch. A key given to several requests in a row
// is hashed once.
//
// A PreparedBatch is immutable and safe for concurrent use. Build one with
// Store.PrepareBatch.
type PreparedBatch struct {
	s    *Store
	n    int
	mix  [MaxPrepared]uint64
	reqs [MaxPrepared]Request
}

// PrepareBatch returns the prepared form of reqs, whose Keys are ignored:
// 1 to MaxPrepared valid requests (as for TakeAll), none of them
// Concurrency. Explicit windows are allowed. It panics otherwise, since the
// caller decides this when it builds its rules.
func (s *Store) PrepareBatch(reqs []Request) *PreparedBatch {
	if len(reqs) == 0 || len(reqs) > MaxPrepared {
		panic("memstore: PrepareBatch: 1 to MaxPrepared requests")
	}
	b := &PreparedBatch{s: s, n: len(reqs)}
	for i, r := range reqs {
		if r.Alg == Concurrency || r.Limit.Rate <= 0 || r.Limit.Period <= 0 {
			panic("memstore: PrepareBatch: only GCRA and counting checks of a valid limit")
		}
		r.Key = ""
		r.Limit.Interval = r.Limit.interval()
		if r.Alg == GCRA {
			r.tag = uint8(s.tags.of(r.Limit.Interval))
		}
		b.mix[i] = s.mix(&r)
		b.reqs[i] = r
	}
	return b
}

// Len is the number of requests of b.
func (b *PreparedBatch) Len() int { return b.n }

// Request returns b's request i, without its key.
func (b *PreparedBatch) Request(i int) *Request { return &b.reqs[i] }

// Take is TakeAll of b's requests with keys[i] the key of request i, at
// now: every request allowed and consumed, or none consumed. keys and
// results hold at least b.Len() elements.
func (b *PreparedBatch) Take(keys []string, results []Result, now int64) {
	s := b.s
	var hashes [MaxPrepared]uint64
	var kh uint64
	for i := range b.n {
		if i == 0 || keys[i] != keys[i-1] {
			kh = maphash.String(s.seed, keys[i])
		}
		h := kh ^ b.mix[i]
		if h == 0 {
			h = 1
		}
		if b.reqs[i].Alg == GCRA {
			h = tagged(h, uint64(b.reqs[i].tag))
		}
		hashes[i] = h
	}
	var locks [MaxPrepared]int
	var hs [MaxPrepared]held
	var which [MaxPrepared]uint8
	var log [MaxPrepared]undo
	s.takeAll(b.reqs[:b.n], hashes[:b.n], results[:b.n], now, batchScratch{locks[:], hs[:], which[:], log[:]})
}
