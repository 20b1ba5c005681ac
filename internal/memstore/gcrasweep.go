package memstore

import "math"

// makeRoom prepares the shard for a new key h, as makeRoom does for the
// other tables (see there): nothing while the shard is less than half full;
// then the expired entries of a small sample go; a full shard scans itself
// once its floor says an entry may have expired; and only a shard full of
// live entries evicts the soonest-expiring entry of a sample. Entries are
// read without stopping lock-free checks, so an expired entry is dropped
// only if it is still expired when it is taken out (see dropExpired).
func (sh *gshard) makeRoom(capacity int, h uint64, now int64) {
	if sh.live < capacity/2 {
		return
	}
	sl := sh.slab.Load()
	if sh.live < capacity {
		sh.sample(sl, h, sweepSample, func(i int, v int64) {
			if v <= now {
				sh.dropExpired(sl, i, now)
			}
		})
		return
	}
	if now >= sh.floor && sh.scan(sl, now) {
		return
	}
	victim, soonest := -1, int64(math.MaxInt64)
	sh.sample(sl, h, 2*sweepSample, func(i int, v int64) {
		if v < soonest {
			victim, soonest = i, v
		}
	})
	if victim >= 0 {
		sh.dropAt(sl, victim)
	}
}

// sample calls f on up to n live entries found from a pseudo-random slot
// picked by seed, looking at most 8n slots, or on to the first live entry
// if those held none: dead slots do not shift back like removed entries of
// the other tables, so long runs without a live entry form.
func (sh *gshard) sample(sl *slab, seed uint64, n int, f func(i int, v int64)) {
	if sh.live == 0 {
		return
	}
	i := sl.home(seed*0x9e3779b97f4a7c15 | 1)
	found := 0
	for look := 0; n > found && (look < 8*n || found == 0) && look < len(sl.keys); look++ {
		if sl.keys[i].Load() != 0 {
			if v := sl.tats[i].Load(); v != dead {
				found++
				f(i, v)
			}
		}
		if i++; i == len(sl.keys) {
			i = 0
		}
	}
}

// scan drops every expired entry of the shard, recomputes its floor, and
// reports whether it freed any room.
func (sh *gshard) scan(sl *slab, now int64) bool {
	before := sh.live
	floor := int64(math.MaxInt64)
	for i := range sl.tats {
		v := sl.tats[i].Load()
		if v == dead || sl.keys[i].Load() == 0 {
			continue
		}
		if v > now || !sh.dropExpired(sl, i, now) {
			floor = min(floor, sl.tats[i].Load())
		}
	}
	sh.floor = floor
	return sh.live < before
}
