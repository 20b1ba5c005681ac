package redisstore

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
)

// hotDetector finds a Store's hot keys: the checks of keys not yet hot go
// into a count-min sketch that is cleared at the end of every window; a key
// whose estimate reaches the threshold is promoted. A promoted key's checks
// are counted exactly in its entry, and a window in which they fall below
// half the threshold demotes it (a lease at once, a split key through its
// marker: see hotsplit.go). Times are µs on the Store's cache clock.
type hotDetector struct {
	cfg    HotKeys
	window int64 // µs
	sk     sketch
	winEnd atomic.Int64 // end of the current window; 0: none yet
	winSeq atomic.Int64 // the current window's number

	mu  sync.Mutex // rollovers and changes of the hot set
	hot atomic.Pointer[map[cacheKey]*hotEntry]
}

// hotEntry is a promoted key.
type hotEntry struct {
	key     cacheKey
	checks  atomic.Int64 // in the current window
	since   int64        // the window it was promoted in
	cooling atomic.Bool  // its last full window was below threshold/2
	split   atomic.Pointer[splitKey]
}

func newHotDetector(cfg HotKeys) *hotDetector {
	d := &hotDetector{cfg: cfg, window: max(1, cfg.Window.Microseconds())}
	d.hot.Store(&map[cacheKey]*hotEntry{})
	return d
}

// sketchHash is the key's hash in the sketch. Unlike cacheKey.hash (an
// XOR of the rule's and the key's hashes) it is not symmetric: (rule a,
// key b) and (rule b, key a) count apart, and keys equal to their own rule
// do not all hash to one value (a client choosing its key as a rule's name
// would otherwise share that rule's keys' counters by construction).
func (k *cacheKey) sketchHash() uint64 {
	return maphash.String(laneSeed, k.key) ^ bits.RotateLeft64(maphash.String(laneSeed, k.rule), 29) ^
		uint64(k.alg+1)*0x9e3779b97f4a7c15
}

// lookup returns k's entry if k is hot.
func (d *hotDetector) lookup(k cacheKey) *hotEntry { return (*d.hot.Load())[k] }

// observe counts a check of k, not hot, at t. It returns k's new entry when
// this check made k hot, with the promotion event to report.
func (d *hotDetector) observe(k cacheKey, t int64) (*hotEntry, []HotKeyEvent) {
	var events []HotKeyEvent
	if t >= d.winEnd.Load() {
		events = d.rollover(t)
	}
	est := d.sk.add(k.sketchHash())
	if int64(est) < int64(d.cfg.Threshold) {
		return nil, events
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.hot.Load()
	if e := old[k]; e != nil {
		return nil, events // promoted meanwhile
	}
	if len(old) >= d.cfg.MaxKeys {
		return nil, events
	}
	e := &hotEntry{key: k, since: d.winSeq.Load()}
	d.put(k, e)
	return e, append(events, HotKeyEvent{Rule: k.rule, Key: k.key, Hot: true, Mode: d.cfg.Mode, Checks: int(est)})
}

// put adds (or replaces) k's entry; d.mu is held.
func (d *hotDetector) put(k cacheKey, e *hotEntry) {
	old := *d.hot.Load()
	m := make(map[cacheKey]*hotEntry, len(old)+1)
	for k2, e2 := range old {
		m[k2] = e2
	}
	m[k] = e
	d.hot.Store(&m)
}

// remove drops e, if it is still k's entry, and reports whether it did.
func (d *hotDetector) remove(e *hotEntry) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := *d.hot.Load()
	if old[e.key] != e {
		return false
	}
	m := make(map[cacheKey]*hotEntry, len(old))
	for k2, e2 := range old {
		if e2 != e {
			m[k2] = e2
		}
	}
	d.hot.Store(&m)
	return true
}

// rollover ends the window that t is past: it clears the sketch and
// judges every promoted key on its checks in the window that ended. Leases
// are demoted at once; a split key is marked cooling, and demoted by its
// own path (hotsplit.go) once its marker runs out.
func (d *hotDetector) rollover(t int64) []HotKeyEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	end := d.winEnd.Load()
	if t < end {
		return nil // another check rolled over first
	}
	seq := d.winSeq.Add(1)
	d.sk.reset()
	// The next window starts now; an idle Store does not count windows in
	// which nothing was checked.
	d.winEnd.Store(t + d.window)
	old := *d.hot.Load()
	var events []HotKeyEvent
	var keep map[cacheKey]*hotEntry
	for k, e := range old {
		n := e.checks.Swap(0)
		// Judged on a whole window: not on the one it was promoted in,
		// unless a whole window without any check followed.
		cold := t >= end+d.window || (e.since < seq-1 && n < int64(d.cfg.Threshold/2))
		if cold && e.split.Load() == nil {
			if keep == nil {
				keep = make(map[cacheKey]*hotEntry, len(old))
				for k2, e2 := range old {
					keep[k2] = e2
				}
			}
			delete(keep, k)
			events = append(events, HotKeyEvent{Rule: k.rule, Key: k.key, Mode: d.cfg.Mode, Checks: int(n)})
			continue
		}
		e.cooling.Store(cold)
	}
	if keep != nil {
		d.hot.Store(&keep)
	}
	return events
}

// report calls OnChange with each event.
func (d *hotDetector) report(events []HotKeyEvent) {
	if d.cfg.OnChange == nil {
		return
	}
	for _, ev := range events {
		d.cfg.OnChange(ev)
	}
}
