package memstore

// A GCRA key's state is one time, the moment its bucket is full again, and
// a reservation (a take with MaxDelay) moves it later: every reservation
// after it is promised the turn that follows. Giving the last reservation
// back moves the time back exactly. Giving back one that others follow
// cannot: the time is shared, and moving it back would hand the freed turn
// to a newcomer while a later reservation still holds the turn it was
// promised, two requests on one turn. Such a reservation's turn is kept as
// a hole instead, and when the reservations after it are given back, the
// time moves back through the hole too. A key whose later reservations are
// served keeps its holes as lost turns, until they pass.

// holes are a key's reservations given back while later ones waited: by
// end (the key's time just after the take, its Result.Slot), their cost in
// nanoseconds of the key's time; owed is the sum. Once nobody waits (the
// key's time is within now + tau: the latest reservation's turn has come),
// no turn is promised and everything owed is given back at once.
type holes struct {
	ends map[int64]int64
	owed int64
}

// maxHoles bounds the holes of a shard: beyond it a refund is lost, which
// only ever denies more. A key's holes are at most its reservations of
// the last MaxDelay, which waiting bounds keep in the thousands; the holes
// of keys whose turns have all passed are dropped as they grow.
const maxHoles = 1 << 16

// refund gives r.Cost units back to key h at now; the caller holds the
// lock. r.Slot is the key's time after the take being given back (zero
// when unknown: the units then come off the latest reservation). While
// later reservations wait (the time is beyond now + tau), a refund that
// is not the latest becomes a hole.
func (sh *gshard) refund(h uint64, r *Request, now int64) {
	sl := sh.slab.Load()
	i := sl.find(h)
	if i < 0 {
		return
	}
	t := r.Limit.interval()
	tau, units := t*r.Limit.Capacity, mulSat(r.Cost, t)
	kh := sh.holes[h]
	p := &sl.tats[i]
	for {
		old := p.Load()
		if old == dead {
			return
		}
		if r.Slot != 0 && uint64(old) != r.Slot && old > now+tau {
			sh.addHole(h, kh, int64(r.Slot), units, now)
			return
		}
		next, through, owed := kh.collapse(max(now, old-units), now)
		settled := next <= now+tau // nobody waits: give back all that is owed
		if settled {
			next = max(now, next-owed)
		}
		if p.CompareAndSwap(old, live(next)) {
			sh.floor = min(sh.floor, next)
			sh.forget(h, kh, through, settled)
			return
		}
	}
}

// collapse moves tat back through the holes that end at it and returns the
// new time, the ends of the holes it went through, and what the others
// still owe.
func (kh *holes) collapse(tat, now int64) (int64, []int64, int64) {
	if kh == nil {
		return tat, nil, 0
	}
	var through []int64
	owed := kh.owed
	for tat > now {
		u, ok := kh.ends[tat]
		if !ok {
			break
		}
		through = append(through, tat)
		owed -= u
		tat = max(now, tat-u)
	}
	return tat, through, owed
}

// forget drops the holes of key h that a refund went through, or all of
// them when it settled what they owed.
func (sh *gshard) forget(h uint64, kh *holes, through []int64, all bool) {
	if kh == nil {
		return
	}
	if all {
		sh.nholes -= len(kh.ends)
		delete(sh.holes, h)
		return
	}
	for _, end := range through {
		kh.owed -= kh.ends[end]
		delete(kh.ends, end)
		sh.nholes--
	}
}

// addHole records the hole of key h (whose holes are kh, if any) ending at
// end, within the bound.
func (sh *gshard) addHole(h uint64, kh *holes, end, units, now int64) {
	if sh.nholes >= maxHoles {
		sh.pruneHoles(now)
		if sh.nholes >= maxHoles {
			return
		}
	}
	if kh == nil {
		kh = &holes{ends: map[int64]int64{}}
		if sh.holes == nil {
			sh.holes = map[uint64]*holes{}
		}
		sh.holes[h] = kh
	}
	if _, dup := kh.ends[end]; dup { // the same reservation given back twice
		return
	}
	kh.ends[end] = units
	kh.owed += units
	sh.nholes++
}

// pruneHoles drops the holes of keys whose holes have all passed: their
// turns are gone, and what they owe is lost.
func (sh *gshard) pruneHoles(now int64) {
	for h, kh := range sh.holes {
		latest := int64(0)
		for end := range kh.ends {
			latest = max(latest, end)
		}
		if latest <= now {
			sh.nholes -= len(kh.ends)
			delete(sh.holes, h)
		}
	}
}
