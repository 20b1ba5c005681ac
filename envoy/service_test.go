package envoy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/stores/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const apiYAML = `domain: api
descriptors:
  - key: client
    rate_limit:
      name: per-client
      unit: minute
      requests_per_unit: 10
  - key: path
    rate_limit:
      unit: minute
      requests_per_unit: 100
`

func newMemoryService(t *testing.T, yaml string, opts ...Option) (*Service, *ratelimittest.Clock) {
	t.Helper()
	clock := ratelimittest.NewClock(replayStart)
	svc, err := New(compileYAML(t, "test.yaml", yaml), memory.New(memory.WithClock(clock)), append([]Option{WithClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return svc, clock
}

func codesOf(resp *pb.RateLimitResponse) []pb.RateLimitResponse_Code {
	out := []pb.RateLimitResponse_Code{resp.OverallCode}
	for _, s := range resp.Statuses {
		out = append(out, s.Code)
	}
	return out
}

func mustCall(t *testing.T, svc *Service, req *pb.RateLimitRequest) *pb.RateLimitResponse {
	t.Helper()
	resp, err := svc.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The reference counts with INCRBY: hits past the limit are charged too,
// so that after an over-limit call a smaller one is still over until the
// window ends. WithReferenceWindows does the same; GCRA charges nothing
// for a denied descriptor.
func TestReferenceWindowsChargeHitsPastTheLimitUntilTheWindowEnds(t *testing.T) {
	type step struct {
		hits   uint32
		code   pb.RateLimitResponse_Code
		remain uint32
	}
	for _, tc := range []struct {
		name  string
		opts  []Option
		steps []step
	}{
		// 8 + 5 = 13 past 10: over, and 15 after 2 more, still over.
		{"reference windows", []Option{WithReferenceWindows()}, []step{{8, ok, 2}, {5, over, 0}, {2, over, 0}}},
		// The 5 denied were not charged: 2 remain, and 2 more fit.
		{"gcra", nil, []step{{8, ok, 2}, {5, over, 2}, {2, ok, 0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc, clock := newMemoryService(t, apiYAML, tc.opts...)
			for i, s := range tc.steps {
				resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, s.hits))
				if st := resp.Statuses[0]; st.Code != s.code || st.LimitRemaining != s.remain {
					t.Fatalf("step %d (hits %d): %v remaining %d, want %v remaining %d", i, s.hits, st.Code, st.LimitRemaining, s.code, s.remain)
				}
			}
			if !t.Failed() && tc.name == "reference windows" {
				clock.Set(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)) // the next minute's window
				resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
				if st := resp.Statuses[0]; st.Code != ok || st.LimitRemaining != 9 || st.DurationUntilReset.GetSeconds() != 60 {
					t.Fatalf("new window: %v", st)
				}
			}
		})
	}
}

// A descriptor's own hits_addend wins over the request's; zero checks
// without charging.
func TestDescriptorHitsAddendOverridesTheRequests(t *testing.T) {
	svc, _ := newMemoryService(t, apiYAML)
	req := request("api", [][]string{{"client", "a"}, {"path", "/x"}}, 3)
	req.Descriptors[1].HitsAddend = wrapperspb.UInt64(0)
	resp := mustCall(t, svc, req)
	if r0, r1 := resp.Statuses[0].LimitRemaining, resp.Statuses[1].LimitRemaining; r0 != 7 || r1 != 100 {
		t.Fatalf("remaining %d and %d, want 7 (3 hits of the request) and 100 (hits_addend 0 charges nothing)", r0, r1)
	}
}

// Global shadow mode answers OK overall and still reports each descriptor
// over its limit, as the reference's SHADOW_MODE.
func TestGlobalShadowModeAnswersOKAndKeepsTheStatuses(t *testing.T) {
	svc, _ := newMemoryService(t, apiYAML, WithShadowMode())
	mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 10))
	resp := mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
	if got := codesOf(resp); got[0] != ok || got[1] != over {
		t.Fatalf("codes %v, want overall OK and the descriptor OVER_LIMIT", got)
	}
	if svc.Stats().OverLimit != 1 {
		t.Fatalf("stats %+v: the shadowed denial must be counted", svc.Stats())
	}
}

