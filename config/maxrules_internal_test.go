package config

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
)

// MaxRules is maxRules for the package's external tests.
const MaxRules = maxRules

// TestMaxRulesIsTheLimitersBound: the bound Parse checks groups against is
// the one ratelimit.NewRules enforces, so that a rules file Parse accepts
// never builds a Limiter that panics, and none is refused that would build.
func TestMaxRulesIsTheLimitersBound(t *testing.T) {
	rules := func(n int) []ratelimit.Rule {
		rs := make([]ratelimit.Rule, n)
		for i := range rs {
			rs[i] = ratelimit.Rule{Name: "r" + string(rune('a'+i)), Limit: ratelimit.PerSecond(1), Key: ratelimit.Global()}
		}
		return rs
	}
	ratelimit.NewRules(rules(maxRules))(http.NotFoundHandler()) // must not panic
	defer func() {
		if recover() == nil {
			t.Fatalf("ratelimit.NewRules took %d rules; config's maxRules (%d) is below the Limiter's bound", maxRules+1, maxRules)
		}
	}()
	ratelimit.NewRules(rules(maxRules + 1))
}
