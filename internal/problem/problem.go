// Package problem writes the RFC 9457 problem details (application/problem+json)
// that the middleware and the admin handler answer with. It formats bodies and
// nothing else: it knows no limiter, rule or store.
package problem

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// The problem types registered by draft-ietf-httpapi-ratelimit-headers.
const (
	// QuotaExceeded is the type of a request denied by a limit.
	QuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

	// ReducedCapacity is the type of a request that cannot be served for a
	// temporary lack of capacity: an overloaded server, an unavailable limiter.
	ReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
)

// Write writes a problem response of status with type typ and detail.
func Write(w http.ResponseWriter, status int, typ, detail string) {
	WriteBody(w, status, []byte(fmt.Sprintf(`{"type":%q,"title":%q,"status":%d,"detail":%q}`+"\n", typ, http.StatusText(status), status, detail)))
}

// WriteBody writes body as a problem response of status, not to be cached.
func WriteBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(body)
}

// Denied returns the body of a 429 naming the violated policies.
func Denied(violated []string) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"` + QuotaExceeded + `","title":"Too Many Requests","status":429,`)
	b.WriteString(`"detail":"The request exceeds the rate limit; see Retry-After.","violated-policies":[`)
	for i, name := range violated {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Quote(name))
	}
	b.WriteString("]}\n")
	return []byte(b.String())
}

// NoKey returns the body of a request without a usable key, answered with
// status.
func NoKey(status int) []byte {
	return []byte(`{"type":"about:blank","title":` + strconv.Quote(http.StatusText(status)) +
		`,"status":` + strconv.Itoa(status) + `,"detail":"The request carries no usable rate-limit key."}` + "\n")
}

// CostExceeded returns the body of a 429 for a request that costs more
// than the policy name allows at once.
func CostExceeded(name string, cost, capacity int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"` + QuotaExceeded + `","title":"Too Many Requests","status":429,"detail":`)
	b.WriteString(strconv.Quote(fmt.Sprintf("The request costs %d units but the policy %q allows at most %d at once; it cannot be admitted, so do not retry it.", cost, name, capacity)))
	b.WriteString(`,"violated-policies":[` + strconv.Quote(name) + "]}\n")
	return []byte(b.String())
}
