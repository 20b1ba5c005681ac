package envoy

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic, as a ConfigMap update
		t.Fatal(err)
	}
}

const clientYAML = "domain: api\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: minute\n      requests_per_unit: %s\n"

// A changed file is picked up by the poll and swapped in whole; a broken
// one is rejected with its line:col and the rules in force stay; counters
// survive both. Calls run throughout, so that the race detector sees the
// swap.
func TestReloadSwapsRulesAndKeepsThemOnABrokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	writeFile(t, path, strings.Replace(clientYAML, "%s", "10", 1))
	clock := ratelimittest.NewClock(replayStart)
	svc, err := New(nil, memory.New(memory.WithClock(clock)))
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan error, 16)
	w, err := Watch(dir, svc, WatchOptions{Interval: 5 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnReload: func(err error) { events <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // calls during the reloads, on another descriptor
		for {
			select {
			case <-stop:
				return
			default:
				_, _ = svc.ShouldRateLimit(t.Context(), request("api", [][]string{{"client", "other"}}, 1))
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	remaining := func() uint32 {
		return mustCall(t, svc, request("api", [][]string{{"client", "a"}}, 1)).Statuses[0].LimitRemaining
	}
	if r := remaining(); r != 9 {
		t.Fatalf("remaining %d, want 9 under 10 a minute", r)
	}
	writeFile(t, path, "domain: api\ndescriptors:\n  - key: client\n    rate_limit:\n      unit: lightyear\n")
	err = <-events
	var ce ConfigErrors
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "api.yaml:3:5") {
		t.Fatalf("reload of a broken file: %v, want its problems at line:col", err)
	}
	if r := remaining(); r != 8 {
		t.Fatalf("remaining %d after a broken file, want 8: the old rules and the counter stay", r)
	}
	writeFile(t, path, strings.Replace(clientYAML, "%s", "20", 1))
	if err := <-events; err != nil {
		t.Fatalf("reload of a good file: %v", err)
	}
	if r := remaining(); r != 17 {
		t.Fatalf("remaining %d under 20 a minute after 2 hits and this one, want 17: the counter survives the reload", r)
	}
	if err := w.Reload(); err != nil {
		t.Fatalf("forced reload: %v", err)
	}
}

// A directory that no longer holds a configuration file (every file
// removed or renamed, a volume mounted without its files) is a mistake
// like an empty file, not an order to lift every limit: the reload is
// refused and the rules in force stay. Load and Watch refuse it too.
func TestReloadKeepsTheRulesWhenTheDirectoryHoldsNoFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "api.yaml")
	writeFile(t, path, strings.Replace(clientYAML, "%s", "10", 1))
	svc, err := New(nil, memory.New())
	if err != nil {
		t.Fatal(err)
	}
	w, err := Watch(dir, svc, WatchOptions{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := os.Rename(path, filepath.Join(dir, "api.yaml.bak")); err != nil {
		t.Fatal(err)
	}
	if err := w.Reload(); err == nil {
		t.Error("reload of a directory without a .yaml or .yml file: no error")
	}
	if r := svc.Rules(); r.Domains() != 1 || r.Limits() != 1 {
		t.Errorf("rules in force after the directory emptied: %d domains, %d limits; want the 1 and 1 loaded before", r.Domains(), r.Limits())
	}
	if _, err := Load(dir); err == nil {
		t.Error("Load of a directory without a configuration file: no error")
	}
	if _, err := Watch(dir, svc, WatchOptions{}); err == nil {
		t.Error("Watch of a directory without a configuration file: no error")
	}
}
