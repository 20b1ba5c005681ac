package ratelimitclient_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	ratelimitclient "github.com/sluicehq/ratelimit/client"
)

func TestBlockedResetResumesWithoutHerd(t *testing.T) {
	cases := map[string][]string{
		"Retry-After":                 {"Retry-After", "10"},
		"RateLimit without policy":    {"RateLimit", `"default";r=0;t=10`},
		"RateLimit with policy known": {"RateLimit", `"default";r=0;t=10`, "RateLimit-Policy", `"default";q=100;w=10`},
	}
	for name, fields := range cases {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				status := http.StatusTooManyRequests
				if fields[0] == "RateLimit" {
					status = http.StatusOK
				}
				spread := resumeHerd(t, "", status, fields)
				if spread < time.Second {
					t.Errorf("100 waiters resumed within %v, want spread over >= 1s (10%% of the 10s wait)", spread)
				} else {
					t.Logf("100 waiters resumed over %v after a 10s wait", spread)
				}
			})
		})
	}
}

// resumeHerd answers a first request with status and fields, which make
// the Transport wait 10 s, then sends 100 requests at once, checks that all
// of them were sent and none before the 10 s, and returns how far apart the
// first and the last were sent. label starts its failure messages.
func resumeHerd(t *testing.T, label string, status int, fields []string) (spread time.Duration) {
	t.Helper()
	base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
		if n == 0 {
			return response(status, fields...)
		}
		return response(http.StatusOK)
	}}
	tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1}
	send(tr, get("http://api.test/"))
	start := time.Now()
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			if _, err := send(tr, get("http://api.test/")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	calls := base.callTimes()[1:]
	if len(calls) != 100 {
		t.Fatalf("%s%d sends, want 100", label, len(calls))
	}
	first, last := calls[0], calls[0]
	for _, c := range calls {
		if c.Before(start.Add(10 * time.Second)) {
			t.Fatalf("%sa send at %v, before the reset at 10s", label, c.Sub(start))
		}
		first, last = minTime(first, c), maxTime(last, c)
	}
	return last.Sub(first)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func TestThrottledHostAddsNothingToAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: func(_ int, req *http.Request) *http.Response {
			if req.URL.Host == "slow.test" {
				return response(http.StatusTooManyRequests, "Retry-After", "30", "RateLimit", `"default";r=0;t=30`)
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1}
		send(tr, get("http://slow.test/"))
		// Requests to the throttled host wait in the background...
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { send(tr, get("http://slow.test/")) })
		}
		synctest.Wait()
		// ...while another host's requests take no time at all.
		for i := range 50 {
			start := time.Now()
			if _, err := send(tr, get("http://fast.test/")); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("request %d to the other host took %v, want 0", i, d)
			}
		}
		// Same host, other credentials: another partition too.
		req := get("http://slow.test/")
		req.Header.Set("Authorization", "Bearer other-user")
		start := time.Now()
		send(tr, req)
		if d := time.Since(start); d != 0 {
			t.Fatalf("request with other credentials took %v, want 0", d)
		}
		wg.Wait()
	})
}

func TestSpreadsRemainingQuotaOverReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			if n == 0 {
				return response(http.StatusOK, "RateLimit", `"default";r=10;t=10`)
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base}
		send(tr, get("http://api.test/"))
		start := time.Now()
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { send(tr, get("http://api.test/")) })
		}
		wg.Wait()
		calls := base.callTimes()[1:]
		var late int
		for _, c := range calls {
			if c.Sub(start) >= 5*time.Second {
				late++
			}
		}
		// Ten sends spread over ten seconds: about half in the second half.
		if late < 4 {
			t.Errorf("%d of 10 sends in the second half of the reset window, want them spread (>= 4)", late)
		}
		if end := base.callTimes()[10].Sub(start); end >= 10*time.Second {
			t.Errorf("last send at %v, after the reset", end)
		}
	})
}