// Bad requests get InvalidArgument, as a gateway's misconfiguration, and a
// service without rules Unavailable, so that Envoy's failure mode applies.
func TestBadRequestsGetClearCodes(t *testing.T) {
	svc, _ := newMemoryService(t, apiYAML)
	ctx := context.Background()
	for _, tc := range []struct {
		req  *pb.RateLimitRequest
		code codes.Code
	}{
		{&pb.RateLimitRequest{Descriptors: []*rlpb.RateLimitDescriptor{{}}}, codes.InvalidArgument},
		{&pb.RateLimitRequest{Domain: "api"}, codes.InvalidArgument},
	} {
		if _, err := svc.ShouldRateLimit(ctx, tc.req); status.Code(err) != tc.code {
			t.Errorf("%v: %v, want %v", tc.req, err, tc.code)
		}
	}
	empty, err := New(nil, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.ShouldRateLimit(ctx, request("api", [][]string{{"client", "a"}}, 1)); status.Code(err) != codes.Unavailable {
		t.Errorf("no rules: %v, want Unavailable", err)
	}
	// An unknown domain limits nothing.
	resp := mustCall(t, svc, request("nope", [][]string{{"client", "a"}}, 1))
	if resp.OverallCode != ok || resp.Statuses[0].CurrentLimit != nil {
		t.Errorf("unknown domain: %v", resp)
	}
}

// A descriptor may carry its own limit (Envoy's limit override): it
// applies instead of the configured one.
func TestDescriptorLimitOverrideApplies(t *testing.T) {
	svc, _ := newMemoryService(t, apiYAML)
	req := request("api", [][]string{{"client", "a"}}, 2)
	req.Descriptors[0].Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: 1} // 2 a second
	if resp := mustCall(t, svc, req); resp.OverallCode != ok || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 {
		t.Fatalf("first: %v", resp)
	}
	req.HitsAddend = 1
	if resp := mustCall(t, svc, req); resp.OverallCode != over {
		t.Fatalf("second: %v, want OVER_LIMIT under the override's 2 a second", resp)
	}
}

// failingStore fails every call, as a store whose backend is down.
type failingStore struct{}

func (failingStore) Take(context.Context, stores.Request) (ratelimit.Result, error) {
	return ratelimit.Result{}, ratelimit.ErrStoreUnavailable
}

func (failingStore) TakeAll(context.Context, []stores.Request, []ratelimit.Result) error {
	return ratelimit.ErrStoreUnavailable
}
func (failingStore) Return(context.Context, stores.Request) error {
	return ratelimit.ErrStoreUnavailable
}

// Each failure policy gives the gateway what it documents when the store
// fails.
func TestFailurePoliciesWhenTheStoreFails(t *testing.T) {
	ctx := context.Background()
	req := request("api", [][]string{{"client", "a"}}, 6)
	for _, tc := range []struct {
		policy FailurePolicy
		code   pb.RateLimitResponse_Code
		grpc   codes.Code
	}{
		{FailOpen(), ok, codes.OK},
		{FailClosed(), over, codes.OK},
		{FailWithError(), 0, codes.Unavailable},
		// Half of 10 a minute per instance: 6 hits do not fit.
		{FallbackTo(memory.New()).DividedBy(2), over, codes.OK},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			svc, err := New(compileYAML(t, "api.yaml", apiYAML), failingStore{}, WithFailurePolicy(tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := svc.ShouldRateLimit(ctx, req)
			if status.Code(err) != tc.grpc {
				t.Fatalf("error %v, want code %v", err, tc.grpc)
			}
			if err == nil && resp.OverallCode != tc.code {
				t.Fatalf("overall %v, want %v", resp.OverallCode, tc.code)
			}
			if s := svc.Stats(); s.StoreErrors != 1 {
				t.Fatalf("stats %+v, want one store error", s)
			}
		})
	}
}

