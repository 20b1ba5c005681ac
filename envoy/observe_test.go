package envoy

import (
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/stores/memory"
)

type recorder struct {
	mu     sync.Mutex
	events []ratelimit.Event
}

func (r *recorder) Observe(e ratelimit.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) outcomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Rule+":"+e.Outcome.String())
	}
	return out
}

// Every descriptor's decision reaches the observers, named after its
// limit, as a Limiter's rules' do: what the Prometheus and OpenTelemetry
// observers count.
func TestObserverSeesEveryDescriptorsDecision(t *testing.T) {
	const yaml = apiYAML + `  - key: soft
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 1
`
	rec := &recorder{}
	svc, _ := newMemoryService(t, yaml, WithObserver(rec))
	mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 10))
	mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1))
	mustCall(t, svc, request("api", [][]string{{"soft", "s"}}, 2))
	mustCall(t, svc, request("api", [][]string{{"path", "/x"}}, 101))
	want := []string{"per-client:allowed", "per-client:denied", "api.soft:cost_exceeded", "api.path:cost_exceeded"}
	if got := rec.outcomes(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	mustCall(t, svc, request("api", [][]string{{"soft", "s"}}, 1))
	mustCall(t, svc, request("api", [][]string{{"soft", "s"}}, 1))
	if got := rec.outcomes()[4:]; !slices.Equal(got, []string{"api.soft:allowed", "api.soft:shadow_denied"}) {
		t.Fatalf("shadow events %v", got)
	}

	rec = &recorder{}
	for _, p := range []FailurePolicy{FailOpen(), FallbackTo(memory.New())} {
		failing, err := New(compileYAML(t, "api.yaml", apiYAML), failingStore{}, WithFailurePolicy(p), WithObserver(rec))
		if err != nil {
			t.Fatal(err)
		}
		mustCall(t, failing, request("api", [][]string{{"client", "a"}}, 1))
	}
	want = []string{"per-client:store_error", "per-client:fallback", "per-client:allowed"}
	if got := rec.outcomes(); !slices.Equal(got, want) {
		t.Fatalf("failure events %v, want %v", got, want)
	}
}
