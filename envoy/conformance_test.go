package envoy

import (
	"context"
	"fmt"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// replayStart is the frozen time of the replays: 30.25 s into a minute, so
// that duration_until_reset differs from the unit for every unit but the
// second.
var replayStart = time.Date(2026, 1, 1, 0, 0, 30, 250_000_000, time.UTC)

func request(domain string, descs [][]string, hits uint32) *pb.RateLimitRequest {
	req := &pb.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, kv := range descs {
		d := &rlpb.RateLimitDescriptor{}
		for i := 0; i+1 < len(kv); i += 2 {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// replay makes the example's calls on client and checks each answer
// against the reference's. It reports the first difference of each call.
func replay(t *testing.T, client pb.RateLimitServiceClient, ex example, now func() time.Time, checkReset bool) {
	t.Helper()
	for n, c := range ex.calls {
		for rep := range max(1, c.times) {
			resp, err := client.ShouldRateLimit(context.Background(), request(ex.domain, c.descs, c.hits))
			if err != nil {
				t.Fatalf("call %d.%d: %v", n, rep, err)
			}
			if err := matches(resp, c, now, checkReset); err != nil {
				t.Errorf("call %d.%d %v: %v\n%v", n, rep, c.descs, err, resp)
				return
			}
		}
	}
}

func matches(resp *pb.RateLimitResponse, c call, now func() time.Time, checkReset bool) error {
	if resp.OverallCode != c.want {
		return fmt.Errorf("overall %v, want %v", resp.OverallCode, c.want)
	}
	if len(resp.Statuses) != len(c.descs) {
		return fmt.Errorf("%d statuses for %d descriptors", len(resp.Statuses), len(c.descs))
	}
	for i, st := range resp.Statuses {
		if st.Code != c.codes[i] {
			return fmt.Errorf("descriptor %d: %v, want %v", i, st.Code, c.codes[i])
		}
		if c.remain != nil && st.LimitRemaining != c.remain[i] {
			return fmt.Errorf("descriptor %d: limit_remaining %d, want %d", i, st.LimitRemaining, c.remain[i])
		}
		limited := c.limited == nil || c.limited[i]
		if (st.CurrentLimit != nil) != limited {
			return fmt.Errorf("descriptor %d: current_limit %v, want one: %t", i, st.CurrentLimit, limited)
		}
		if checkReset && st.CurrentLimit != nil {
			div, _ := unitSeconds(st.CurrentLimit.Unit.String())
			if want := div - now().Unix()%div; st.DurationUntilReset.GetSeconds() != want {
				return fmt.Errorf("descriptor %d: duration_until_reset %v, want %ds", i, st.DurationUntilReset, want)
			}
		}
	}
	return nil
}

func compileYAML(t testing.TB, name, yaml string) *Rules {
	t.Helper()
	f, err := ParseFile(name, []byte(yaml))
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	rules, err := Compile(f)
	if err != nil {
		t.Fatalf("compile %s: %v", name, err)
	}
	return rules
}

// TestReferenceExamplesOnRedisGiveTheReferenceAnswers replays each of the
// reference's documented configuration examples over gRPC against the
// service on a real Redis, with the reference's windows and with GCRA:
// with time frozen each gives the reference's codes and remaining counts
// (GCRA and the sliding log differ only once time passes: they give back
// continuously, not at the window's end).
func TestReferenceExamplesOnRedisGiveTheReferenceAnswers(t *testing.T) {
	rc := startRedis(t)
	for _, mode := range []struct {
		name  string
		opts  []Option
		reset bool
	}{
		{"reference windows", []Option{WithReferenceWindows()}, true},
		{"gcra", nil, false},
		{"sliding log", []Option{WithAlgorithm(ratelimit.SlidingLog)}, false},
	} {
		for i, ex := range examples {
			t.Run(mode.name+"/"+ex.name, func(t *testing.T) {
				clock := ratelimittest.NewClock(replayStart)
				store := redisstore.New(rc, redisstore.WithClock(clock), redisstore.WithPrefix(fmt.Sprintf("conf:%s:%d:", mode.name, i)), redisstore.WithTimeout(10*time.Second))
				svc, err := New(compileYAML(t, ex.domain+".yaml", ex.yaml), store, append(mode.opts, WithClock(clock), WithFailurePolicy(FailWithError()))...)
				if err != nil {
					t.Fatal(err)
				}
				replay(t, serveGRPC(t, svc), ex, clock.Now, mode.reset)
			})
		}
	}
}

// TestReferenceExamplesInMemoryGiveTheReferenceAnswers replays the same
// examples on the memory store, the -redis-less mode of the command.
func TestReferenceExamplesInMemoryGiveTheReferenceAnswers(t *testing.T) {
	for _, alg := range []ratelimit.Algorithm{ratelimit.GCRA, ratelimit.FixedWindow, ratelimit.SlidingWindow, ratelimit.SlidingLog} {
		for _, ex := range examples {
			t.Run(alg.String()+"/"+ex.name, func(t *testing.T) {
				clock := ratelimittest.NewClock(replayStart)
				svc, err := New(compileYAML(t, ex.domain+".yaml", ex.yaml), memory.New(memory.WithClock(clock)), WithAlgorithm(alg))
				if err != nil {
					t.Fatal(err)
				}
				replay(t, serveGRPC(t, svc), ex, clock.Now, false)
			})
		}
	}
}
