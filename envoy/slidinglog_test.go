package envoy

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const threePerSecondYAML = `domain: api
descriptors:
  - key: client
    rate_limit:
      unit: second
      requests_per_unit: 3
`

// Under SlidingLog no trailing second admits more than requests_per_unit,
// wherever the calls fall: each admitted call is back exactly a second
// later, not before (GCRA would give one back every third of a second, a
// window at the next whole second).
func TestSlidingLogAdmitsNoMoreThanTheLimitInAnyTrailingUnit(t *testing.T) {
	svc, clock := newMemoryService(t, threePerSecondYAML, WithAlgorithm(ratelimit.SlidingLog))
	clock.Advance(700 * time.Millisecond) // off any whole second
	at := time.Duration(0)
	for _, step := range []struct {
		at        time.Duration
		code      ratelimitCode
		remaining uint32
	}{
		{0, ok, 2}, {300 * time.Millisecond, ok, 1}, {600 * time.Millisecond, ok, 0},
		{601 * time.Millisecond, over, 0}, {999 * time.Millisecond, over, 0},
		{time.Second, ok, 0}, // the call at 0 has left
		{1299 * time.Millisecond, over, 0},
		{1300 * time.Millisecond, ok, 0}, // the call at 300ms has left
		{1300 * time.Millisecond, over, 0},
	} {
		clock.Advance(step.at - at)
		at = step.at
		resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
		if st := resp.Statuses[0]; resp.OverallCode != step.code || st.LimitRemaining != step.remaining {
			t.Fatalf("at %v: %v remaining %d, want %v remaining %d", step.at, resp.OverallCode, st.LimitRemaining, step.code, step.remaining)
		}
	}
}

// A sliding log keeps one timestamp per event: a limit above the bound is
// refused when the rules are put in force, at its line:col, by New,
// SetRules (which keeps the rules in force) and Watch; a limit override
// above it gets InvalidArgument.
func TestSlidingLogLimitAboveTheBoundIsRefusedAtItsLine(t *testing.T) {
	big := strings.Replace(clientYAML, "%s", "20000", 1)
	opt := WithAlgorithm(ratelimit.SlidingLog)
	_, err := New(compileYAML(t, "big.yaml", big), memory.New(), opt)
	var ce ConfigErrors
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "big.yaml:3:5") || !strings.Contains(err.Error(), "10000") {
		t.Fatalf("New: %v, want the limit refused at big.yaml:3:5 naming the bound", err)
	}

	svc, _ := newMemoryService(t, threePerSecondYAML, opt)
	if err := svc.SetRules(compileYAML(t, "big.yaml", big)); err == nil {
		t.Fatal("SetRules accepted a sliding log of 20000 a minute")
	}
	if resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1)); resp.Statuses[0].CurrentLimit.RequestsPerUnit != 3 {
		t.Fatalf("after a refused SetRules: %v, want the rules in force kept", resp)
	}

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "big.yaml"), big)
	quiet := WatchOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if _, err := Watch(dir, svc, quiet); err == nil {
		t.Fatal("Watch accepted a sliding log of 20000 a minute")
	}

	req := request("api", [][]string{{"client", "a"}}, 1)
	req.Descriptors[0].Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 50000, Unit: 2}
	if _, err := svc.ShouldRateLimit(t.Context(), req); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an override of 50000 a minute: %v, want InvalidArgument", err)
	}

	if _, err := New(compileYAML(t, "big.yaml", big), memory.New()); err != nil {
		t.Fatalf("GCRA refused 20000 a minute: %v", err)
	}
}
