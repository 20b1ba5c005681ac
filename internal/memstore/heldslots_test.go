package memstore

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHeldReleaseOfHotKeyLeavesItsToken: a release through the Held of an
// acquisition from the hot queue leaves its token in the queue, without
// the queue's lock, and the key's next acquisition applies it first: it
// finds the slot free.
func TestHeldReleaseOfHotKeyLeavesItsToken(t *testing.T) {
	s := New(Config{MaxKeys: 1024}) // one shard
	p := s.Prepare(Request{Rule: "inflight", Alg: Concurrency, Limit: Limit{Rate: 2, Period: int64(time.Minute)}, Cost: 1})
	now := int64(1_700_000_000) * int64(time.Second)
	for range 2 { // two locked acquisitions in a row make the key hot
		var hd Held
		res := p.TakeHeld("k", now, &hd)
		p.ReleaseHeld(&hd, res.Slot, now)
	}
	var a, b Held
	ra, rb := p.TakeHeld("k", now, &a), p.TakeHeld("k", now, &b)
	if !ra.Allowed || !rb.Allowed || rb.Remaining != 0 {
		t.Fatalf("two of two: %+v %+v", ra, rb)
	}
	if a.q == nil || a.q != s.conc[0].hot.Load() {
		t.Fatal("the acquisition did not come from the hot queue")
	}
	q := a.q
	p.ReleaseHeld(&a, ra.Slot, now)
	left, held := q.returned.Load(), q.inflight
	if left != ra.Slot || held != 2 {
		t.Fatalf("after the release: token %d left and %d held, want %d left and 2 held until the next acquisition", left, held, ra.Slot)
	}
	if res := p.TakeHeld("k", now, &a); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("the next acquisition: %+v, want the released slot", res)
	}
	if q.returned.Load() != 0 {
		t.Fatal("the token is still left after the next acquisition")
	}
}

// TestHeldReleaseAfterTheHeatMoved: a slot taken from the hot queue and
// released after its key stopped being hot (another key of the shard
// became hot, or the key was deleted) is given back once, the locked way:
// the key has every slot free afterwards, and a deleted key's release
// frees nothing of the key taken again since.
func TestHeldReleaseAfterTheHeatMoved(t *testing.T) {
	s := New(Config{MaxKeys: 1024})
	l := Limit{Rate: 2, Period: int64(time.Minute)}
	p := s.Prepare(Request{Rule: "inflight", Alg: Concurrency, Limit: l, Cost: 1})
	now := int64(1_700_000_000) * int64(time.Second)
	hotTake := func(key string, hd *Held) Result {
		t.Helper()
		for range 2 {
			var h Held
			res := p.TakeHeld(key, now, &h)
			p.ReleaseHeld(&h, res.Slot, now)
		}
		res := p.TakeHeld(key, now, hd)
		if !res.Allowed || hd.q == nil {
			t.Fatalf("%s: %+v, from the hot queue %v", key, res, hd.q != nil)
		}
		return res
	}
	var a Held
	ra := hotTake("a", &a)
	var o Held
	hotTake("other", &o) // a's heat ends
	p.ReleaseHeld(&a, ra.Slot, now)
	if res := s.Take(&Request{Rule: "inflight", Key: "a", Alg: Concurrency, Limit: l, Cost: 2}, now); !res.Allowed {
		t.Fatalf("a, released after its heat ended: %+v, want both slots free", res)
	}

	s.Delete(&Request{Rule: "inflight", Key: "other", Alg: Concurrency})
	taken := p.Take("other", now) // a new queue
	p.ReleaseHeld(&o, taken.Slot-1, now)
	p.ReleaseHeld(&o, 0, now) // a zero token releases the soonest slot: the new one
	if res := p.Take("other", now); !res.Allowed || res.Remaining != 1 {
		t.Fatalf("other after its old slot's release: %+v, want 1 of 2 left", res)
	}
}

