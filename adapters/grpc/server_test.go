package ratelimitgrpc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service has a unary method and a bidirectional stream, both
// taking and returning wrapperspb.StringValue. The value sent drives the
// handler: "panic" panics, "block" reports on entered and waits for
// proceed, "work" takes workTime unless the RPC's context ends first (as a
// handler calling a dependency with it would), "wait" waits for the RPC's
// context to end, "code N" fails with gRPC code N, "error" with an error
// that is no status, "timeout" with context.DeadlineExceeded (its own
// deadline: a dependency's call timed out); anything else is echoed.
type service struct {
	entered chan struct{}
	proceed chan struct{}
}

func newService() *service {
	return &service{entered: make(chan struct{}, 16), proceed: make(chan struct{})}
}

// workTime is how long a "work" call takes.
const workTime = 10 * time.Millisecond

func (s *service) handle(ctx context.Context, v string) (string, error) {
	var code codes.Code
	if _, err := fmt.Sscanf(v, "code %d", &code); err == nil {
		return "", status.Error(code, "the handler failed with "+code.String())
	}
	switch v {
	case "panic":
		panic("handler panicked")
	case "block":
		s.entered <- struct{}{}
		<-s.proceed
	case "work":
		t := time.NewTimer(workTime)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return "", status.FromContextError(ctx.Err()).Err()
		}
	case "wait":
		<-ctx.Done()
		return "", status.FromContextError(ctx.Err()).Err()
	case "error":
		return "", errors.New("not a status")
	case "timeout":
		return "", fmt.Errorf("a dependency: %w", context.DeadlineExceeded)
	}
	return v, nil
}

// register registers s as service name with methods unary and stream,
// through a hand-written ServiceDesc: no generated code.
func (s *service) register(srv *grpc.Server, name, unary, stream string) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: unary,
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, req any) (any, error) {
					v, err := s.handle(ctx, req.(*wrapperspb.StringValue).GetValue())
					return wrapperspb.String(v), err
				}
				if ic == nil {
					return h(ctx, in)
				}
				info := &grpc.UnaryServerInfo{Server: s, FullMethod: "/" + name + "/" + unary}
				return ic(ctx, in, info, h)
			},
		}},
		Streams: []grpc.StreamDesc{{
			StreamName:    stream,
			ServerStreams: true,
			ClientStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				for {
					in := new(wrapperspb.StringValue)
					if err := ss.RecvMsg(in); err == io.EOF {
						return nil
					} else if err != nil {
						return err
					}
					v, err := s.handle(ss.Context(), in.GetValue())
					if err != nil {
						return err
					}
					if err := ss.SendMsg(wrapperspb.String(v)); err != nil {
						return err
					}
				}
			},
		}},
	}, s)
}

const (
	ping = "/test.Echo/Ping"
	chat = "/test.Echo/Chat"
	pong = "/test.Other/Pong" // another method, for per-method keys
)

// recoverUnary and recoverStream turn a handler's panic into Internal, as
// a production recovery interceptor would; they run outside the limiter.
func recoverUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return h(ctx, req)
}

func recoverStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = status.Errorf(codes.Internal, "panic: %v", p)
		}
	}()
	return h(srv, ss)
}

// userKey holds the user that authUnary and authStream "authenticated":
// the x-user metadata, a stand-in for a verified credential.
type userKey struct{}

func authenticate(ctx context.Context) context.Context {
	if u := metadata.ValueFromIncomingContext(ctx, "x-user"); len(u) == 1 {
		return context.WithValue(ctx, userKey{}, u[0])
	}
	return ctx
}

func authUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(authenticate(ctx), req)
}

func authStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, ctxStream{ss, authenticate(ss.Context())})
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// env is a gRPC server with the interceptors of one limiter, the test
// service (as test.Echo and as health look-alikes) and the real health
// service, reached over bufconn.
type env struct {
	t     *testing.T
	srv   *grpc.Server
	svc   *service
	ended chan struct{} // a stream's interceptors, the limiter's included, returned
}

// streamEnded, the outermost stream interceptor, reports on e.ended when a
// stream has ended on the server, after the limiter released its slot.
func (e *env) streamEnded(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	defer func() {
		select {
		case e.ended <- struct{}{}:
		default: // no test is waiting for this many
		}
	}()
	return h(srv, ss)
}

