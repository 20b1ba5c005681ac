package memstore

// A GCRA key's state is one time, the moment its bucket is full again, and
// a reservation (a take with MaxDelay) moves it later: every reservation
// after it is promised the turn that follows. Giving the last reservation
// back moves the time back exactly. Giving back one that others follow
// cannot: the time is shared, and moving it back would hand the freed turn
// to a newcomer while a later reservation still holds the turn it was
// promised, two requests on one turn. Such a reservation's turn is kept as
// a hole instead, and when the reservations after it are given back, the
// time moves back through the hole too: the units of a hole come back only
// when every later reservation has been given back. Once a later one has
// been served, the hole is a lost turn: giving it back then would let the
// next requests come closer than the rate to the one served. It lapses
// when its end passes.
//
// While a key has no hole and nobody waits (its time is within now + tau,
// so every reservation's turn has come), a refund comes off the key's time
// whatever its token, as GCRA refunds always have.

// holes are a key's reservations given back while later ones waited: by
// end (the key's time just after the take, its Result.Slot), their cost in
// nanoseconds of the key's time.
type holes map[int64]int64

// maxHoles bounds the holes of a shard: beyond it a refund is lost, which
// only ever denies more. A key's holes are at most its reservations of
// the last MaxDelay, which waiting bounds keep in the thousands; holes
// that have passed are dropped.
const maxHoles = 1 << 16

// refund gives r.Cost units back to key h at now; the caller holds the
// lock. r.Slot is the key's time after the take being given back (zero
// when unknown: the units then come off the latest take). While later
// reservations wait, or the key has holes, a refund that is not the
// latest becomes a hole. A key whose state is under another interval's
// tag first moves to r's (see gcratags.go).
func (sh *gshard) refund(capacity int, h uint64, r *Request, tg *tags, now int64) {
	t := r.Limit.interval()
	sl, i := sh.resolve(capacity, h, t, tg, now)
	if i < 0 {
		return
	}
	h = sl.keys[i].Load() // the holes are the state's, under its tag
	tau, units := t*r.Limit.Capacity, mulSat(r.Cost, t)
	kh := sh.lapse(h, now)
	p := &sl.tats[i]
	for {
		old := p.Load()
		if old == dead {
			return
		}
		if r.Slot != 0 && uint64(old) != r.Slot && (old > now+tau || kh != nil) {
			sh.addHole(h, kh, int64(r.Slot), units, now)
			return
		}
		next, through := kh.collapse(max(now, old-units), now)
		if p.CompareAndSwap(old, live(next)) {
			sh.floor = min(sh.floor, next)
			sh.forget(h, kh, through)
			return
		}
	}
}

// lapse drops the holes of h that have passed and returns those left (nil
// for none).
func (sh *gshard) lapse(h uint64, now int64) holes {
	kh := sh.holes[h]
	for end := range kh {
		if end <= now {
			delete(kh, end)
			sh.nholes--
		}
	}
	if kh != nil && len(kh) == 0 {
		delete(sh.holes, h)
		return nil
	}
	return kh
}

// collapse moves tat back through the holes that end at it and returns the
// new time and the ends of the holes it went through.
func (kh holes) collapse(tat, now int64) (int64, []int64) {
	var through []int64
	for tat > now {
		u, ok := kh[tat]
		if !ok {
			break
		}
		through = append(through, tat)
		tat = max(now, tat-u)
	}
	return tat, through
}

// forget drops the holes of key h that a refund went through.
func (sh *gshard) forget(h uint64, kh holes, through []int64) {
	for _, end := range through {
		delete(kh, end)
		sh.nholes--
	}
	if kh != nil && len(kh) == 0 {
		delete(sh.holes, h)
	}
}

// addHole records the hole of key h (whose holes are kh, if any) ending at
// end, within the bound.
func (sh *gshard) addHole(h uint64, kh holes, end, units, now int64) {
	if end <= now {
		return // its turn has passed: nothing will move back through it
	}
	if sh.nholes >= maxHoles {
		sh.pruneHoles(now)
		if sh.nholes >= maxHoles {
			return
		}
	}
	if kh == nil {
		kh = holes{}
		if sh.holes == nil {
			sh.holes = map[uint64]holes{}
		}
		sh.holes[h] = kh
	}
	if _, dup := kh[end]; dup { // the same reservation given back twice
		return
	}
	kh[end] = units
	sh.nholes++
}

// dropHoles drops the holes of key k (tagged), whose state is dropped: a
// key named again starts afresh, and the holes of keys gone would
// otherwise stay until the shard has maxHoles. The caller holds the lock.
func (sh *gshard) dropHoles(k uint64) {
	if sh.nholes == 0 {
		return
	}
	if kh, ok := sh.holes[k]; ok {
		sh.nholes -= len(kh)
		delete(sh.holes, k)
	}
}

// pruneHoles drops the holes that have passed, of every key.
func (sh *gshard) pruneHoles(now int64) {
	for h := range sh.holes {
		sh.lapse(h, now)
	}
}
