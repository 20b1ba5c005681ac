package fair

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestDealGivesDistinctQueuesInRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range [][2]int{{64, 6}, {64, 8}, {8, 8}, {1, 1}, {1024, 6}, {16, 16}} {
		deck, size := c[0], c[1]
		counts := make([]int, deck)
		const n = 20000
		for range n {
			var hand [maxHand]int
			deal(rng.Uint64(), deck, size, &hand)
			seen := map[int]bool{}
			for _, q := range hand[:size] {
				if q < 0 || q >= deck || seen[q] {
					t.Fatalf("deck %d hand %d: bad hand %v", deck, size, hand[:size])
				}
				seen[q] = true
				counts[q]++
			}
		}
		want := float64(n*size) / float64(deck)
		tol := 5 * math.Sqrt(want) // five standard deviations of a fair deal
		for q, got := range counts {
			if math.Abs(float64(got)-want) > tol {
				t.Errorf("deck %d hand %d: queue %d dealt %d times, want about %.0f", deck, size, q, got, want)
			}
		}
	}
}

// With 64 queues and hands of 6, three elephant flows can cover at most 18
// queues; a flow keeps a queue no elephant uses unless all 6 of its cards
// fall among them.
func TestShuffleShardingIsolatesFlowsFromThreeElephants(t *testing.T) {
	const queues, hand, trials, mice = 64, 6, 200, 5000
	isolated, total := 0, 0
	for trial := range trials {
		used := map[int]bool{}
		for e := range 3 {
			var h [maxHand]int
			deal(flowHash(fmt.Sprintf("elephant-%d-%d", trial, e)), queues, hand, &h)
			for _, q := range h[:hand] {
				used[q] = true
			}
		}
		for m := range mice {
			var h [maxHand]int
			deal(flowHash(fmt.Sprintf("tenant-%d-%d", trial, m)), queues, hand, &h)
			total++
			for _, q := range h[:hand] {
				if !used[q] {
					isolated++
					break
				}
			}
		}
	}
	frac := float64(isolated) / float64(total)
	t.Logf("%d of %d flows (%.4f%%) have a queue no elephant uses", isolated, total, 100*frac)
	if frac < 0.999 {
		t.Errorf("isolated fraction %.5f, want >= 0.999", frac)
	}
}

// The live check: three elephants flood a level; every other flow that has
// a queue free of elephants is queued there, never behind one.
func TestLightFlowsJoinAQueueNoElephantHolds(t *testing.T) {
	f := New(Config{Seats: 1, Levels: []Level{{Name: "l", Shares: 1, Queues: 64, HandSize: 6}}})
	lv := f.levels[0]
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inUse = 1 // the seat is held: everything waits
	lv.inUse = 1
	elephantQueues := map[int]bool{}
	for e := range 3 {
		h := flowHash(fmt.Sprint("elephant", e))
		for range 40 {
			q := lv.queueOf(h)
			lv.enqueue(q, &waiter{ready: make(chan struct{}), flow: h})
			elephantQueues[q] = true
		}
	}
	if len(elephantQueues) != 3 {
		t.Fatalf("the elephants spread over %d queues, want one each", len(elephantQueues))
	}
	for m := range 2000 {
		h := flowHash(fmt.Sprint("mouse", m))
		var hand [maxHand]int
		deal(h, 64, 6, &hand)
		free := false
		for _, q := range hand[:6] {
			free = free || !elephantQueues[q]
		}
		if q := lv.queueOf(h); free && elephantQueues[q] {
			t.Fatalf("mouse %d joined elephant queue %d although its hand %v has a free one", m, q, hand[:6])
		}
	}
}

func TestDeckEntropyIsChecked(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("no panic for 4096 queues dealt 16 at a time")
		}
	}()
	New(Config{Seats: 1, Levels: []Level{{Name: "l", Queues: 4096, HandSize: 16}}})
}
