package ratelimitgrpc

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestStatusMapsEveryHTTPStatus(t *testing.T) {
	tests := []struct {
		code int
		want codes.Code
	}{
		{0, codes.ResourceExhausted}, // a denied handler that wrote nothing
		{200, codes.ResourceExhausted},
		{429, codes.ResourceExhausted},
		{503, codes.Unavailable},
		{400, codes.InvalidArgument},
		{401, codes.Unauthenticated},
		{403, codes.PermissionDenied},
		{504, codes.DeadlineExceeded},
		{500, codes.Internal},
		{502, codes.Internal},
		{418, codes.FailedPrecondition},
	}
	for _, tt := range tests {
		w := &recorder{code: tt.code}
		if got := status.Code(w.status()); got != tt.want {
			t.Errorf("HTTP %d: %v, want %v", tt.code, got, tt.want)
		}
	}
}

// Retry-After values the limiter never writes (a denied handler's) give no
// RetryInfo rather than a wrong one.
func TestStatusIgnoresBadRetryAfter(t *testing.T) {
	for _, v := range []string{"", "soon", "-1", "1.5", "Wed, 21 Oct 2015 07:28:00 GMT", "99999999999999999999", "31536001"} {
		w := &recorder{code: 429, header: http.Header{"Retry-After": {v}}}
		st, _ := status.FromError(w.status())
		if st.Code() != codes.ResourceExhausted || len(st.Details()) != 0 {
			t.Errorf("Retry-After %q: %v with details %v", v, st.Code(), st.Details())
		}
	}
	w := &recorder{code: 429, header: http.Header{"Retry-After": {"31536000"}}}
	st, _ := status.FromError(w.status())
	if ri, ok := st.Details()[0].(*errdetails.RetryInfo); !ok || ri.GetRetryDelay().AsDuration() != 365*24*time.Hour {
		t.Errorf("a year: %v", st.Details())
	}
}

// QuotaFailure comes only from the limiter's own problem body; a body that
// is not one, or is cut short, gives none.
func TestQuotaFailureOnlyFromProblemBody(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	tests := []struct {
		name   string
		header http.Header
		body   string
		want   []string
	}{
		{"limiter", problem, `{"status":429,"violated-policies":["a","b"]}`, []string{"a", "b"}},
		{"text", http.Header{"Content-Type": {"text/plain"}}, `{"violated-policies":["a"]}`, nil},
		{"no list", problem, `{"status":429}`, nil},
		{"garbage", problem, `{"violated-policies":[`, nil},
		{"huge", problem, `{"violated-policies":["a"],"x":"` + strings.Repeat("x", 2*maxBody) + `"}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &recorder{header: tt.header}
			w.WriteHeader(429)
			w.Write([]byte(tt.body))
			if len(w.body) > maxBody {
				t.Fatalf("kept %d bytes of body", len(w.body))
			}
			var got []string
			if qf := quotaFailure(w.header, w.body); qf != nil {
				for _, v := range qf.GetViolations() {
					got = append(got, v.GetQuotaId())
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("violations %v, want %v", got, tt.want)
			}
		})
	}
}
