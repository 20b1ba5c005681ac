// Package admin serves an HTTP endpoint to inspect and reset the keys of a
// rate limiter's rules, for operators: to see why a client is limited, or to
// lift a block early.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/internal/problem"
)

// Inspector reads and resets one key of one rule: a ratelimit.Limiter, a
// ratelimit.Reloadable (its current Limiter) and the config module's rule
// sets implement it.
type Inspector interface {
	Peek(ctx context.Context, rule, key string) (ratelimit.Result, error)
	Reset(ctx context.Context, rule, key string) error
}

// NewHandler returns an http.Handler to inspect and reset keys of the rules
// of in (a Limiter, a Reloadable, a config Watcher):
//
//	GET  ?rule=<name>&key=<key>   the key's state, as Limiter.Peek reports it
//	POST ?rule=<name>&key=<key>   Reset; 204 No Content
//
// Answers are JSON; errors are problem details (400 for a missing
// parameter, 404 for an unknown rule, 501 when the store cannot reset, 502
// when the store fails).
//
// The handler refuses a cross-origin POST from a browser with 403, as
// http.CrossOriginProtection decides it (Sec-Fetch-Site, else Origin
// against Host): a page on another site cannot make an administrator's
// browser reset a key with the administrator's cookie. Requests without
// those headers (curl, scripts) are not browsers' and pass. The handler
// does not authenticate anyone: nothing is served unless the application
// mounts it, and it must mount it behind its own authentication, since it
// lifts limits.
func NewHandler(in Inspector) http.Handler {
	if in == nil {
		panic("ratelimit: admin.NewHandler(nil)")
	}
	return handler{in: in, origin: http.NewCrossOriginProtection()}
}

type handler struct {
	in     Inspector
	origin *http.CrossOriginProtection // refuses cross-origin POSTs
}

// peekBody is the JSON answer of a GET.
type peekBody struct {
	Rule         string  `json:"rule"`
	Key          string  `json:"key"`
	Allowed      bool    `json:"allowed"`
	Limit        string  `json:"limit"`
	Remaining    int     `json:"remaining"`
	RetryAfterS  float64 `json:"retry_after_seconds"`
	ResetAfterS  float64 `json:"reset_after_seconds"`
	Capacity     int     `json:"capacity"`
	LimitRate    int     `json:"rate"`
	LimitPeriodS float64 `json:"period_seconds"`
}

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rule, key := q.Get("rule"), q.Get("key")
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		problem.Write(w, http.StatusMethodNotAllowed, "about:blank", "use GET to peek or POST to reset")
		return
	}
	if rule == "" || !q.Has("key") {
		problem.Write(w, http.StatusBadRequest, "about:blank", "the rule and key query parameters are required")
		return
	}
	if r.Method == http.MethodPost {
		if err := h.origin.Check(r); err != nil {
			problem.Write(w, http.StatusForbidden, "about:blank", "ratelimit: cross-origin reset refused: "+err.Error())
			return
		}
		if err := h.in.Reset(r.Context(), rule, key); err != nil {
			problem.Write(w, adminStatus(err), "about:blank", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	res, err := h.in.Peek(r.Context(), rule, key)
	if err != nil {
		problem.Write(w, adminStatus(err), "about:blank", err.Error())
		return
	}
	body, _ := json.Marshal(peekBody{
		Rule: rule, Key: key, Allowed: res.Allowed, Limit: res.Limit.String(), Remaining: res.Remaining,
		RetryAfterS: res.RetryAfter.Seconds(), ResetAfterS: res.ResetAfter.Seconds(),
		Capacity: res.Limit.Capacity(), LimitRate: res.Limit.Rate, LimitPeriodS: res.Limit.Period.Seconds(),
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(append(body, '\n'))
}

func adminStatus(err error) int {
	switch {
	case errors.Is(err, ratelimit.ErrUnknownRule):
		return http.StatusNotFound
	case errors.Is(err, ratelimit.ErrResetUnsupported):
		return http.StatusNotImplemented
	case errors.Is(err, ratelimit.ErrInvalidRequest), errors.Is(err, ratelimit.ErrInvalidLimit):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
