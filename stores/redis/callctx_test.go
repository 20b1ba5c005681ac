package redisstore

// Where a call runs: on a client that bounds its reads by ctx
// (ContextTimeoutEnabled), on the caller's goroutine; on go-redis's default
// client, on a goroutine of its own that keeps the budget, through the
// client itself so that its hooks see every command (docs/redis.md, "Why
// the default client pays a hand-off").

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/redis/redistest"
)

// scriptHook is a go-redis hook that counts the script commands it sees
// (EVALSHA and EVAL, alone or in a pipeline) and names those that did not
// run on the goroutine of a call made through fromCaller.
type scriptHook struct {
	mu        sync.Mutex
	seen      int
	offCaller []string
}

func (h *scriptHook) note(cmd redis.Cmder) {
	name := cmd.Name()
	if name != "evalsha" && name != "eval" {
		return
	}
	caller := onCallerStack()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
	if !caller {
		h.offCaller = append(h.offCaller, name)
	}
}

func (h *scriptHook) counts() (seen int, offCaller []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen, append([]string(nil), h.offCaller...)
}

// DialHook implements redis.Hook.
func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.note(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			h.note(c)
		}
		return next(ctx, cmds)
	}
}

// fromCaller runs call; a hook finds it on its stack when the command runs
// on the caller's goroutine.
//
//go:noinline
func fromCaller(call func() error) error { return call() }

// onCallerStack reports whether fromCaller is on the current goroutine's
// stack.
func onCallerStack() bool {
	pcs := make([]uintptr, 256)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".fromCaller") {
			return true
		}
		if !more {
			return false
		}
	}
}

// directCalls are a Store's kinds of call: a plain GCRA take, a take of
// script.lua, a TakeAll and a Return.
var directCalls = []struct {
	name string
	call func(s *Store, key string) error
}{
	{"take/plain", func(s *Store, key string) error { return take(s, gcraReq(key, ratelimit.PerHour(100), 1)) }},
	{"take/script", func(s *Store, key string) error {
		return take(s, withAlg(gcraReq(key, ratelimit.PerHour(100), 1), stores.FixedWindow))
	}},
	{"takeall", func(s *Store, key string) error { return takeAll(s, gcraReq(key, ratelimit.PerHour(100), 1)) }},
	{"return", func(s *Store, key string) error { return giveBack(s, gcraReq(key, ratelimit.PerHour(100), 1)) }},
}

// TestContextTimeoutClientCallsRunOnCallersGoroutine: on a go-redis Client
// with ContextTimeoutEnabled, the recommended setup, each kind of call,
// with and without coalescing, sends its script on the caller's
// goroutine: no hand-off to a goroutine of its own, which wakes a second
// thread per call.
func TestContextTimeoutClientCallsRunOnCallersGoroutine(t *testing.T) {
	requireShared(t)
	for _, coalesce := range []bool{true, false} {
		for _, c := range directCalls {
			t.Run(fmt.Sprintf("coalescing=%v/%s", coalesce, c.name), func(t *testing.T) {
				client := redis.NewClient(&redis.Options{Addr: sharedServer.Addr, ContextTimeoutEnabled: true})
				t.Cleanup(func() { client.Close() })
				hook := &scriptHook{}
				client.AddHook(hook)
				opts := []Option{WithPrefix(uniquePrefix(t)), WithoutDeniedCache()}
				if !coalesce {
					opts = append(opts, WithoutCoalescing())
				}
				s := newStore(client, opts...)
				if err := fromCaller(func() error { return c.call(s, "k") }); err != nil {
					t.Fatal(err)
				}
				seen, off := hook.counts()
				if seen == 0 {
					t.Fatal("the hook saw no script command")
				}
				if len(off) != 0 {
					t.Errorf("%d of %d script commands ran on another goroutine than the caller's: %v", len(off), seen, off)
				}
			})
		}
	}
}

