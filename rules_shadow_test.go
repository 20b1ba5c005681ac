package ratelimit_test

import (
	"net/http"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

// TestShadowRuleWithInvalidLimitNeverBlocks: a shadow rule whose LimitFunc
// yields an invalid limit neither blocks traffic (alone) nor writes an
// error in front of the real response (beside an enforced rule).
func TestShadowRuleWithInvalidLimitNeverBlocks(t *testing.T) {
	bad := func(*http.Request) (ratelimit.Limit, bool) { return ratelimit.Limit{}, true }
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("handler ran")) })
	shadow := ratelimit.Rule{Name: "new", LimitFunc: bad, Key: ratelimit.ByIP(), Shadow: true}
	for name, rules := range map[string][]ratelimit.Rule{
		"shadow only": {shadow},
		"enforced and shadow": {
			{Name: "ip", Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP()},
			shadow,
		},
	} {
		h := ratelimit.NewRules(rules)(ok)
		for i := range 3 {
			code, body, p := serve(h, ratelimittest.NewRequest("GET", "/", ""))
			if p != nil || code != http.StatusOK || body != "handler ran" {
				t.Errorf("%s, request %d: %d %q (panic %v), want 200 from the handler alone", name, i+1, code, body, p)
			}
		}
	}
}