// An invalid store answer never becomes a silent pass in tests: the
// failing store's error is wrapped with the descriptor's name.
func TestStoreErrorNamesTheDescriptor(t *testing.T) {
	svc, err := New(compileYAML(t, "api.yaml", apiYAML), failingStore{}, WithFailurePolicy(FailWithError()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.ShouldRateLimit(context.Background(), request("api", [][]string{{"client", "a"}}, 1))
	if !strings.Contains(status.Convert(err).Message(), "api.client") {
		t.Fatalf("error %v does not name the descriptor api.client", err)
	}
}

type (
	ratelimitResponse = pb.RateLimitResponse
	ratelimitCode     = pb.RateLimitResponse_Code
)

// zeroHits sets hits_addend 0 on each of req's descriptors.
func zeroHits(req *pb.RateLimitRequest) *pb.RateLimitRequest {
	for _, d := range req.Descriptors {
		d.HitsAddend = wrapperspb.UInt64(0)
	}
	return req
}

// A nil *memory.Store passes a store != nil test once in an interface: New
// refuses it as the store, and FallbackTo as the fallback, rather than the
// first call (or the first store failure, in an outage) crashing the
// service.
func TestNewRefusesANilStorePointer(t *testing.T) {
	var nilStore *memory.Store
	if _, err := New(compileYAML(t, "api.yaml", apiYAML), nilStore); err == nil {
		t.Error("New with a nil *memory.Store: no error")
	}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("FallbackTo a nil *memory.Store: no panic")
			}
		}()
		FallbackTo(nilStore)
	}()
}

// A descriptor in shadow mode only reports, so a store failure on it must
// not fail the whole call under FailWithError (which would deny the request
// at a gateway with failure_mode_deny): it is answered as under FailOpen.
// The same holds for every descriptor of a service in shadow mode.
func TestShadowDescriptorsNeverFailTheCallUnderFailWithError(t *testing.T) {
	const shadowYAML = `domain: api
descriptors:
  - key: client
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
`
	req := request("api", [][]string{{"client", "a"}}, 1)
	for _, tc := range []struct {
		name string
		yaml string
		opts []Option
	}{
		{"shadow descriptor", shadowYAML, nil},
		{"shadow service", apiYAML, []Option{WithShadowMode()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{WithFailurePolicy(FailWithError())}, tc.opts...)
			svc, err := New(compileYAML(t, "api.yaml", tc.yaml), failingStore{}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := svc.ShouldRateLimit(context.Background(), req)
			if err != nil {
				t.Fatalf("the call failed with %v; a shadowed failure must only report", err)
			}
			if resp.OverallCode != ok {
				t.Fatalf("overall %v, want OK", resp.OverallCode)
			}
		})
	}
}

// blockingStore holds every Take until release is closed, counting the
// Takes in flight.
type blockingStore struct {
	failingStore
	release  chan struct{}
	inFlight atomic.Int32
}

func (b *blockingStore) Take(context.Context, stores.Request) (ratelimit.Result, error) {
	b.inFlight.Add(1)
	<-b.release
	return ratelimit.Result{Allowed: true, Limit: ratelimit.PerMinute(1000), Remaining: 1}, nil
}

// A request is not trusted to be small: one carrying thousands of
// descriptors is decided by a bounded number of goroutines, not one each.
func TestManyDescriptorsAreDecidedByBoundedGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{release: make(chan struct{})}
		svc, err := New(compileYAML(t, "api.yaml", apiYAML), store)
		if err != nil {
			t.Fatal(err)
		}
		descs := make([][]string, 2000)
		for i := range descs {
			descs[i] = []string{"client", fmt.Sprint(i)}
		}
		done := make(chan *pb.RateLimitResponse)
		go func() { done <- mustCall(t, svc, request("api", descs, 1)) }()
		synctest.Wait()
		if n := store.inFlight.Load(); n != maxParallelDescriptors {
			t.Errorf("%d descriptors in flight at once, want %d", n, maxParallelDescriptors)
		}
		close(store.release)
		resp := <-done
		if len(resp.Statuses) != len(descs) || int(store.inFlight.Load()) != len(descs) {
			t.Fatalf("%d statuses, %d takes, want %d each", len(resp.Statuses), store.inFlight.Load(), len(descs))
		}
	})
}
