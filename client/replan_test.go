package ratelimitclient

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
)

// throttleOnce answers its first request with a 429 that reports the quota
// spent for 10 s, and every other with a plain 200.
type throttleOnce struct{ calls atomic.Int64 }

func (b *throttleOnce) RoundTrip(*http.Request) (*http.Response, error) {
	h := http.Header{}
	status := http.StatusOK
	if b.calls.Add(1) == 1 {
		status = http.StatusTooManyRequests
		h.Set("Retry-After", "10")
		h.Set("RateLimit", `"default";r=0;t=10`)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// TestQueuedSendWakesWithoutScanningQueue: a send queued behind a throttle
// finds its place among the waiting sends without looking at the others,
// and takes its partition's lock once when it wakes, however many sends
// are queued with it (a batch job behind a 429): waking them all costs
// work in proportion to their number, not to its square.
func TestQueuedSendWakesWithoutScanningQueue(t *testing.T) {
	for _, n := range []int{100, 1000} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := &Transport{Base: &throttleOnce{}, MaxRetries: -1}
				req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
				if _, err := tr.RoundTrip(req); err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						if _, err := tr.RoundTrip(req); err != nil {
							t.Error(err)
						}
					})
				}
				synctest.Wait() // all of them queued
				p := tr.partition(req)
				p.mu.Lock()
				queued := len(p.waiters)
				p.mu.Unlock()
				if queued != n {
					t.Fatalf("%d sends queued, want %d", queued, n)
				}
				wg.Wait()
				p.mu.Lock()
				defer p.mu.Unlock()
				if len(p.waiters) != 0 {
					t.Errorf("%d sends still waiting after all were sent", len(p.waiters))
				}
				if p.work.locks > uint64(n) || p.work.visits > uint64(n) {
					t.Errorf("%d queued sends took the lock %d times and looked at %d waiters under it (%.1f and %.1f a send), want at most one of each a send",
						n, p.work.locks, p.work.visits, float64(p.work.locks)/float64(n), float64(p.work.visits)/float64(n))
				}
			})
		})
	}
}

// TestSendMovedAsItsTimerFiresWaitsForItsNewSlot: when replan gives a
// waiting send a later slot just as the send's timer for its old one fires,
// the send's select may take the timer; its wake, under the partition's
// lock, then finds the new slot and keeps the send waiting for it, as
// replan counted it, instead of sending it one slot early. A send whose
// slot was moved earlier, or not at all, leaves the waiting sends.
func TestSendMovedAsItsTimerFiresWaitsForItsNewSlot(t *testing.T) {
	tr := &Transport{}
	req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
	p := tr.partition(req)
	const old, moved = mono(1_000), mono(5_000)
	for _, c := range []struct {
		name      string
		slot      mono // what replan left the waiter at
		wantLater mono
	}{
		{"moved-later", moved, moved},
		{"not-moved", old, 0},
		{"moved-earlier", old / 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p.mu.Lock()
			w := p.addWaiter(1, old)
			w.slot = c.slot // as replan would, with the send's timer firing
			p.mu.Unlock()
			var blocked bool
			if later := tr.wake(p, w, old, &blocked); later != c.wantLater {
				t.Fatalf("wake returned %d, want %d", later, c.wantLater)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if still := w.at >= 0; still != (c.wantLater != 0) {
				t.Errorf("still waiting: %v, want %v", still, c.wantLater != 0)
			}
			p.leave(w)
		})
	}
}
