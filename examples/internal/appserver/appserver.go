// Package appserver serves the example apps: Serve and Main the chi, gin
// and echo apps, which make the same promises (see apptest.Check), and
// Listen and ListenFlag make the listener of the others.
package appserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Serve prints the curl commands to try the framework example app, then
// serves h on addr until interrupted. apptest.Check verifies what the
// commands promise.
func Serve(framework, addr string, h http.Handler) {
	base := "http://" + addr
	fmt.Printf(`%[2]s example listening on %[1]s

  curl -i %[1]s/
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code}\n' -X POST %[1]s/login; done   # 200 200 200 429
  for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%%{http_code}\n' %[1]s/api/users/$i; done # five 200s, then 429
  curl -i %[1]s/api/items/1     # another route, another bucket
  curl -i %[1]s/healthz         # carved out: no RateLimit fields

`, base, framework)
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

// Main serves h like Serve, on the address of the -addr flag (defaultAddr
// unless set). It parses the command line.
func Main(framework, defaultAddr string, h http.Handler) {
	Serve(framework, addrFlag(defaultAddr), h)
}

// ListenFlag is Listen on the address of the -addr flag (defaultAddr
// unless set). It parses the command line.
func ListenFlag(defaultAddr string) (net.Listener, string) {
	return Listen(addrFlag(defaultAddr))
}

// addrFlag defines the -addr flag, parses the command line and returns the
// flag's value.
func addrFlag(defaultAddr string) string {
	addr := flag.String("addr", defaultAddr, "address to listen on")
	flag.Parse()
	return *addr
}

// Listen listens on addr (":0" picks a free port) and returns the listener
// and its base URL, http://host:port. It exits the program if addr cannot
// be listened on.
func Listen(addr string) (net.Listener, string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	return ln, "http://" + ln.Addr().String()
}
