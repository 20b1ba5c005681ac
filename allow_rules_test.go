package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores"
	"github.com/sluicehq/ratelimit/tiers"
)

// TestAllowWithOnlyRequestRulesIsInvalid: Allow on a limiter whose every
// rule needs a request (here a tiers.Rules rule) returns ErrInvalidRequest
// instead of panicking, and admits nothing.
func TestAllowWithOnlyRequestRulesIsInvalid(t *testing.T) {
	l := ratelimit.NewRulesLimiter(tiers.Rules("api", ratelimit.ByIP(),
		func(*http.Request) (string, bool) { return "free", true },
		map[string]tiers.Plan{"free": {Rate: ratelimit.PerMinute(10)}}))
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("Allow panicked: %v", p)
		}
	}()
	res, err := l.Allow(context.Background(), "k")
	if !errors.Is(err, ratelimit.ErrInvalidRequest) || res.Allowed {
		t.Errorf("Allow = %+v, %v; want not allowed and ErrInvalidRequest", res, err)
	}
}

// laxStore records the requests given back and accepts anything, as a
// store that does not validate them might.
type laxStore struct {
	ratelimit.Store
	returned []stores.Request
}

func (s *laxStore) Return(_ context.Context, req stores.Request) error {
	s.returned = append(s.returned, req)
	return nil
}

// TestReturnOfNegativeEventsIsInvalid: Return of a negative number of
// events is an ErrInvalidRequest error that reaches no store (a negative
// refund would consume units from a store that does not check), as AllowN
// rejects a negative n itself.
func TestReturnOfNegativeEventsIsInvalid(t *testing.T) {
	st := &laxStore{Store: ratelimittest.FailingStore{}}
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.Global(), ratelimit.WithStore(st))
	err := l.Return(context.Background(), "k", -5)
	if !errors.Is(err, ratelimit.ErrInvalidRequest) || errors.Is(err, ratelimit.ErrStoreUnavailable) {
		t.Errorf("Return(-5) = %v; want ErrInvalidRequest only", err)
	}
	if len(st.returned) != 0 {
		t.Errorf("Return(-5) reached the store with %+v", st.returned)
	}
}

// The zero Limiter (a Limiter field never built) has no rules: it must
// neither panic on the programmatic calls nor let anything through.
func TestZeroLimiterAllowsNothingAndSaysWhy(t *testing.T) {
	var l ratelimit.Limiter
	ctx := context.Background()
	isZeroErr := func(err error) bool {
		return errors.Is(err, ratelimit.ErrInvalidRequest) && strings.Contains(err.Error(), "zero Limiter")
	}
	if res, err := l.Allow(ctx, "k"); res.Allowed || !isZeroErr(err) {
		t.Errorf("Allow: %+v, %v", res, err)
	}
	if res, err := l.AllowN(ctx, "k", 0); res.Allowed || !isZeroErr(err) {
		t.Errorf("AllowN: %+v, %v", res, err)
	}
	if n, res, err := l.AllowAtMost(ctx, "k", 3); n != 0 || res.Allowed || !isZeroErr(err) {
		t.Errorf("AllowAtMost: %d, %+v, %v", n, res, err)
	}
	if err := l.Return(ctx, "k", 1); !isZeroErr(err) {
		t.Errorf("Return: %v", err)
	}
	v := l.Check(ratelimittest.NewRequest("GET", "/", "203.0.113.7:1"))
	if v.Allowed() || v.Status() != http.StatusInternalServerError || !isZeroErr(v.Err()) {
		t.Errorf("Check: allowed %v, status %d, err %v", v.Allowed(), v.Status(), v.Err())
	}
	w := httptest.NewRecorder()
	if _, ok := l.Admit(w, ratelimittest.NewRequest("GET", "/", "203.0.113.7:1")); ok || w.Code != http.StatusInternalServerError {
		t.Errorf("Admit: %v, %d", ok, w.Code)
	}
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "zero Limiter") {
			t.Errorf("Handler on the zero Limiter: recovered %v, want a panic naming it", p)
		}
	}()
	l.Handler(http.NotFoundHandler())
}
