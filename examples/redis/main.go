// Command redis runs several HTTP servers in one process, each with its own
// Redis client and its own redisstore.Store, as separate instances of a
// service would be, and shows that they share one limit: 5 requests a
// minute per client IP across all of them.
//
//	redis-server --save "" --appendonly no &    # or: docker run -p 6379:6379 redis:7
//	go run ./examples/redis                     # from the repository root
//	go run ./examples/redis -redis localhost:6380 -addrs localhost:9001,localhost:9002,localhost:9003
//
// The Redis address comes from -redis, else $REDIS_ADDR, else localhost:6379.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/breaker"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

func main() {
	defAddr := os.Getenv("REDIS_ADDR")
	if defAddr == "" {
		defAddr = "localhost:6379"
	}
	redisAddr := flag.String("redis", defAddr, "Redis address (default $REDIS_ADDR or localhost:6379)")
	addrs := flag.String("addrs", "localhost:8091,localhost:8092", "comma-separated addresses, one server (instance) each")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	probe := redis.NewClient(&redis.Options{Addr: *redisAddr})
	if err := probe.Ping(ctx).Err(); err != nil {
		log.Fatalf("cannot reach Redis at %s: %v (start one with: redis-server --save \"\" --appendonly no)", *redisAddr, err)
	}
	probe.Close()

	list := strings.Split(*addrs, ",")
	servers := make([]*http.Server, len(list))
	for i, addr := range list {
		servers[i] = instance(i+1, strings.TrimSpace(addr), *redisAddr)
	}
	printHelp(list)

	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
				log.Print(err)
				stop()
			}
		})
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, srv := range servers {
		srv.Shutdown(shutdown)
	}
	wg.Wait()
}

// instance builds one server with its own Redis client and store, as a
// separate process would have.
func instance(n int, addr, redisAddr string) *http.Server {
	client := redis.NewClient(&redis.Options{Addr: redisAddr})
	// The production setup: the Store bounds every call by its default
	// budget (redisstore.DefaultTimeout, 50ms), and a Breaker stops calling
	// a Redis that keeps failing, so a dead or hung Redis adds at most 50ms
	// to a request, then nothing; meanwhile requests pass (fail open).
	store := breaker.New(redisstore.New(client), breaker.Config{})

	limit := ratelimit.New(ratelimit.PerMinute(5), ratelimit.ByIP(), ratelimit.WithName("shared"), ratelimit.WithStore(store)) // fails open, the default
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from instance %d\n", n)
	})
	srv := &http.Server{Addr: addr, Handler: limit(mux), ReadHeaderTimeout: 5 * time.Second}
	srv.RegisterOnShutdown(func() { client.Close() })
	return srv
}

func printHelp(addrs []string) {
	fmt.Printf("%d instances sharing one limit of 5 requests a minute per client IP in Redis:\n\n", len(addrs))
	for i, a := range addrs {
		fmt.Printf("  instance %d: http://%s/\n", i+1, a)
	}
	fmt.Println("\nAlternate between the instances: the sixth request is refused, whichever instance gets it.")
	var urls []string
	for _, a := range addrs {
		urls = append(urls, "http://"+a+"/")
	}
	rounds := (6 + len(urls) - 1) / len(urls) // six requests or a few more
	fmt.Printf("\n  for i in $(seq %d); do for u in %s; do curl -s -o /dev/null -w \"$u %%{http_code}\\n\" $u; done; done\n", rounds, strings.Join(urls, " "))
	fmt.Printf("  curl -i %s   # RateLimit: \"shared\";r=...;t=... counts down across instances\n", urls[len(urls)-1])
	fmt.Println("  redis-cli --scan --pattern 'ratelimit:v1:*'   # the one shared key, with its TTL (redis-cli pttl KEY)")
	fmt.Println()
}
