package ratelimitgrpc_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/adaptive"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TestClientDeadlinesDoNotShrinkTheAdaptiveLimit: one client that sends
// RPCs with a 1 ms deadline, beside 20 closed-loop clients of a service
// whose calls take 10 ms, must not bring a shared adaptive limit down: its
// deadline is its own choice, not the server's overload. Its calls were
// classified as drops (a third of the outcomes), so every window cut the
// limit and most of the other clients' calls were refused. It runs on the
// virtual clock of a synctest bubble, real gRPC over bufconn included, so
// that the 1 ms deadlines and the service time are exact.
func TestClientDeadlinesDoNotShrinkTheAdaptiveLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			clients = 20
			warmUp  = time.Second // the limit grows from 20 to 27, to fit the clients
			attack  = time.Second
			backoff = 5 * time.Millisecond // a refused client's wait before it retries
		)
		var (
			mu          sync.Mutex
			minLimit    = int(^uint(0) >> 1)
			attackStart time.Time
			before      int // the limit when the attack starts
		)
		cfg := &adaptive.Config{OnWindow: func(st adaptive.State) {
			mu.Lock()
			defer mu.Unlock()
			if !attackStart.IsZero() {
				minLimit = min(minLimit, st.Limit)
			}
		}}
		l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}})
		e := newEnv(t, l)
		start := time.Now()
		end := start.Add(warmUp + attack)

		var wg sync.WaitGroup
		calls, refused := make([]int, clients), make([]int, clients) // during the attack
		for i := range clients {
			conn := e.dial(peerAddr(i + 1))
			wg.Go(func() {
				for time.Now().Before(end) {
					attacking := !time.Now().Before(start.Add(warmUp))
					err := conn.Invoke(context.Background(), ping, wrapperspb.String("work"), new(wrapperspb.StringValue))
					switch status.Code(err) {
					case codes.OK:
					case codes.Unavailable: // the adaptive limit refused the call
						if attacking {
							refused[i]++
						}
						time.Sleep(backoff)
					default:
						t.Errorf("client %d: %v", i, err)
						return
					}
					if attacking {
						calls[i]++
					}
				}
			})
		}
		attacker := e.dial(peerAddr(100))
		wg.Go(func() {
			time.Sleep(warmUp)
			mu.Lock()
			attackStart = time.Now()
			before = l.Adaptive("inflight")[0].Limit
			mu.Unlock()
			for time.Now().Before(end) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				err := attacker.Invoke(ctx, ping, wrapperspb.String("work"), new(wrapperspb.StringValue))
				cancel()
				if status.Code(err) == codes.Unavailable {
					time.Sleep(time.Millisecond)
				}
			}
		})
		wg.Wait()

		var n, r int
		for i := range clients {
			n += calls[i]
			r += refused[i]
		}
		// A handler whose client gave up at its deadline may still be
		// running, and close a window (OnWindow) as it ends.
		mu.Lock()
		lowest := minLimit
		mu.Unlock()
		t.Logf("during the attack: %d of the clients' %d calls refused (%.2f%%); limit %d at its start, lowest %d", r, n, 100*float64(r)/float64(n), before, lowest)
		if n == 0 || float64(r) > 0.01*float64(n) {
			t.Fatalf("%d of the well-behaved clients' %d calls refused during the attack; want at most 1%%", r, n)
		}
	})
}

// outcomeCase is a way for a handler to end, the code the client sees, and
// what the adaptive rule must be told: the HTTP status Classify is given,
// and DefaultClassify's verdict on it.
type outcomeCase struct {
	name    string
	value   string                                          // what the handler is sent (see service)
	ctx     func(context.Context) (context.Context, func()) // the client's context; nil: no deadline
	code    codes.Code
	status  int
	verdict adaptive.Sample
}

// A client's deadline of 1 ms, and a client that cancels after 1 ms.
func clientDeadline(ctx context.Context) (context.Context, func()) {
	return context.WithTimeout(ctx, time.Millisecond)
}

func clientCancels(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := time.AfterFunc(time.Millisecond, cancel)
	return ctx, func() { stop.Stop(); cancel() }
}

// A client deadline a minute away: the handler fails long before it.
func distantDeadline(ctx context.Context) (context.Context, func()) {
	return context.WithTimeout(ctx, time.Minute)
}