func TestWouldWaitFailsFastWithoutNetworkCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusTooManyRequests, "Retry-After", "120")}
		var events []ratelimitclient.Event
		var mu sync.Mutex
		tr := &ratelimitclient.Transport{Base: base, MaxWait: time.Minute, MaxRetries: -1,
			Observer: func(e ratelimitclient.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }}
		client := &http.Client{Transport: tr}
		client.Get("http://api.test/")

		// MaxWait is the bound.
		start := time.Now()
		_, err := client.Get("http://api.test/")
		if !errors.Is(err, ratelimitclient.ErrWouldWait) {
			t.Fatalf("err = %v, want ErrWouldWait", err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v matches DeadlineExceeded, but MaxWait was the bound", err)
		}
		var we *ratelimitclient.WaitError
		if !errors.As(err, &we) || we.Wait < 120*time.Second || we.Deadline {
			t.Errorf("WaitError = %+v", we)
		}
		if !strings.HasPrefix(we.Error(), "ratelimit: ") {
			t.Errorf("error %q lacks the ratelimit: prefix", we)
		}

		// The context's deadline is the bound.
		tr2 := &ratelimitclient.Transport{Base: base, MaxWait: time.Hour, MaxRetries: -1}
		send(tr2, get("http://api.test/"))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		_, err = (&http.Client{Transport: tr2}).Do(req)
		if !errors.Is(err, ratelimitclient.ErrWouldWait) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrWouldWait and DeadlineExceeded", err)
		}
		// http.Client.Timeout is a deadline too.
		_, err = (&http.Client{Transport: tr2, Timeout: 5 * time.Second}).Get("http://api.test/")
		if !errors.Is(err, ratelimitclient.ErrWouldWait) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("with Client.Timeout: err = %v, want ErrWouldWait and DeadlineExceeded", err)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("failing fast took %v", d)
		}
		if n := base.count(); n != 2 {
			t.Errorf("%d network calls, want 2 (one per transport): failing fast sends nothing", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(events) != 2 || events[0].Kind != ratelimitclient.Throttled || events[1].Kind != ratelimitclient.WouldWait {
			t.Errorf("events = %+v, want throttled then would_wait", events)
		}
	})
}

// TestQueuedTooFarSaysSo: a request refused because it would be queued
// more than a policy window past the announced quota's reset, well within
// MaxWait and the context's deadline, says that, not that MaxWait or the
// deadline bounded it, and does not match context.DeadlineExceeded.
func TestQueuedTooFarSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// 2 a window of 10 s, spent until the reset 10 s away: sends queue
		// 5 s apart from the reset, and no further than a window past it.
		base := &fakeBase{respond: always(http.StatusOK,
			"RateLimit", `"default";r=0;t=10`, "RateLimit-Policy", `"default";q=2;w=10`)}
		tr := &ratelimitclient.Transport{Base: base, MaxWait: time.Hour, MaxRetries: -1}
		send(tr, get("http://api.test/"))
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
		defer cancel()
		errs := make(chan error, 40)
		for range 40 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
			go func() { _, err := send(tr, req); errs <- err }()
			synctest.Wait() // admitted (and waiting for its slot), or refused
		}
		var queued *ratelimitclient.WaitError
		for range 40 {
			err := <-errs
			var we *ratelimitclient.WaitError
			if errors.As(err, &we) && queued == nil {
				queued = we
				if errors.Is(err, context.DeadlineExceeded) || we.Deadline {
					t.Errorf("err %v matches DeadlineExceeded, but the queue, not the deadline, refused it", err)
				}
			} else if err != nil && we == nil {
				t.Fatalf("send: %v", err)
			}
		}
		if queued == nil {
			t.Fatal("no request was refused for queueing too far ahead")
		}
		if msg := queued.Error(); !strings.Contains(msg, "queued") || strings.Contains(msg, "MaxWait") || strings.Contains(msg, "deadline") {
			t.Errorf("error %q: want it to say the request would be queued too far ahead, not name MaxWait or the deadline", msg)
		}
		if queued.Wait > time.Hour {
			t.Errorf("wait %v: the refusal was MaxWait's", queued.Wait)
		}
	})
}

func TestCancelledWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: always(http.StatusTooManyRequests, "Retry-After", "10")}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1}
		send(tr, get("http://api.test/"))
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		_, err := tr.RoundTrip(req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if base.count() != 1 {
			t.Errorf("%d sends, want 1", base.count())
		}
	})
}