// TestHeldSlotsNeverAdmitPastTheLimit: goroutines acquire slots of one
// key through a Held and hold them across a barrier, so that the limit is
// reached on every round, while another goroutine moves the shard's heat
// to a second key and back and TakeAll names the first: the slots held
// never exceed the limit, and once every slot is back the key has every
// slot free.
func TestHeldSlotsNeverAdmitPastTheLimit(t *testing.T) {
	const rate, workers, rounds = 3, 6, 300
	s := New(Config{MaxKeys: 1024})
	l := Limit{Rate: rate, Period: int64(time.Hour)}
	p := s.Prepare(Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1})
	now := int64(1_700_000_000) * int64(time.Second)
	var inFlight, peak atomic.Int64
	var taken, fromHot atomic.Int64
	var wg sync.WaitGroup
	barrier := newBarrier(workers)
	// The mover below moves the heat once a round, while the round's
	// workers take and release: a mover of its own pace would, on a busy
	// machine, end the heat more often than the workers' two locked takes
	// in a row bring it back, and the hot queue would go untested.
	tick := make(chan struct{}, 1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if w == 0 {
					select {
					case tick <- struct{}{}:
					default: // the last round's move is still to come
					}
				}
				var hd Held
				res := p.TakeHeld("k", now, &hd)
				barrier.wait() // every worker has decided: rate of them hold a slot
				if res.Allowed {
					if hd.q != nil {
						fromHot.Add(1)
					}
					taken.Add(1)
					n := inFlight.Add(1)
					for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
					}
				}
				barrier.wait()
				if res.Allowed {
					inFlight.Add(-1)
					p.ReleaseHeld(&hd, res.Slot, now)
				}
				barrier.wait() // every slot of the round is back
			}
		}()
	}
	stop := make(chan struct{})
	var mover sync.WaitGroup
	mover.Add(1)
	go func() { // the heat moves away and back, and TakeAll ends it
		defer mover.Done()
		out := make([]Result, 1)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick:
			}
			if i%3 == 0 {
				if err := s.TakeAll([]Request{{Rule: "c", Key: "k", Alg: Concurrency, Limit: l}}, out, now); err != nil {
					t.Error(err)
					return
				}
				continue
			}
			for range 2 {
				res := p.Take("other", now)
				p.Release("other", res.Slot, now)
			}
		}
	}()
	wg.Wait()
	close(stop)
	mover.Wait()
	if m := peak.Load(); m > rate {
		t.Fatalf("%d slots held at once, limit %d", m, rate)
	}
	if n := fromHot.Load(); n < rounds {
		t.Fatalf("%d acquisitions of %d from the hot queue", n, rate*rounds)
	}
	if n := taken.Load(); n != rate*rounds {
		t.Fatalf("%d acquisitions allowed in %d rounds, want the limit, %d, in each", n, rounds, rate)
	}
	if res := s.Take(&Request{Rule: "c", Key: "k", Alg: Concurrency, Limit: l, Cost: rate}, now); !res.Allowed {
		t.Fatalf("every slot released, the key denies all of them: %+v", res)
	}
}

// barrier lets n goroutines wait for each other, again and again.
type barrier struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	count int
	round int
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *barrier) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	round := b.round
	if b.count++; b.count == b.n {
		b.count, b.round = 0, b.round+1
		b.cond.Broadcast()
		return
	}
	for round == b.round {
		b.cond.Wait()
	}
}

// TestHotQueueDrawsFreshTokensAndNeverExpires: a hot queue keeps the last
// token it drew where a queue not hot keeps its latest deadline: while hot
// it reads as never expiring and draws a token above every earlier one,
// across the blocks it reserves; once its heat ends it reads as expiring
// at its last live slot's deadline again.
func TestHotQueueDrawsFreshTokensAndNeverExpires(t *testing.T) {
	s := New(Config{MaxKeys: 1024}) // one shard
	sec := int64(time.Second)
	l := Limit{Rate: 2, Period: 10 * sec}
	p := s.Prepare(Request{Rule: "c", Alg: Concurrency, Limit: l, Cost: 1})
	now := int64(1_700_000_000) * sec
	var held Held
	kept := p.TakeHeld("k", now, &held) // held to the end
	last := kept.Slot
	for i := range tokenBlock + 10 { // past the end of the first block
		var hd Held
		res := p.TakeHeld("k", now+int64(i), &hd)
		if !res.Allowed || res.Slot <= last {
			t.Fatalf("acquisition %d: %+v after token %d", i, res, last)
		}
		last = res.Slot
		p.ReleaseHeld(&hd, res.Slot, now+int64(i))
	}
	sh := &s.conc[0]
	q := sh.hot.Load()
	if q == nil {
		t.Fatal("the key is not hot")
	}
	if e := q.expiry(); e != math.MaxInt64 {
		t.Fatalf("a hot queue expires at %d", e)
	}
	for range 2 { // another key's heat ends k's
		res := p.Take("other", now)
		p.Release("other", res.Slot, now)
	}
	if sh.hot.Load() == q {
		t.Fatal("k is still hot")
	}
	if e, want := q.expiry(), now+l.Period; e != want {
		t.Fatalf("after its heat: expires at %d, want %d, its held slot's deadline", e, want)
	}
}
