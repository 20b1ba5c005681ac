// Command reload serves a small API whose limits live in a rules file and
// change while it runs: edit the file (or replace it, or swap a ConfigMap's
// symlink) and the new rules apply within a second, keeping every
// unchanged rule's counters. A file with mistakes is rejected whole: the
// old rules stay and every problem is logged with its line and column.
//
//	go run ./examples/reload                       # writes rules.yaml in a temp dir
//	go run ./examples/reload -rules ./rules.yaml   # your own file
//
// It runs in the foreground: stop it with Ctrl-C.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/admin"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/examples/internal/appserver"
)

// initialRules is written when -rules names no file.
const initialRules = `version: 1
rules:
  # 5 requests a minute per client IP on the API.
  - name: per-ip
    key: client_ip
    limit: 5/min
    algorithm: fixed-window
    match: {routes: ["/api/*"]}
  # Writes per tenant; one tenant has its own limit, one is blocked.
  - name: writes
    key: tenant
    limit: 2/min
    algorithm: fixed-window
    match: {methods: [POST], routes: ["/api/*"]}
    overrides: {acme: 10/min, abuser: 0}
`

func main() {
	rules := flag.String("rules", "", "rules file (default: a new one in a temp dir)")
	addr := flag.String("addr", "localhost:8080", "listen address")
	flag.Parse()
	if *rules == "" {
		dir, err := os.MkdirTemp("", "ratelimit-reload")
		if err != nil {
			log.Fatal(err)
		}
		*rules = filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(*rules, []byte(initialRules), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	app, err := newApp(*rules, time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer app.watcher.Close()
	ln, base := appserver.Listen(*addr)
	fmt.Printf(`Serving on %s with the rules in %s

Use up the per-ip limit (the 6th request is a 429):
  for i in $(seq 6); do curl -s -o /dev/null -w "%%{http_code}\n" %s/api/items; done

Raise it: change "limit: 5/min" to "limit: 50/min" in the file, save, and
within a second 45 more requests pass (the 5 already counted stay):
  curl -i %s/api/items

Look at or reset a key (the admin handler; mount it behind your own auth):
  curl -s '%s/admin/ratelimit?rule=per-ip&key=127.0.0.1'
  curl -s -X POST '%s/admin/ratelimit?rule=per-ip&key=127.0.0.1'

Reload at once with: kill -HUP %d. Stop the server with Ctrl-C.
`, base, *rules, base, base, base, base, os.Getpid())
	log.Fatal(http.Serve(ln, app.handler))
}

type app struct {
	watcher *config.Watcher
	handler http.Handler
}

// newApp watches the rules file at path every interval and serves the API
// under its rules, and the admin handler under /admin/ratelimit.
func newApp(path string, interval time.Duration) (*app, error) {
	reg := &config.Registry{
		Keys: map[string]ratelimit.KeyFunc{
			"client_ip": ratelimit.ByIP(),
			"tenant":    ratelimit.ByHeader("X-Tenant"),
		},
	}
	w, err := config.Watch(path, reg, config.WatchOptions{Interval: interval, SIGHUP: true})
	if err != nil {
		return nil, err
	}
	api := http.NewServeMux()
	api.HandleFunc("/api/", func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(rw, `["apple","pear"]`)
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", w.Handler(api))
	mux.Handle("/admin/ratelimit", admin.NewHandler(w))
	return &app{watcher: w, handler: mux}, nil
}
