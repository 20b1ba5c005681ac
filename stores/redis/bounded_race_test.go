package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestBoundedCallerWritesNothingTheCallWrites: when ctx ends before a call
// handed to a goroutine of its own returns, the caller must neither read
// nor write what the call later writes (run with -race). eval's timeout
// path, and runMarker's return of n, did.
func TestBoundedCallerWritesNothingTheCallWrites(t *testing.T) {
	addr := silentServer(t)
	for _, c := range []struct {
		name string
		call func(ctx context.Context, s *Store) error
	}{
		{"eval", func(ctx context.Context, s *Store) error { return s.eval(ctx, []string{"k"}, []any{1}).Err() }},
		{"runMarker", func(ctx context.Context, s *Store) error {
			_, err := s.runMarker(ctx, "p", instant{}, &splitKey{main: "k"})
			return err
		}},
	} {
		// A client of its own: a pool shared with the next call would
		// order the calls' goroutines, and hide the race.
		client := redis.NewClient(&redis.Options{
			Addr: addr, ReadTimeout: 150 * time.Millisecond, WriteTimeout: 150 * time.Millisecond,
			MaxRetries: -1, Protocol: 2, DisableIdentity: true,
		})
		defer client.Close()
		s := New(client)
		if s.ctxReads {
			t.Fatal("the default client bounds its reads by ctx")
		}
		// Canceled, with no deadline: the client reads until its
		// ReadTimeout, well after the caller has returned.
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		err := c.call(ctx, s)
		cancel()
		if err == nil {
			t.Errorf("%s: no error from a server that never replies", c.name)
		}
		time.Sleep(400 * time.Millisecond) // the call's goroutine gives up and writes
	}
}
