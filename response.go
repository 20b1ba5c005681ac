package ratelimit

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// ProblemType is the RFC 9457 problem type of a denied request, registered
// by draft-ietf-httpapi-ratelimit-headers.
const ProblemType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// writeProblem writes an RFC 9457 response of status with problem type
// typ and detail.
func writeProblem(w http.ResponseWriter, status int, typ, detail string) {
	writeBody(w, status, []byte(fmt.Sprintf(`{"type":%q,"title":%q,"status":%d,"detail":%q}`+"\n", typ, http.StatusText(status), status, detail)))
}

// writeBody writes a problem+json response of status.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h[hdrContentType] = []string{"application/problem+json"}
	h[hdrCacheControl] = []string{"no-store"}
	w.WriteHeader(status)
	w.Write(body)
}

// failClosedType is the problem type of a fail-closed response, whichever
// status FailClosed was given: temporary-reduced-capacity, which
// draft-ietf-httpapi-ratelimit-headers registers for requests that cannot
// be served for a temporary lack of capacity, here the limiter's. Not
// quota-exceeded: the request exceeded no quota, so the body names no
// violated policies.
const failClosedType = reducedCapacityType

// problemBody returns the RFC 9457 body of a 429 naming the violated policies.
func problemBody(violated []string) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"` + ProblemType + `","title":"Too Many Requests","status":429,`)
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

// keyProblemBody is the body of a key error answered with status.
func keyProblemBody(status int) []byte {
	return []byte(`{"type":"about:blank","title":` + strconv.Quote(http.StatusText(status)) +
		`,"status":` + strconv.Itoa(status) + `,"detail":"The request carries no usable rate-limit key."}` + "\n")
}

// writeKeyProblem answers a request that ru's key function failed on.
func writeKeyProblem(w http.ResponseWriter, ru *rule, err error) {
	body := ru.keyProblem
	if b := keyProblemDetail(ru.onKeyError.rejectStatus(), err); b != nil {
		body = b
	}
	writeBody(w, ru.onKeyError.rejectStatus(), body)
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
