// Command gin serves a gin app limited with github.com/sluicehq/ratelimit: a
// global limit per client, a tighter limit on POST /login, and a
// per-client, per-route limit on the /api group.
//
//	go run ./examples/gin            # from the repository root
//	go run ./examples/gin -addr localhost:9000
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
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/sluicehq/ratelimit"
	ratelimitgin "github.com/sluicehq/ratelimit/adapters/gin"
)

func main() {
	addr := flag.String("addr", "localhost:8082", "address to listen on")
	flag.Parse()
	serve(*addr, newHandler())
}

// newHandler returns the app with its limits.
func newHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Logger(), gin.Recovery())

	// Global: 30 requests a minute per client IP, on every route. /healthz
	// is carved out by default. ratelimit.ByIP keys by the connecting peer;
	// behind a proxy use ratelimit.ByClientIP(trustedProxies...), not gin's
	// c.ClientIP().
	r.Use(ratelimitgin.New(ratelimit.PerMinute(30), ratelimit.ByIP(), ratelimit.WithName("global")))

	r.GET("/", func(c *gin.Context) { c.String(http.StatusOK, "hello from gin\n") })
	r.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok\n") })

	// Per route: 3 login attempts a minute per client IP.
	r.POST("/login",
		ratelimitgin.New(ratelimit.PerMinute(3), ratelimit.ByIP(), ratelimit.WithName("login")),
		func(c *gin.Context) { c.String(http.StatusOK, "welcome\n") })

	// Per group, per route: 5 requests a minute per client and route;
	// /api/users/1 and /api/users/2 share the /api/users/:id bucket.
	api := r.Group("/api", ratelimitgin.New(ratelimit.PerMinute(5),
		ratelimit.Keys(ratelimit.ByIP(), ratelimitgin.ByRoute()), ratelimit.WithName("api")))
	api.GET("/users/:id", func(c *gin.Context) { c.String(http.StatusOK, "user %s\n", c.Param("id")) })
	api.GET("/items/:id", func(c *gin.Context) { c.String(http.StatusOK, "item %s\n", c.Param("id")) })

	return r
}

// serve prints curl commands to try, then serves h on addr until interrupted.
func serve(addr string, h http.Handler) {
	base := "http://" + addr
	fmt.Printf(`gin example listening on %[1]s

  curl -i %[1]s/
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code}\n' -X POST %[1]s/login; done   # 200 200 200 429
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%%{http_code}\n' %[1]s/api/users/$i; done # five 200s, then 429
  curl -i %[1]s/api/items/1     # another route, another bucket
  curl -i %[1]s/healthz         # carved out: no RateLimit fields

`, base)
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