func TestHostileDelaysAreCapped(t *testing.T) {
	for _, fields := range [][]string{
		{"Retry-After", "31536000"},
		{"Retry-After", "Fri, 01 Jan 2100 00:00:00 GMT"},
		{"RateLimit", `"default";r=0;t=999999999999999`},
		{"X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "999999999999999"},
	} {
		t.Run(fields[0]+"="+fields[1], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
					if n == 0 {
						return response(http.StatusTooManyRequests, fields...)
					}
					return response(http.StatusOK)
				}}
				tr := &ratelimitclient.Transport{Base: base, MaxDelay: 2 * time.Second, MaxRetries: -1}
				send(tr, get("http://api.test/"))
				start := time.Now()
				if _, err := send(tr, get("http://api.test/")); err != nil {
					t.Fatal(err)
				}
				if d := time.Since(start); d > 2*time.Second*6/5 {
					t.Errorf("waited %v, want at most MaxDelay (2s) plus a fifth of jitter", d)
				}
			})
		})
	}
}

// TestFarDelaysBlockAtTheLargestMaxDelay: with MaxDelay as large as a
// Duration goes, a throttle or a reset as far away as a server can write
// blocks the partition (the next request would wait past MaxWait): the
// time it ends is the farthest the clock holds, not a sum that overflowed
// into the past.
func TestFarDelaysBlockAtTheLargestMaxDelay(t *testing.T) {
	for _, c := range []struct {
		status int
		fields []string
	}{
		{http.StatusTooManyRequests, []string{"Retry-After", "999999999999999"}},
		{http.StatusOK, []string{"RateLimit", `"default";r=0;t=999999999999999`}},
	} {
		t.Run(c.fields[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: always(c.status, c.fields...)}
				tr := &ratelimitclient.Transport{Base: base, MaxDelay: math.MaxInt64, MaxRetries: -1}
				send(tr, get("http://api.test/"))
				_, err := send(tr, get("http://api.test/"))
				if !errors.Is(err, ratelimitclient.ErrWouldWait) || base.count() != 1 {
					t.Errorf("after %v: error %v with %d sends, want ErrWouldWait without a second send", c.fields, err, base.count())
				}
			})
		})
	}
}

func TestCachedResponseFieldsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			if n == 0 {
				return response(http.StatusOK, "Age", "30", "RateLimit", `"default";r=0;t=60`)
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base, MaxWait: -1}
		send(tr, get("http://api.test/"))
		if _, err := send(tr, get("http://api.test/")); err != nil {
			t.Fatalf("a cached response's fields delayed the next request: %v", err)
		}
	})
}

func TestOutOfOrderResponseDoesNotRestoreQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The response to the first send arrives after the second's and
		// reports more quota than is left.
		release := make(chan struct{})
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			switch n {
			case 0:
				<-release
				return response(http.StatusOK, "RateLimit", `"default";r=50;t=10`)
			case 1:
				return response(http.StatusOK, "RateLimit", `"default";r=0;t=10`)
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base, MaxWait: -1}
		done := make(chan struct{})
		go func() { send(tr, get("http://api.test/")); close(done) }()
		synctest.Wait()
		send(tr, get("http://api.test/"))
		close(release)
		<-done
		if _, err := send(tr, get("http://api.test/")); !errors.Is(err, ratelimitclient.ErrWouldWait) {
			t.Fatalf("err = %v: the late, stale response restored the quota", err)
		}
	})
}

func TestMalformedFieldsIgnored(t *testing.T) {
	for _, v := range []string{`"default";r=-1;t=10`, `"default";r=0;t=10,`, `"default";r=0;t=abc`, `("a" "b");r=0;t=1`, `"unterminated;r=0;t=5`} {
		t.Run(v, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				base := &fakeBase{respond: always(http.StatusOK, "RateLimit", v)}
				tr := &ratelimitclient.Transport{Base: base, MaxWait: -1}
				for range 3 {
					if _, err := send(tr, get("http://api.test/")); err != nil {
						t.Fatalf("malformed %q delayed a request: %v", v, err)
					}
				}
			})
		})
	}
}

