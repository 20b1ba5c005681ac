// Command echo serves an echo app limited with github.com/sluicehq/ratelimit:
// a global limit per client, a tighter limit on POST /login, and a
// per-client, per-route limit on the /api group that fails closed when the
// store fails.
//
//	go run ./examples/echo           # from the repository root
//	go run ./examples/echo -addr localhost:9000
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

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/sluicehq/ratelimit"
	ratelimitecho "github.com/sluicehq/ratelimit/adapters/echo"
)

func main() {
	addr := flag.String("addr", "localhost:8083", "address to listen on")
	flag.Parse()
	serve(*addr, newHandler())
}

// newHandler returns the app with its limits.
func newHandler() http.Handler {
	e := echo.New()
	e.HideBanner = true
	e.Use(middleware.Recover())

	// Global: 30 requests a minute per client IP, on every route. /healthz
	// is carved out by default. ratelimit.ByIP keys by the connecting peer;
	// behind a proxy use ratelimit.ByClientIP(trustedProxies...), not
	// c.RealIP().
	e.Use(ratelimitecho.New(ratelimit.PerMinute(30), ratelimit.ByIP(), ratelimit.WithName("global")))

	e.GET("/", func(c echo.Context) error { return c.String(http.StatusOK, "hello from echo\n") })
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })

	// Per route: 3 login attempts a minute per client IP.
	e.POST("/login", func(c echo.Context) error { return c.String(http.StatusOK, "welcome\n") },
		ratelimitecho.New(ratelimit.PerMinute(3), ratelimit.ByIP(), ratelimit.WithName("login")))

	// Per group, per route: 5 requests a minute per client and route;
	// /api/users/1 and /api/users/2 share the /api/users/:id bucket. A store
	// failure becomes echo's 503 instead of letting requests through.
	api := e.Group("/api", ratelimitecho.NewWithConfig(ratelimitecho.Config{
		Limit:   ratelimit.PerMinute(5),
		Key:     ratelimit.Keys(ratelimit.ByIP(), ratelimitecho.ByRoute()),
		Options: []ratelimit.Option{ratelimit.WithName("api")},
		ErrorHandler: func(c echo.Context, err error) error {
			return echo.NewHTTPError(http.StatusServiceUnavailable).SetInternal(err)
		},
	}))
	api.GET("/users/:id", func(c echo.Context) error { return c.String(http.StatusOK, "user "+c.Param("id")+"\n") })
	api.GET("/items/:id", func(c echo.Context) error { return c.String(http.StatusOK, "item "+c.Param("id")+"\n") })

	return e
}

// serve prints curl commands to try, then serves h on addr until interrupted.
func serve(addr string, h http.Handler) {
	base := "http://" + addr
	fmt.Printf(`echo example listening on %[1]s

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
