package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
	"github.com/sluicehq/ratelimit/ratelimittest"
)

func rulesFile(n int) string {
	return fmt.Sprintf("rules:\n  - name: per-ip\n    key: client_ip\n    limit: %d/min\n    algorithm: fixed-window\n", n)
}

// watched starts a Watcher on path with a short poll interval and returns
// the channel of its events.
func watched(t *testing.T, path string, opts config.WatchOptions) (*config.Watcher, chan config.Event) {
	t.Helper()
	events := make(chan config.Event, 16)
	opts.OnEvent = func(e config.Event) { events <- e }
	if opts.Interval == 0 {
		opts.Interval = 50 * time.Millisecond
	}
	w, err := config.Watch(path, testRegistry(t, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w, events
}

// admitted counts the requests of one client admitted out of 100.
func admitted(w *config.Watcher) int {
	h := w.Handler(okHandler)
	n := 0
	for range 100 {
		if ratelimittest.Do(h, ratelimittest.NewRequest("GET", "/", "10.9.9.9:1")).Code == 200 {
			n++
		}
	}
	return n
}

// awaitSlack is how late after its poll interval a change may be applied.
const awaitSlack = 2 * time.Second

// awaitApplied waits for an applied event and checks it came within the
// poll interval plus a slack of 2 s of the change: generous for a loaded
// machine (100 ms was exceeded under load), and still well below the 5 s
// default interval that a watcher ignoring Interval would poll at.
func awaitApplied(t *testing.T, events chan config.Event, changed time.Time, interval time.Duration) {
	t.Helper()
	for {
		select {
		case e := <-events:
			if !e.Applied {
				continue // an in-place write read half-way: the next poll sees it whole
			}
			if lag, most := e.Time.Sub(changed), interval+awaitSlack; lag > most {
				t.Fatalf("change applied after %v, want at most %v", lag, most)
			}
			return
		case <-time.After(30 * time.Second):
			t.Fatal("no reload event")
		}
	}
}

func TestWatchPicksUpEveryKindOfFileUpdate(t *testing.T) {
	const interval = 50 * time.Millisecond
	kinds := map[string]func(t *testing.T, dir string, content string){
		"in-place write": func(t *testing.T, dir, content string) {
			if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"atomic rename": func(t *testing.T, dir, content string) {
			tmp := filepath.Join(dir, ".rules.tmp")
			if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "rules.yaml")); err != nil {
				t.Fatal(err)
			}
		},
		"configmap symlink swap": func(t *testing.T, dir, content string) {
			ts := filepath.Join(dir, fmt.Sprintf("..%d", time.Now().UnixNano()))
			if err := os.Mkdir(ts, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ts, "rules.yaml"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data_tmp")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, update := range kinds {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "rules.yaml")
			if name == "configmap symlink swap" { // the kubelet's layout
				first := filepath.Join(dir, "..first")
				os.Mkdir(first, 0o755)
				os.WriteFile(filepath.Join(first, "rules.yaml"), []byte(rulesFile(5)), 0o644)
				os.Symlink("..first", filepath.Join(dir, "..data"))
				os.Symlink("..data/rules.yaml", path)
			} else {
				os.WriteFile(path, []byte(rulesFile(5)), 0o644)
			}
			w, events := watched(t, path, config.WatchOptions{Interval: interval})
			if n := admitted(w); n != 5 {
				t.Fatalf("%d admitted before the update, want 5", n)
			}
			changed := time.Now()
			update(t, dir, rulesFile(8))
			awaitApplied(t, events, changed, interval)
			if n := admitted(w); n != 3 { // the same bucket, now under 8
				t.Fatalf("%d admitted after raising 5 to 8 with 5 used, want 3", n)
			}
		})
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestWatchKeepsOldRulesOnABadFileAndLogsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	os.WriteFile(path, []byte(rulesFile(5)), 0o644)
	var logs syncBuffer
	w, events := watched(t, path, config.WatchOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	bad := "rules:\n  - name: per-ip\n    key: nope\n    limit: 1/fortnight\n"
	os.WriteFile(path, []byte(bad), 0o644)
	for e := range events {
		if e.Err == nil {
			continue
		}
		var errs config.Errors
		if e.Applied || !errors.As(e.Err, &errs) || len(errs) != 2 || e.Rules != 1 {
			t.Fatalf("event %+v", e)
		}
		break
	}
	if n := admitted(w); n != 5 {
		t.Fatalf("%d admitted after a bad file, want the old limit of 5", n)
	}
	if a, f := w.Counts(); a != 0 || f < 1 {
		t.Fatalf("counts %d applied %d failed", a, f)
	}
	for _, want := range []string{"rules.yaml:3:10: rules[0].key", "rules.yaml:4:12: rules[0].limit", "old rules stay"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if err := w.Reload(); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("explicit reload of the bad file: %v", err)
	}
}

func TestWatchReloadsOnSIGHUPAndExplicitReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	os.WriteFile(path, []byte(rulesFile(5)), 0o644)
	w, events := watched(t, path, config.WatchOptions{Interval: time.Hour, SIGHUP: true})
	if err := w.Reload(); err != nil {
		t.Fatal(err)
	}
	if e := <-events; !e.Applied || e.Trigger != "reload" {
		t.Fatalf("event %+v", e)
	}
	os.WriteFile(path, []byte(rulesFile(7)), 0o644)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if e := <-events; !e.Applied || e.Trigger != "signal" {
		t.Fatalf("event %+v", e)
	}
	if n := admitted(w); n != 7 {
		t.Fatalf("%d admitted, want 7", n)
	}
}

func TestWatchFailsOnABadFirstFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if _, err := config.Watch(path, testRegistry(t, nil), config.WatchOptions{}); err == nil {
		t.Fatal("missing file accepted")
	}
	os.WriteFile(path, []byte("rules: []\n"), 0o644)
	if _, err := config.Watch(path, testRegistry(t, nil), config.WatchOptions{}); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("empty rules: %v", err)
	}
}

// Rules that parse but that the Limiters refuse to build with the
// watcher's LimiterOptions (here WithErrorHandler, and a group of rules
// none of which fails closed) are a rejected reload like a bad file: the
// old rules stay, rather than the panic ending the process from the
// polling goroutine.
func TestWatchKeepsOldRulesWhenNewOnesDoNotBuild(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	closed := "rules:\n  - name: per-ip\n    key: client_ip\n    limit: 5/min\n    algorithm: fixed-window\n    on_store_error: closed\n"
	os.WriteFile(path, []byte(closed), 0o644)
	onError := ratelimit.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, _ error) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	w, _ := watched(t, path, config.WatchOptions{Interval: time.Hour, LimiterOptions: []ratelimit.Option{onError},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	unbuildable := closed + "  - name: admin\n    key: client_ip\n    limit: 1/min\n    match: {routes: [\"/admin/*\"]}\n"
	os.WriteFile(path, []byte(strings.Replace(unbuildable, "    on_store_error: closed\n", "    on_store_error: closed\n    match: {routes: [\"/api/*\", \"/\"]}\n", 1)), 0o644)
	if err := w.Reload(); err == nil {
		t.Fatal("reload of rules that do not build with the watcher's options: no error")
	}
	if n := admitted(w); n != 5 {
		t.Fatalf("%d admitted after a reload that did not build, want the old limit of 5", n)
	}
	if a, f := w.Counts(); a != 0 || f != 1 {
		t.Fatalf("counts %d applied %d failed, want 0 and 1", a, f)
	}
}
