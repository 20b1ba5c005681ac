package ratelimitgrpc

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// maxBody is the most of a denial's body kept: enough for the problem
// document naming a Limiter's 16 violated policies at most.
const maxBody = 4 << 10

// recorder is the http.ResponseWriter given to Verdict.Write: it keeps the
// fields, the status and the start of the body the limiter writes to
// refuse a call. For an admitted call it holds the verdict, whose Done
// releases what the call holds, and reports the handler's outcome
// (outcome.go) to it.
type recorder struct {
	header  http.Header
	code    int
	body    []byte
	verdict ratelimit.Verdict // the limiter's decision on the call
	outcome int               // the handler's outcome as an HTTP status, once it returned
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, b[:min(len(b), maxBody-len(w.body))]...)
	return len(b), nil
}

// rateLimitFields are the header fields sent as response metadata, in
// http.Header's canonical form.
var rateLimitFields = []string{
	"Ratelimit", "Ratelimit-Policy", "Retry-After",
	"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset",
}

// responseMetadata returns the rate-limit fields of h as metadata, or nil.
// Other fields the limiter writes for HTTP (Content-Type, Cache-Control)
// have no place in gRPC metadata and are dropped.
func responseMetadata(h http.Header) metadata.MD {
	var md metadata.MD
	for _, k := range rateLimitFields {
		if vs := h[k]; len(vs) > 0 {
			if md == nil {
				md = metadata.MD{}
			}
			md[strings.ToLower(k)] = vs
		}
	}
	return md
}

// status returns the gRPC status of the response the limiter wrote to
// refuse a call; see statusFor.
func (w *recorder) status() error {
	retry, hasRetry := retryAfter(w.header)
	code, msg := statusFor(w.code)
	st := status.New(code, msg)
	var details []protoadapt.MessageV1
	if hasRetry && (code == codes.ResourceExhausted || code == codes.Unavailable) {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(retry)})
	}
	if code == codes.ResourceExhausted {
		if qf := quotaFailure(w.header, w.body); qf != nil {
			details = append(details, qf)
		}
	}
	if len(details) > 0 {
		if withDetails, err := st.WithDetails(details...); err == nil {
			st = withDetails
		}
	}
	return st.Err()
}

// statusFor maps the HTTP status of a refusal to a gRPC code: 429 to
// ResourceExhausted, 503 to Unavailable, 400 to InvalidArgument, 401 to
// Unauthenticated, 403 to PermissionDenied, 504 to DeadlineExceeded and
// other 5xx to Internal. A denied handler (ratelimit.WithDeniedHandler)
// that writes a status below 400, or none, still refused the call: it is
// ResourceExhausted too. Other 4xx are FailedPrecondition.
func statusFor(code int) (codes.Code, string) {
	switch {
	case code == http.StatusTooManyRequests || code < 400:
		return codes.ResourceExhausted, "ratelimit: rate limit exceeded"
	case code == http.StatusServiceUnavailable:
		return codes.Unavailable, "ratelimit: the rate limiter is unavailable"
	case code == http.StatusBadRequest:
		return codes.InvalidArgument, "ratelimit: the call carries no usable rate-limit key"
	case code == http.StatusUnauthorized:
		return codes.Unauthenticated, "ratelimit: unauthenticated"
	case code == http.StatusForbidden:
		return codes.PermissionDenied, "ratelimit: permission denied"
	case code == http.StatusGatewayTimeout:
		return codes.DeadlineExceeded, "ratelimit: the rate limiter timed out"
	case code >= 500:
		return codes.Internal, "ratelimit: the rate limit is misconfigured or failed (HTTP " + strconv.Itoa(code) + ")"
	}
	return codes.FailedPrecondition, "ratelimit: refused (HTTP " + strconv.Itoa(code) + ")"
}

// retryAfter reads Retry-After, which the limiter writes as delay-seconds.
func retryAfter(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > int64(365*24*time.Hour/time.Second) {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// quotaFailure names the violated policies listed in the limiter's problem
// body, or returns nil when the body is not the limiter's (a denied
// handler's response).
func quotaFailure(h http.Header, body []byte) *errdetails.QuotaFailure {
	if !strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
		return nil
	}
	var problem struct {
		Violated []string `json:"violated-policies"`
	}
	if json.Unmarshal(body, &problem) != nil || len(problem.Violated) == 0 {
		return nil
	}
	qf := &errdetails.QuotaFailure{}
	for _, name := range problem.Violated {
		qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
			Subject:     "policy:" + name,
			QuotaId:     name,
			Description: fmt.Sprintf("rate limit policy %q exceeded", name),
		})
	}
	return qf
}
