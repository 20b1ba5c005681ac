package ratelimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// costExceeded answers a request whose cost is more than its rule's limit
// allows at once. Such a request can never be admitted, at any time, so it
// is denied without asking the store (nothing is consumed) and without
// Retry-After: waiting cannot help. The response is the denied handler's,
// if set (the Decision's Result has a zero RetryAfter), or a 429 whose
// problem+json body says that the cost exceeds the limit. A shadow rule
// only reports it.
func (l *Limiter) costExceeded(w http.ResponseWriter, r *http.Request, ru *rule, req *Request) (func(), bool) {
	res := Result{Limit: req.Limit}
	l.observe(Event{Rule: ru.Name, KeyKind: ru.KeyKind, Outcome: OutcomeCostExceeded, Result: res,
		Err: fmt.Errorf("%w: cost %d exceeds the capacity %d of rule %q", ErrInvalidRequest, req.Cost, req.Limit.Capacity(), ru.Name), Request: r})
	if ru.Shadow {
		return noop, true
	}
	if l.denied != nil {
		d := &Decision{Rule: ru.Name, Result: res, Violated: []string{ru.Name}}
		l.denied.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
		return noop, false
	}
	h := w.Header()
	h[hdrContentType] = []string{"application/problem+json"}
	h[hdrCacheControl] = []string{"no-store"}
	w.WriteHeader(http.StatusTooManyRequests)
	w.Write(costProblemBody(ru.Name, req.Cost, req.Limit.Capacity()))
	return noop, false
}

// costProblemBody is the RFC 9457 body of a request that costs more than
// the policy allows at once.
func costProblemBody(name string, cost, capacity int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"` + ProblemType + `","title":"Too Many Requests","status":429,"detail":`)
	b.WriteString(strconv.Quote(fmt.Sprintf("The request costs %d units but the policy %q allows at most %d at once; it cannot be admitted, so do not retry it.", cost, name, capacity)))
	b.WriteString(`,"violated-policies":[` + strconv.Quote(name) + "]}\n")
	return []byte(b.String())
}