// TestDefaultClientHooksSeeEveryCommand: the hooks of a go-redis Client
// with its default options, one added before the Stores were made and one
// after, see every script command the Stores send, the first EVALSHA
// refused with NOSCRIPT and its EVAL included: the server's count of them
// is each hook's. (go-redis's WithTimeout view of the client, which would
// bound reads without a hand-off, fails this: it runs none of the
// client's hooks.)
func TestDefaultClientHooksSeeEveryCommand(t *testing.T) {
	srv := redistest.NewServer(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })
	early, late := &scriptHook{}, &scriptHook{}
	client.AddHook(early)
	var all []*Store
	for _, coalesce := range []bool{true, false} {
		opts := []Option{WithoutDeniedCache()}
		if !coalesce {
			opts = append(opts, WithoutCoalescing())
		}
		all = append(all, newStore(client, opts...))
	}
	client.AddHook(late)
	for _, s := range all {
		for i, c := range directCalls {
			key := fmt.Sprintf("k%d", i)
			for range 3 {
				if err := c.call(s, key); err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
			}
		}
	}
	served := serverScriptCalls(t, srv.Addr)
	for name, h := range map[string]*scriptHook{"added before New": early, "added after New": late} {
		seen, _ := h.counts()
		t.Logf("script commands: the server ran %d, the hook %s saw %d", served, name, seen)
		if seen != served {
			t.Errorf("the hook %s saw %d script commands, the server ran %d", name, seen, served)
		}
	}
}

// serverScriptCalls is the number of EVALSHA and EVAL commands the server at
// addr ran or refused, from INFO commandstats.
func serverScriptCalls(t *testing.T, addr string) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(info, "\r\n") {
		name, stats, ok := strings.Cut(line, ":")
		if !ok || name != "cmdstat_evalsha" && name != "cmdstat_eval" {
			continue
		}
		for _, kv := range strings.Split(stats, ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k == "calls" || k == "rejected_calls" {
				x, err := strconv.Atoi(v)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				n += x
			}
		}
	}
	return n
}

// TestDefaultClientBudgetWithResends: on a go-redis Client with its
// default options, resends included (MaxRetries 3), each kind of call to a
// server that never answers returns at the Store's budget, though the
// client itself would read for its ReadTimeout (5s) on each attempt. Reset
// (which reads a split key's marker, then deletes) and the steps of the
// hot-key protocol (WithHotKeys) go through the same bound.
func TestDefaultClientBudgetWithResends(t *testing.T) {
	addr := silentServer(t)
	client := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { client.Close() })
	s := newStore(client, WithTimeout(100*time.Millisecond), WithoutCoalescing())
	calls := append(directCalls[:len(directCalls):len(directCalls)], []struct {
		name string
		call func(s *Store, key string) error
	}{
		{"reset/gcra", func(s *Store, key string) error { return s.Reset(context.Background(), "r", key, stores.GCRA) }},
		{"reset/window", func(s *Store, key string) error {
			return s.Reset(context.Background(), "r", key, stores.FixedWindow)
		}},
		{"hot/marker", func(s *Store, key string) error {
			ctx, cancel := s.hotBudget(context.Background()) // as hottake.go calls it
			defer cancel()
			_, _, err := s.readMarker(ctx, s.now(), key)
			return err
		}},
		{"hot/part", func(s *Store, key string) error {
			ctx, cancel := s.hotBudget(context.Background())
			defer cancel()
			return s.emptyPart(ctx, s.now(), key, 1000)
		}},
	}...)
	for _, c := range calls {
		done := make(chan error, 1)
		go func() { done <- c.call(s, "k") }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s on a silent server: %v, want a deadline error", c.name, err)
			}
		case <-time.After(3 * time.Second): // the budget is 100ms; the client alone reads for 5s
			t.Fatalf("%s on a silent server did not return by its budget", c.name)
		}
	}
}
