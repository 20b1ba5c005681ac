package ratelimitgrpc

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// statusClientClosedRequest is 499, the status nginx and gRPC gateways give
// a request its client gave up on; adaptive.DefaultClassify makes it
// SampleAbandoned, a drop only when the server had been slow for it.
const statusClientClosedRequest = 499

// ended reports how an admitted RPC ended to the limiter: it records the
// outcome where Verdict.Done reads it (w's Status) and gives back what the
// call holds. returned is false when the handler panicked. w is nil for
// an exempt method, which holds nothing.
func (w *recorder) ended(ctx context.Context, err error, returned bool) {
	if w == nil {
		return
	}
	w.outcome = outcome(ctx, err, returned)
	w.verdict.Done()
}

// Status is the outcome of the handler of an admitted call, as an HTTP
// status (0 until it returned): the adaptive rules' classifier reads it,
// through Verdict.Done, as it reads the status an HTTP handler wrote.
func (w *recorder) Status() int { return w.outcome }

// outcome maps how a handler ended to the HTTP status an adaptive rule's
// classifier understands, so that an RPC is classified as the same
// request over HTTP would be: a panic is 500, whatever the handler sent
// before; a nil error 200; a status error (or a context error, as gRPC
// itself converts one) is mapped by httpStatus, with one exception.
// DeadlineExceeded is the server's own timeout, 504, only while the
// client's deadline has not passed and the client is still there:
// otherwise the client's deadline or cancellation ended the call (a
// handler passes its context on to what it calls, so the client's deadline
// expires there too), and it is 499 (client closed request), which a
// classifier must not count as a drop by itself (see
// adaptive.SampleAbandoned). ctx is the RPC's context, whose
// deadline is the client's grpc-timeout.
func outcome(ctx context.Context, err error, returned bool) int {
	switch {
	case !returned:
		return http.StatusInternalServerError
	case err == nil:
		return http.StatusOK
	}
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	code := st.Code()
	if code == codes.DeadlineExceeded && clientGone(ctx) {
		return statusClientClosedRequest
	}
	return httpStatus(code)
}

// clientGone reports whether the client cancelled the RPC or its deadline
// has passed: the clock is read too, as the context's timer may not have
// fired yet when a call that ran to the deadline returns.
func clientGone(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// httpStatus is the HTTP status of a gRPC code, as gRPC-HTTP gateways map
// them: Unavailable 503 (the server or a dependency is overloaded or
// down), DeadlineExceeded 504, ResourceExhausted 429 (a quota the client
// exhausted, as this package answers for a rule's 429: not the server's
// capacity), Unimplemented 501, Internal, Unknown and DataLoss 500, Canceled
// 499, and the client's errors their 4xx.
func httpStatus(c codes.Code) int {
	switch c {
	case codes.OK:
		return http.StatusOK
	case codes.Canceled:
		return statusClientClosedRequest
	case codes.InvalidArgument, codes.FailedPrecondition, codes.OutOfRange:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists, codes.Aborted:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.Unimplemented:
		return http.StatusNotImplemented
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss and codes to come
}