func newEnv(t *testing.T, l *ratelimit.Limiter, opts ...ratelimitgrpc.Option) *env {
	t.Helper()
	e := &env{t: t, svc: newService(), ended: make(chan struct{}, 64)}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(recoverUnary, authUnary, ratelimitgrpc.UnaryServerInterceptor(l, opts...)),
		grpc.ChainStreamInterceptor(e.streamEnded, recoverStream, authStream, ratelimitgrpc.StreamServerInterceptor(l, opts...)),
	)
	e.srv = srv
	e.svc.register(srv, "test.Echo", "Ping", "Chat")
	e.svc.register(srv, "test.Other", "Pong", "Chat") // "/test.Other/Pong"
	// Look-alikes of the health service: other services, limited.
	e.svc.register(srv, "grpc.health.v1.HealthX", "Check", "Watch")
	e.svc.register(srv, "grpc.health.v1.health", "Check", "Watch")
	e.svc.register(srv, "evil.grpc.health.v1.Health", "Check", "Watch")
	healthpb.RegisterHealthServer(srv, health.NewServer())
	t.Cleanup(srv.Stop)
	return e
}

// dial connects to the server as a client whose connection comes from
// remote ("192.0.2.1:1234"): each client gets its own bufconn listener
// whose connections report that peer address to the server.
func (e *env) dial(remote string) *grpc.ClientConn {
	e.t.Helper()
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.dialAddr(net.TCPAddrFromAddrPort(ap))
}

func (e *env) dialAddr(remote net.Addr) *grpc.ClientConn {
	e.t.Helper()
	lis := bufconn.Listen(1 << 20)
	go e.srv.Serve(peerListener{lis, remote})
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

type peerListener struct {
	*bufconn.Listener
	remote net.Addr
}

func (l peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return peerConn{c, l.remote}, nil
}

type peerConn struct {
	net.Conn
	remote net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.remote }

// ctx bounds every call: a hang fails the test instead of the run.
func ctx(t *testing.T, md ...string) context.Context {
	c, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(c, md...)
}

// call makes a unary call with the metadata pairs md and returns the
// response header metadata.
func call(t *testing.T, conn *grpc.ClientConn, method, value string, md ...string) (metadata.MD, error) {
	t.Helper()
	var hdr metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx(t, md...), method, wrapperspb.String(value), out, grpc.Header(&hdr))
	if err == nil && out.GetValue() != value {
		t.Fatalf("%s echoed %q, want %q", method, out.GetValue(), value)
	}
	return hdr, err
}

// mustCode fails t unless err has code want.
func mustCode(t *testing.T, err error, want codes.Code) *status.Status {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != want {
		t.Fatalf("got %v, want code %v", err, want)
	}
	return st
}

// openChat opens a stream and exchanges one message, so that it is known
// to be admitted and its handler running. It returns the stream and its
// header metadata.
func openChat(t *testing.T, conn *grpc.ClientConn, md ...string) (grpc.ClientStream, metadata.MD, error) {
	t.Helper()
	return openChatCtx(t, ctx(t, md...), conn)
}

func openChatCtx(t *testing.T, c context.Context, conn *grpc.ClientConn) (grpc.ClientStream, metadata.MD, error) {
	t.Helper()
	cs, err := conn.NewStream(c, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, chat)
	if err != nil {
		return nil, nil, err
	}
	if err := cs.SendMsg(wrapperspb.String("hello")); err != nil && err != io.EOF {
		return nil, nil, err
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil {
		hdr, _ := cs.Header()
		return nil, hdr, err
	}
	hdr, err := cs.Header()
	return cs, hdr, err
}

// closeChat half-closes cs and waits until the server ended the stream.
func closeChat(t *testing.T, cs grpc.ClientStream) error {
	t.Helper()
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// header converts response metadata to the http.Header it carries.
func header(md metadata.MD) http.Header {
	h := http.Header{}
	for k, vs := range md {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

func peerAddr(i int) string { return fmt.Sprintf("198.51.100.%d:4000", i) }
