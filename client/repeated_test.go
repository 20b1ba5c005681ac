package ratelimitclient

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// sameFields answers every request with the RateLimit and RateLimit-Policy
// values it holds, and status.
type sameFields struct {
	rateLimit string
	status    int
	delay     time.Duration // before answering
}

func (s *sameFields) RoundTrip(*http.Request) (*http.Response, error) {
	time.Sleep(s.delay)
	h := http.Header{}
	h.Set("RateLimit", s.rateLimit)
	h.Set("RateLimit-Policy", `"default";q=10;w=10`)
	if s.status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	return &http.Response{StatusCode: s.status, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// TestUnchangedFieldsAreSkippedOnlyWhileConservative: a response whose
// fields are those of the response applied last is not applied again (it
// would give back the quota used since) while the policy's state is still
// the one that response left, before its reset and with half its quota
// left; a throttle, a policy down to half its quota and a reset that has
// passed are applied as any other response.
func TestUnchangedFieldsAreSkippedOnlyWhileConservative(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &sameFields{rateLimit: `"default";r=10;t=10`, status: http.StatusOK}
		tr := &Transport{Base: base, MaxRetries: -1}
		send := func() {
			t.Helper()
			req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
		}
		state := func() (seq uint64, rem int64) {
			p := tr.last.Load()
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.policies[0].seq, p.policies[0].rem
		}
		send() // applied: r=10 and the send it answers
		send()
		if seq, rem := state(); seq != 1 || rem != 9 {
			t.Fatalf("after a repeated response: state of response %d with %d left, want 1 with 9 (not applied, the send counted)", seq, rem)
		}
		for range 4 {
			send()
		}
		if seq, rem := state(); seq != 6 || rem != 10 {
			t.Errorf("down to half the quota: state of response %d with %d left, want 6 with 10 (applied)", seq, rem)
		}
		// Sent just before the reset, answered just after it.
		p := tr.last.Load()
		p.mu.Lock()
		resetAt := p.policies[0].resetAt
		p.mu.Unlock()
		time.Sleep(resetAt.sub(tr.now()) - 100*time.Millisecond)
		base.delay = 200 * time.Millisecond
		send()
		if seq, _ := state(); seq != 7 {
			t.Errorf("answered after the reset: state of response %d, want 7 (applied)", seq)
		}
		base.delay = 0
		time.Sleep(10 * time.Second) // the reset passes, the client restores the quota
		send()
		if seq, _ := state(); seq != 8 {
			t.Errorf("after a reset the client extrapolated: state of response %d, want 8 (applied)", seq)
		}
		base.status = http.StatusTooManyRequests
		send()
		if seq, _ := state(); seq != 9 {
			t.Errorf("a throttle repeating the fields: state of response %d, want 9 (applied)", seq)
		}
	})
}

// scriptedFields answers the i-th request with the i-th RateLimit and
// RateLimit-Policy values of its script.
type scriptedFields struct {
	steps [][2]string // RateLimit, RateLimit-Policy
	i     int
}

func (s *scriptedFields) RoundTrip(*http.Request) (*http.Response, error) {
	h := http.Header{}
	h.Set("RateLimit", s.steps[s.i][0])
	h.Set("RateLimit-Policy", s.steps[s.i][1])
	s.i++
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(""))}, nil
}

// TestRepeatedRateLimitUnderAChangedPolicyIsApplied: a response whose
// RateLimit value is that of the response applied last, byte for byte, but
// whose RateLimit-Policy changed (here at the same length, as a quota of
// 10 becomes 20) is no repeat: its policy's quota and window are applied,
// though its RateLimit value, read from the template or not, is one the
// partition has seen; and so is a change back.
func TestRepeatedRateLimitUnderAChangedPolicyIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &scriptedFields{steps: [][2]string{
			{`"default";r=90;t=10`, `"default";q=99;w=10`},
			{`"default";r=89;t=10`, `"default";q=99;w=10`}, // read from the template
			{`"default";r=89;t=10`, `"default";q=95;w=20`}, // the same RateLimit, another policy
			{`"default";r=88;t=10`, `"default";q=95;w=20`}, // read from the template
			{`"default";r=88;t=10`, `"default";q=99;w=10`},
		}}
		tr := &Transport{Base: base, MaxRetries: -1}
		want := []struct {
			limit  int64
			window time.Duration
		}{{99, 10 * time.Second}, {99, 10 * time.Second}, {95, 20 * time.Second}, {95, 20 * time.Second}, {99, 10 * time.Second}}
		for i, w := range want {
			req, _ := http.NewRequest(http.MethodGet, "https://api.test/", nil)
			if _, err := tr.RoundTrip(req); err != nil {
				t.Fatal(err)
			}
			p := tr.last.Load()
			p.mu.Lock()
			limit, window := p.policies[0].limit, p.policies[0].window
			p.mu.Unlock()
			if limit != w.limit || window != w.window {
				t.Errorf("response %d (%q): the policy's quota %d and window %v, want %d and %v",
					i, base.steps[i], limit, window, w.limit, w.window)
			}
		}
	})
}
