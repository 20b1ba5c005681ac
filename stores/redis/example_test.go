package redisstore_test

import (
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

// The production setup: the Store's default time budget (DefaultTimeout,
// 50ms) bounds every call to Redis, a Breaker stops calling a Redis that
// keeps failing, and the failure policy says what requests get meanwhile
// (fail open: they pass unlimited). While Redis is down or hung a request
// waits at most the budget, and nothing once the breaker is open.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store := breaker.New(redisstore.New(client), breaker.Config{})
	mw := ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(), ratelimit.WithStore(store)) // fails open, the default

	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })
	srv := &http.Server{Addr: ":8080", Handler: mw(mux), ReadHeaderTimeout: 5 * time.Second}
	_ = srv // srv.ListenAndServe()
}

// A tighter budget, or one for a Redis across a slower network: the
// middleware's WithTimeout and the Store's WithTimeout both bound a call;
// the earlier deadline wins.
func ExampleWithTimeout() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	store := redisstore.New(client, redisstore.WithTimeout(20*time.Millisecond))
	_ = ratelimit.New(ratelimit.PerMinute(100), ratelimit.ByIP(),
		ratelimit.WithStore(breaker.New(store, breaker.Config{})))
}
