package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
)

// ask returns a completion request from key with a prompt of words words
// and max_tokens maxTokens (absent when 0).
func ask(key string, words, maxTokens int) *http.Request {
	body := map[string]any{"prompt": strings.TrimSpace(strings.Repeat("word ", words))}
	if maxTokens != 0 {
		body["max_tokens"] = maxTokens
	}
	b, _ := json.Marshal(body)
	r := httptest.NewRequest("POST", "/v1/completions", strings.NewReader(string(b)))
	r.Header.Set("Authorization", "Bearer "+key)
	return r
}

// remaining is the r= of the response's RateLimit field.
func remaining(t *testing.T, resp *ratelimittest.Response) int {
	t.Helper()
	f, err := ratelimittest.ParseRateLimit(resp.Header)
	if err != nil || f.Policy != "tokens" {
		t.Fatalf("RateLimit %+v, %v; status %d, header %v", f, err, resp.Code, resp.Header)
	}
	return f.Remaining
}

// TestUnderestimatedRequestsAreChargedInFull: requests estimated at 10
// tokens that use 100 are charged 100, so that the key's minute is spent
// after ten of them; requests that use their estimate get a hundred.
func TestUnderestimatedRequestsAreChargedInFull(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	h := newHandler(fakeModel, ratelimit.WithClock(clock))

	resp := ratelimittest.Do(h, ask("sk-alice", 90, 10))
	var c completion
	if err := json.Unmarshal([]byte(resp.Body), &c); resp.Code != 200 || err != nil ||
		c.Usage != (usage{PromptTokens: 90, CompletionTokens: 10, TotalTokens: 100}) {
		t.Fatalf("first request: %d %q (%v)", resp.Code, resp.Body, err)
	}
	if got := remaining(t, resp); got != tokensPerMinute-10 {
		t.Fatalf("first response: r=%d; want %d (admitted on its estimate)", got, tokensPerMinute-10)
	}
	// The first request was settled at 100; the second is admitted on its
	// estimate of 10.
	if got := remaining(t, ratelimittest.Do(h, ask("sk-alice", 90, 10))); got != tokensPerMinute-100-10 {
		t.Fatalf("second response: r=%d; want %d", got, tokensPerMinute-100-10)
	}
	ratelimittest.ExpectLimitedAt(t, h, 9, func() *http.Request { return ask("sk-alice", 90, 10) })

	// Bob's requests use their estimate (5 words of prompt, 5 of answer).
	ratelimittest.ExpectLimitedAt(t, h, tokensPerMinute/10+1, func() *http.Request { return ask("sk-bob", 5, 10) })

	// Six seconds give back 100 tokens: room for one of Alice's requests.
	clock.Advance(6 * time.Second)
	ratelimittest.ExpectLimitedAt(t, h, 2, func() *http.Request { return ask("sk-alice", 90, 10) })
}

// TestOverestimatedRequestsGetTheRestBack: a request without max_tokens is
// admitted on the default estimate and charged what it used.
func TestOverestimatedRequestsGetTheRestBack(t *testing.T) {
	h := newHandler(fakeModel, ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())))
	if got := remaining(t, ratelimittest.Do(h, ask("sk-alice", 3, 0))); got != tokensPerMinute-defaultMaxTokens {
		t.Fatalf("first response: r=%d; want %d", got, tokensPerMinute-defaultMaxTokens)
	}
	if got := remaining(t, ratelimittest.Do(h, ask("sk-alice", 3, 0))); got != tokensPerMinute-6-defaultMaxTokens {
		t.Fatalf("second response: r=%d; want %d (the first charged 6)", got, tokensPerMinute-6-defaultMaxTokens)
	}
}

// TestDisconnectedClientIsCharged: the client goes away while the model
// works; the tokens it used are charged all the same, by a store that
// fails calls made on a context that has ended.
func TestDisconnectedClientIsCharged(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	store := liveCtxStore{memory.New(memory.WithClock(clock))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaving := func(req completionRequest) completion {
		cancel() // the client disconnects before the model answers
		return fakeModel(req)
	}
	opts := []ratelimit.Option{ratelimit.WithClock(clock), ratelimit.WithStore(store)}
	ratelimittest.Do(newHandler(leaving, opts...), ask("sk-alice", 90, 10).WithContext(ctx))
	if ctx.Err() == nil {
		t.Fatal("the model was not called")
	}
	probe := ratelimittest.Do(newHandler(fakeModel, opts...), ask("sk-alice", 90, 10))
	if got := remaining(t, probe); got != tokensPerMinute-100-10 {
		t.Fatalf("after a disconnected request that used 100 tokens: r=%d; want %d", got, tokensPerMinute-100-10)
	}
}

// liveCtxStore fails takes made on a context that has ended, as a
// networked store would: the settlement of a request that used more than
// its estimate is one.
type liveCtxStore struct{ ratelimit.Store }

func (s liveCtxStore) Take(ctx context.Context, r stores.Request) (ratelimit.Result, error) {
	if err := ctx.Err(); err != nil {
		return ratelimit.Result{}, fmt.Errorf("liveCtxStore: %w", err)
	}
	return s.Store.Take(ctx, r)
}

// TestRefusedBeforeCounting: unknown keys and unusable bodies are refused
// before the limiter counts anything.
func TestRefusedBeforeCounting(t *testing.T) {
	h := newHandler(fakeModel, ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())))
	bad := func(r *http.Request) *http.Request { r.Body = http.NoBody; return r }
	for name, tc := range map[string]struct {
		r    *http.Request
		code int
	}{
		"unknown key":      {ask("sk-mallory", 5, 10), 401},
		"no body":          {bad(ask("sk-alice", 5, 10)), 400},
		"max_tokens < 0":   {ask("sk-alice", 5, -1), 400},
		"max_tokens large": {ask("sk-alice", 5, maxMaxTokens+1), 400},
	} {
		if resp := ratelimittest.Do(h, tc.r); resp.Code != tc.code || resp.Header.Get("RateLimit") != "" {
			t.Errorf("%s: %d, RateLimit %q; want %d without fields", name, resp.Code, resp.Header.Get("RateLimit"), tc.code)
		}
	}
	if got := remaining(t, ratelimittest.Do(h, ask("sk-alice", 5, 10))); got != tokensPerMinute-10 {
		t.Fatalf("after refused requests: r=%d; want %d", got, tokensPerMinute-10)
	}
}
