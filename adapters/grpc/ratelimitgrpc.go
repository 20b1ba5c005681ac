// Package ratelimitgrpc adapts github.com/sluicehq/ratelimit to gRPC
// servers: unary and stream server interceptors that apply a
// ratelimit.Limiter, the same one (and the same store, rules and key
// functions) that limits your HTTP handlers.
//
//	l := ratelimit.NewLimiter(ratelimit.PerMinute(600), ratelimit.ByIP())
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(l)),
//		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor(l)),
//	)
//
// Both interceptors run the core limiter (ratelimit.Limiter.Check and Write): nothing
// about limiting, keys or failure policies is reimplemented here. A stream
// is admitted once, when it opens, not per message.
//
// # The request the limiter sees
//
// Key functions take an *http.Request, so each RPC is presented as the
// HTTP/2 request it is:
//
//   - RemoteAddr is the gRPC peer address ("192.0.2.1:51234"), so
//     ratelimit.ByIP keys by the connecting client, and ratelimit.ByClientIP
//     believes x-forwarded-for (or forwarded) metadata only from the trusted
//     proxies it lists, exactly as over HTTP. A peer that is not an IP
//     address (a Unix socket) has no IP key.
//   - Header holds the incoming metadata, so ratelimit.ByHeader,
//     ratelimit.ByAPIKey("x-api-key") and ratelimit.ByBearerToken (the
//     authorization metadata) give the same keys as for the same HTTP
//     headers. Host is the :authority.
//   - Method is POST; URL.Path and Pattern are the full method name,
//     "/pkg.Service/Method", so ratelimit.ByRoute keys by method.
//   - The context is the RPC's: its deadline bounds the store call, and
//     values your earlier interceptors stored (an authenticated user for
//     ratelimit.ByUser) are there.
//
// The full method name comes from the client. gRPC runs interceptors only
// for registered methods, unless the server has an UnknownServiceHandler (a
// proxy): there every name a client invents reaches the stream interceptor,
// and a key built with ByRoute would let clients mint buckets.
//
// # Responses
//
// The rate-limit fields the limiter writes (RateLimit, RateLimit-Policy,
// Retry-After and the legacy X-RateLimit-* fields, whichever the limiter's
// ratelimit.HeaderStyle selects) are sent as response header metadata,
// lowercased, on allowed and denied calls. A denial ends the call before the
// handler runs, with a status mapped from the HTTP status the limiter chose:
//
//   - 429, a rule denied: codes.ResourceExhausted, with errdetails.RetryInfo
//     (the Retry-After delay, at least one second) and errdetails.QuotaFailure
//     (one violation per violated policy, QuotaId the rule name);
//   - 503, a store failed under a FailurePolicy with a Status: codes.Unavailable, with
//     RetryInfo;
//   - 400, no usable key (ratelimit.OnKeyError): codes.InvalidArgument;
//   - 500, a misconfigured limit: codes.Internal.
//
// A denied handler (ratelimit.WithDeniedHandler) that writes a status below
// 400, or none, still refused the call: ResourceExhausted. Other statuses a
// custom denied or error handler may write map to Unauthenticated (401),
// PermissionDenied (403), DeadlineExceeded (504), Internal (other 5xx) and
// FailedPrecondition (other 4xx).
//
// # Concurrency limits
//
// A ratelimit.Concurrency rule holds its slot while the unary handler runs
// or while the stream is open, and releases it when the handler returns,
// also when it panics (the panic then goes on to your recovery interceptor).
//
// # Adaptive rules
//
// An adaptive rule (ratelimit.Rule.Adaptive) holds its slot as a
// Concurrency rule does, and is told how the call ended as the HTTP status
// a handler would have written, for its classifier
// (adaptive.DefaultClassify unless set): 200 for nil, 503 for
// Unavailable, 504 for DeadlineExceeded (or context.DeadlineExceeded)
// while the client's deadline is still ahead, 429 for ResourceExhausted,
// 500 for Internal, Unknown (an error that is no status), DataLoss and a
// panic, 499 for Canceled and for a DeadlineExceeded once the client's
// deadline has passed, and 4xx for the client's errors. The RPC's deadline
// is the client's choice, not the server's overload: a call it ended is
// never counted as a drop, so that a client sending tiny deadlines cannot
// shrink a limit others share.
//
// # Settled costs
//
// Under a limiter that settles costs (ratelimit.Rule.Settled), handlers
// report a call's actual cost with ratelimit.Settle(ctx, nil, n): unary
// handlers get a context carrying what it reads, and stream handlers a
// stream whose Context does.
//
// # Carve-outs
//
// The gRPC health service (HealthMethods) is exempt by default, so that a
// load balancer's probes are never limited; WithExemptMethods replaces the
// list. Exemptions match the full method name exactly. The core's
// ratelimit.WithCarveOuts applies to GET and HEAD requests and so never to
// RPCs; ratelimit.WithSkip does work, with the request described above.
package ratelimitgrpc

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluicehq/ratelimit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// HealthMethods returns the methods exempt by default: those of the
// standard gRPC health service, grpc.health.v1.Health, that probes call.
// The slice is new on every call; change the exemptions with
// WithExemptMethods.
func HealthMethods() []string {
	return []string{
		"/grpc.health.v1.Health/Check",
		"/grpc.health.v1.Health/Watch",
	}
}

