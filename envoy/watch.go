package envoy

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// WatchOptions configure Watch. The zero value polls every 2 seconds and
// logs through slog.Default.
type WatchOptions struct {
	// Interval is how often the path is read and compared with the
	// content in force; 2s when zero.
	Interval time.Duration
	// Logger receives one record per reload attempt.
	Logger *slog.Logger
	// OnReload, if set, is called after each attempt with its error (nil
	// when new rules are in force), from the goroutine that made it.
	OnReload func(err error)
}

// Watcher keeps a Service's rules in step with a configuration path. It
// polls the content rather than watching inodes, so an in-place write, an
// atomic rename and a Kubernetes ConfigMap update are all seen. New rules
// replace the old ones whole, atomically; a file that does not compile
// leaves the rules in force unchanged (and is logged with its line:col
// problems) until a good one replaces it. Counters survive a reload: they
// are keyed by domain and descriptor, not by the rules.
type Watcher struct {
	path string
	svc  *Service
	opts WatchOptions
	log  *slog.Logger

	mu   sync.Mutex // serialises attempts
	seen *source    // the content of the last attempt

	stop context.CancelFunc
	done chan struct{}
}

// Watch loads path into svc and starts watching it. It fails if the path
// cannot be read or compiled now. Call Close to stop.
func Watch(path string, svc *Service, opts WatchOptions) (*Watcher, error) {
	if opts.Interval <= 0 {
		opts.Interval = 2 * time.Second
	}
	w := &Watcher{path: path, svc: svc, opts: opts, log: opts.Logger, done: make(chan struct{})}
	if w.log == nil {
		w.log = slog.Default()
	}
	src, err := readSource(path)
	if err != nil {
		return nil, err
	}
	rules, err := src.compile()
	if err != nil {
		return nil, err
	}
	if err := svc.SetRules(rules); err != nil {
		return nil, err
	}
	w.seen = src
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	go w.loop(ctx)
	return w, nil
}

// Reload reads the path now and installs its rules if they compile, even
// when the content has not changed. It returns why they were rejected.
func (w *Watcher) Reload() error { return w.attempt(true) }

// Close stops watching and waits for the watching goroutine to end. The
// rules in force stay.
func (w *Watcher) Close() {
	w.stop()
	<-w.done
}

func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = w.attempt(false)
		}
	}
}

// attempt reads the path and, when it changed (or force), compiles it and
// puts it in force.
func (w *Watcher) attempt(force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	src, err := readSource(w.path)
	if err == nil && !force && src.equal(w.seen) {
		return nil
	}
	if err == nil {
		w.seen = src
		var rules *Rules
		if rules, err = src.compile(); err == nil {
			err = w.svc.SetRules(rules)
		}
		if err == nil {
			w.log.Info("ratelimit: envoy configuration reloaded", "path", w.path, "domains", rules.Domains(), "limits", rules.Limits())
		}
	}
	if err != nil {
		w.log.Error("ratelimit: envoy configuration rejected; the rules in force stay", "path", w.path, "err", err)
	}
	if w.opts.OnReload != nil {
		w.opts.OnReload(err)
	}
	return err
}