var outcomeCases = []outcomeCase{
	{"ok", "echo", nil, codes.OK, 200, adaptive.SampleSuccess},
	{"Unavailable", "code 14", nil, codes.Unavailable, 503, adaptive.SampleDrop},
	{"DeadlineExceeded of the server", "code 4", nil, codes.DeadlineExceeded, 504, adaptive.SampleDrop},
	{"DeadlineExceeded of the server, client deadline to come", "code 4", distantDeadline, codes.DeadlineExceeded, 504, adaptive.SampleDrop},
	{"a dependency's context.DeadlineExceeded", "timeout", nil, codes.DeadlineExceeded, 504, adaptive.SampleDrop},
	{"Internal", "code 13", nil, codes.Internal, 500, adaptive.SampleIgnore},
	{"an error that is no status", "error", nil, codes.Unknown, 500, adaptive.SampleIgnore},
	{"panic", "panic", nil, codes.Internal, 500, adaptive.SampleIgnore},
	{"ResourceExhausted", "code 8", nil, codes.ResourceExhausted, 429, adaptive.SampleIgnore},
	{"InvalidArgument", "code 3", nil, codes.InvalidArgument, 400, adaptive.SampleSuccess},
	{"the client's deadline", "wait", clientDeadline, codes.DeadlineExceeded, 499, adaptive.SampleAbandoned},
	{"the client's deadline, work cut short", "work", clientDeadline, codes.DeadlineExceeded, 499, adaptive.SampleAbandoned},
	{"the client cancels", "wait", clientCancels, codes.Canceled, 499, adaptive.SampleAbandoned},
}

// classified is what an adaptive rule's Classify was given and said.
type classified struct {
	status  int
	verdict adaptive.Sample
}

// outcomeEnv is a server whose only rule is an adaptive one that reports
// every classification on the returned channel.
func outcomeEnv(t *testing.T) (*grpc.ClientConn, <-chan classified) {
	seen := make(chan classified, 1)
	cfg := &adaptive.Config{Min: 50, Max: 50, Initial: 50, Classify: func(r *http.Request, status int, elapsed time.Duration) adaptive.Sample {
		v := adaptive.DefaultClassify(r, status, elapsed)
		seen <- classified{status, v}
		return v
	}}
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Name: "inflight", Key: ratelimit.Global(), Adaptive: cfg}})
	return newEnv(t, l).dial(peerAddr(1)), seen
}

// checkOutcomes makes a call per case with do and checks the code and the
// classification, in a synctest bubble: the 1 ms deadlines are exact.
func checkOutcomes(t *testing.T, do func(context.Context, *grpc.ClientConn, string) error) {
	for _, c := range outcomeCases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				conn, seen := outcomeEnv(t)
				ctx, cancel := context.Background(), func() {}
				if c.ctx != nil {
					ctx, cancel = c.ctx(ctx)
				}
				defer cancel()
				if code := status.Code(do(ctx, conn, c.value)); code != c.code {
					t.Fatalf("the client got %v, want %v", code, c.code)
				}
				select {
				case got := <-seen:
					if got != (classified{c.status, c.verdict}) {
						t.Fatalf("Classify was given status %d (DefaultClassify: %v); want %d (%v)", got.status, got.verdict, c.status, c.verdict)
					}
				case <-time.After(time.Minute):
					t.Fatal("the call was never classified")
				}
			})
		})
	}
}

// TestUnaryOutcomeReachesTheAdaptiveRule: a unary handler's outcome is
// given to the adaptive rule as the HTTP status a handler would write:
// Unavailable 503, the server's DeadlineExceeded 504, other server errors
// and a panic 500, and the client's own deadline or cancellation 499. It
// was 0 for every call (a success), so the limit never saw an error.
func TestUnaryOutcomeReachesTheAdaptiveRule(t *testing.T) {
	checkOutcomes(t, func(ctx context.Context, conn *grpc.ClientConn, v string) error {
		return conn.Invoke(ctx, ping, wrapperspb.String(v), new(wrapperspb.StringValue))
	})
}

// TestStreamOutcomeReachesTheAdaptiveRule is the same for a stream: the
// status is its handler's, when it returns.
func TestStreamOutcomeReachesTheAdaptiveRule(t *testing.T) {
	checkOutcomes(t, func(ctx context.Context, conn *grpc.ClientConn, v string) error {
		cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, chat)
		if err != nil {
			return err
		}
		if err := cs.SendMsg(wrapperspb.String(v)); err != nil && err != io.EOF {
			return err
		}
		if err := cs.CloseSend(); err != nil {
			return err
		}
		for {
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
		}
	})
}