// An Option configures the interceptors.
type Option func(*config)

// WithExemptMethods sets the full method names ("/pkg.Service/Method") that
// are never limited, replacing HealthMethods; with no arguments nothing is
// exempt. Names are matched exactly, case included. It panics on a name
// that is not of the form "/service/method".
func WithExemptMethods(methods ...string) Option {
	exempt := make(map[string]struct{}, len(methods))
	for _, m := range methods {
		if !validMethod(m) {
			panic(fmt.Sprintf("ratelimit: ratelimitgrpc.WithExemptMethods: %q is not a full method name such as \"/pkg.Service/Method\"", m))
		}
		exempt[m] = struct{}{}
	}
	return func(c *config) { c.exempt = exempt }
}

func validMethod(m string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(m, "/"), "/")
	return strings.HasPrefix(m, "/") && ok && svc != "" && method != "" && !strings.Contains(method, "/")
}

type config struct {
	l      *ratelimit.Limiter
	exempt map[string]struct{}
}

func newConfig(fn string, l *ratelimit.Limiter, opts []Option) *config {
	if l == nil {
		panic("ratelimit: ratelimitgrpc." + fn + ": nil Limiter")
	}
	c := &config{l: l}
	WithExemptMethods(HealthMethods()...)(c)
	for _, o := range opts {
		if o == nil {
			panic("ratelimit: ratelimitgrpc." + fn + ": nil Option")
		}
		o(c)
	}
	return c
}

// UnaryServerInterceptor returns an interceptor that applies l to unary
// RPCs. Install it with grpc.ChainUnaryInterceptor, after the interceptors
// whose context values your key functions read (authentication) and inside
// your recovery interceptor. It panics if l is nil.
func UnaryServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.UnaryServerInterceptor {
	c := newConfig("UnaryServerInterceptor", l, opts)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		w, sctx, err := c.admit(ctx, info.FullMethod, func(md metadata.MD) error { return grpc.SetHeader(ctx, md) })
		if err != nil {
			return nil, err
		}
		returned := false
		defer func() { w.ended(ctx, err, returned) }() // also when the handler panics
		resp, err = handler(sctx, req)
		returned = true
		return resp, err
	}
}

// StreamServerInterceptor returns an interceptor that applies l to
// streaming RPCs, once per stream when it opens. Install it with
// grpc.ChainStreamInterceptor, as for UnaryServerInterceptor. It panics if
// l is nil.
func StreamServerInterceptor(l *ratelimit.Limiter, opts ...Option) grpc.StreamServerInterceptor {
	c := newConfig("StreamServerInterceptor", l, opts)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		rpc := ss.Context()
		w, ctx, err := c.admit(rpc, info.FullMethod, ss.SetHeader)
		if err != nil {
			return err
		}
		returned := false
		defer func() { w.ended(rpc, err, returned) }() // also when the handler panics
		if ctx != rpc {
			ss = settleStream{ss, ctx}
		}
		err = handler(srv, ss)
		returned = true
		return err
	}
}

// admit runs the limiter for one RPC. It sends the rate-limit fields with
// setHeader and returns the recorder whose ended method the caller must
// call when the RPC ends (nil for an exempt method: ended does nothing)
// and the context to serve it with (ctx, or ctx carrying what
// ratelimit.Settle needs when the limiter settles costs), or the status
// error that ends it now.
func (c *config) admit(ctx context.Context, fullMethod string, setHeader func(metadata.MD) error) (*recorder, context.Context, error) {
	if _, ok := c.exempt[fullMethod]; ok {
		return nil, ctx, nil
	}
	w := &recorder{header: make(http.Header, 4)} // the fields of a denial
	// One path for every limiter: the verdict's Done reads the outcome from
	// w, the writer given to Write, and its context carries what
	// Settle needs when the limiter settles costs.
	w.verdict = c.l.Check(newRequest(ctx, fullMethod))
	w.verdict.Write(w)
	ok := w.verdict.Allowed()
	if ok {
		ctx = w.verdict.Context(ctx)
	}
	if md := responseMetadata(w.header); md != nil {
		// It fails only once headers were sent, which no handler has
		// done yet: the call goes on without the fields.
		_ = setHeader(md)
	}
	if ok {
		return w, ctx, nil
	}
	return nil, nil, w.status()
}

// settleStream is a stream whose context carries what
// ratelimit.Settle needs.
type settleStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s settleStream) Context() context.Context { return s.ctx }
