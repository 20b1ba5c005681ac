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