// TestHerdResumesSpreadWhenFieldsPace: waiters on a throttle or a reset
// resume spread over at least a tenth of their wait, in every run, also
// when the server's fields give a pace so fast that it alone would send
// them all at once. Each send is paced from the unjittered instant, not
// after the latest jittered one (which put nearly all of them at the
// largest jitter).
func TestHerdResumesSpreadWhenFieldsPace(t *testing.T) {
	cases := map[string]struct {
		status int
		fields []string
	}{
		"429 with fields": {http.StatusTooManyRequests, []string{"Retry-After", "10",
			"RateLimit", `"default";r=0;t=10`, "RateLimit-Policy", `"default";q=100000;w=10`}},
		"reset with fields": {http.StatusOK, []string{
			"RateLimit", `"default";r=0;t=10`, "RateLimit-Policy", `"default";q=100000;w=10`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			for run := range 10 {
				synctest.Test(t, func(t *testing.T) {
					spread := resumeHerd(t, fmt.Sprintf("run %d: ", run), c.status, c.fields)
					if spread < time.Second {
						t.Errorf("run %d: 100 waiters resumed within %v, want >= 1s (10%% of the 10s wait)", run, spread)
					}
				})
			}
		})
	}
}

// TestThrottleBringsQueuedSendsForward: a request queued for a reset five
// seconds away is sent once a throttle's Retry-After of a second has
// passed, not at that reset. Retry-After takes precedence over the reset
// the other fields give for a quota it finds spent, and the sends already
// waiting are given their slots again (a reset read from whole seconds can
// be a second later than the quota is back: at windows of a second, a
// window of sends).
func TestThrottleBringsQueuedSendsForward(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fields := []string{"RateLimit", `"default";r=0;t=5`, "RateLimit-Policy", `"default";q=10;w=5`}
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			switch n {
			case 0:
				time.Sleep(10 * time.Millisecond)
				return response(http.StatusOK, fields...)
			case 1:
				time.Sleep(20 * time.Millisecond)
				return response(http.StatusTooManyRequests, append(fields, "Retry-After", "1")...)
			}
			return response(http.StatusOK)
		}}
		tr := &ratelimitclient.Transport{Base: base, MaxRetries: -1}
		start := time.Now()
		var wg sync.WaitGroup
		for range 2 { // both sent before either answer arrives
			wg.Go(func() { send(tr, get("http://api.test/")) })
			synctest.Wait()
		}
		time.Sleep(15 * time.Millisecond) // the first answer is in: the quota is spent for 5 s
		wg.Go(func() { send(tr, get("http://api.test/")) })
		wg.Wait()
		calls := base.callTimes()
		if len(calls) != 3 {
			t.Fatalf("%d sends, want 3", len(calls))
		}
		if at := calls[2].Sub(start); at < 1020*time.Millisecond || at >= 2*time.Second {
			t.Errorf("the queued request sent at %v, want after the throttle's Retry-After ends (1.02 s) and well before the reset (5.01 s)", at)
		}
	})
}

// TestQueuedSendsMoveUpWhenTheWindowReadsShorter: a server of 10 a second
// sends X-RateLimit-Reset as a Unix time; the first response, whose Date
// is 0 s and reset 2 s, reads as a window of 2 s (10 per 2 s, a send each
// 200 ms), and requests are queued at that pace. The response at 1 s,
// reset 3 s, shows the resets off the ends of windows of 2 s aligned on the
// clock: the window is 1 s. The requests still waiting are given their
// slots again, at 10 a second, instead of keeping the 200 ms ones (the
// last of ten at 2 s).
func TestQueuedSendsMoveUpWhenTheWindowReadsShorter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		base := &fakeBase{respond: func(n int, _ *http.Request) *http.Response {
			now := time.Since(start)
			reset, remaining := 2, 9-n
			if now >= time.Second {
				reset, remaining = 3, 9
			}
			return response(http.StatusOK, "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", fmt.Sprint(remaining),
				"X-RateLimit-Reset", fmt.Sprint(start.Unix()+int64(reset)), "Date", start.Add(now.Truncate(time.Second)).UTC().Format(http.TimeFormat))
		}}
		tr := &ratelimitclient.Transport{Base: base}
		send(tr, get("http://api.test/"))
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() { send(tr, get("http://api.test/")) })
		}
		wg.Wait()
		calls := base.callTimes()
		if last := calls[len(calls)-1].Sub(start); last >= 1600*time.Millisecond {
			t.Errorf("the last of ten queued requests sent at %v, want before 1.6 s (the ones waiting at 1 s at 10 a second)", last)
		}
		for i := 10; i < len(calls); i++ {
			if gap := calls[i].Sub(calls[i-10]); gap < time.Second {
				t.Errorf("sends %d to %d within %v, want at most 10 a second", i-10, i, gap)
			}
		}
	})
}
