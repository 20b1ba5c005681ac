package memstore

import "math"

// put stores v under h. A new key first makes room; see makeRoom.
func put[V state](sh *shard[V], capacity int, h uint64, v V, exists bool, now int64) {
	if !exists {
		makeRoom(sh, capacity, h, now)
	}
	set(sh, h, v)
}

// store stores v under h, found at slot by lookup (-1 if absent) with the
// shard locked since: an existing key is updated in place, without a
// second probe.
func store[V state](sh *shard[V], capacity int, h uint64, slot int, v V, now int64) {
	if slot < 0 {
		put(sh, capacity, h, v, false, now)
		return
	}
	sh.t.vals[slot] = v
	lower(sh, v.expiry())
}

// set stores v and keeps the shard's expiry floor a lower bound.
func set[V state](sh *shard[V], h uint64, v V) {
	sh.t.set(h, v)
	lower(sh, v.expiry())
}

// lower lowers the shard's floor to e if it is above. A key's count
// changes within its window, whose expiry stays: the floor is then
// written only when it moves, and its cache line stays shared between
// the cores that read it.
func lower[V state](sh *shard[V], e int64) {
	if e < sh.floor {
		sh.floor = e
	}
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
//
// A shard less than half full does nothing: the room is there, and the
// sample's cost (a few probes and an expiry test each, per new key) would be
// paid on every insertion for no benefit until the shard fills.
func makeRoom[V state](sh *shard[V], capacity int, h uint64, now int64) {
	if n := sh.t.len(); n < capacity/2 {
		return
	} else if n < capacity {
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
	// Full of live entries: evict the soonest-expiring of a sample, which
	// always holds an entry, so the table never exceeds its bound. Ties (the
	// windows of one period all end together) go to the last entry seen:
	// the first one after a random slot is likely to follow an empty run,
	// and evicting it would lengthen the run.
	var victim uint64
	soonest := int64(math.MaxInt64)
	sh.t.sample(h, 2*sweepSample, func(k uint64, v V) bool {
		if e := v.expiry(); e <= soonest {
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
