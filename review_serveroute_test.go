package ratelimit_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// classifyRecorder returns a fixed adaptive rule of n whose Classify
// records the statuses it is given.
func classifyRecorder(n int, seen *[]int) *adaptive.Config {
	cfg := fixedAdaptive(n)
	cfg.Classify = func(r *http.Request, status int, elapsed time.Duration) adaptive.Sample {
		*seen = append(*seen, status)
		return adaptive.DefaultClassify(r, status, elapsed)
	}
	return cfg
}

// TestServeRoutePanickingHandlerIsClassifiedAs500: ServeRoute (the gin,
// echo and chi request path) classifies a next that wrote 200 and then
// panicked as a 500, as Limiter.Handler does since the panicking-handler
// fix: otherwise a request that failed fast is sampled as a fast success
// through every adapter.
func TestServeRoutePanickingHandlerIsClassifiedAs500(t *testing.T) {
	var seen []int
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: classifyRecorder(1, &seen)}})
	w := ratelimittest.NewDiscardWriter() // reports its status, as gin's writer does
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("next's panic did not reach the caller")
			}
		}()
		l.ServeRoute(w, ratelimittest.NewRequest("GET", "/", ""), "/", nil, nil, func(r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			panic("handler failed")
		})
	}()
	if len(seen) != 1 || seen[0] != http.StatusInternalServerError {
		t.Fatalf("classified statuses %v, want [500]", seen)
	}
	if st := l.Adaptive("inflight")[0]; st.InFlight != 0 {
		t.Fatalf("%d in flight after the request ended", st.InFlight)
	}
}
