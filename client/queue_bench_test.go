package ratelimitclient_test

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

// spentBase answers its first request with a 429 that reports the quota
// spent until its reset a second later, and every other with a plain 200:
// the requests sent after the first wait for the reset, and resume spread
// over the fifth of a second after it, in no particular order.
type spentBase struct {
	calls     atomic.Int64
	spent, ok *http.Response
}

func newSpentBase() *spentBase {
	spent := newNoopBase().resp
	spent.StatusCode = http.StatusTooManyRequests
	spent.Header = spent.Header.Clone()
	spent.Header["Retry-After"] = []string{"1"}
	spent.Header["Ratelimit"] = []string{`"default";r=0;t=1`}
	return &spentBase{spent: spent, ok: newNoopBase().resp}
}

func (b *spentBase) RoundTrip(*http.Request) (*http.Response, error) {
	if b.calls.Add(1) == 1 {
		return b.spent, nil
	}
	return b.ok, nil
}

// BenchmarkQueuedSends measures what a send costs when n sends are queued
// behind a throttle (a batch job behind a 429): each op is a 429 whose
// quota is back a second later, and n requests sent at once, which wait
// for it. It reports the CPU time per
// queued send, which should not grow with n: the wall time per op is
// mostly the wait.
func BenchmarkQueuedSends(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			start := cpuTime()
			for b.Loop() {
				tr := &ratelimitclient.Transport{Base: newSpentBase(), MaxRetries: -1}
				req, _ := http.NewRequest(http.MethodGet, "https://api.test/v1/things", nil)
				if _, err := tr.RoundTrip(req); err != nil {
					b.Fatal(err)
				}
				var wg sync.WaitGroup
				for range n {
					wg.Go(func() {
						if _, err := tr.RoundTrip(req); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			if d := cpuTime() - start; d > 0 {
				b.ReportMetric(float64(d)/float64(b.N*n), "cpu-ns/send")
			}
		})
	}
}
