package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/ratelimit"
)

// Event reports one reload attempt.
type Event struct {
	Path    string
	Time    time.Time
	Trigger string // "poll", "signal" or "reload" (an explicit Reload call)
	// Applied reports that new rules are now in force.
	Applied bool
	// Err is why the attempt failed (the old rules stay): an Errors for a
	// bad file, or the read error.
	Err error
	// Rules is the number of limited rules in force after the attempt.
	Rules int
}

// WatchOptions configure Watch. The zero value polls every 5 seconds,
// logs through slog.Default and ignores SIGHUP.
type WatchOptions struct {
	// Interval is how often the file's content is read and compared with
	// the rules in force; 5s when zero.
	Interval time.Duration
	// SIGHUP makes the Watcher reload on SIGHUP as well.
	SIGHUP bool
	// Logger receives one record per reload attempt (the problems of a
	// rejected file at Error level).
	Logger *slog.Logger
	// OnEvent, if set, is called after each reload attempt, from the
	// goroutine that made it (a metric, a test).
	OnEvent func(Event)
	// LimiterOptions are appended to each Limiter's options.
	LimiterOptions []ratelimit.Option
}

// Watcher keeps a Reloadable in step with a rules file. It polls the
// file's content rather than watching inodes, so a Kubernetes ConfigMap
// update (a swap of the "..data" symlink), an atomic rename and an
// in-place write are all seen. A file that fails to compile leaves the
// rules in force unchanged. All stores come from the Registry, so a reload
// keeps the counters of every rule whose name, algorithm and key are
// unchanged.
//
// The embedded Live serves the rules in force (Handler, Admit, Peek,
// Reset); a Set stored by hand stays in force until the next reload.
//
// A Watcher is safe for concurrent use.
type Watcher struct {
	path  string
	reg   *Registry
	opts  WatchOptions
	log   *slog.Logger
	*Live // the rules in force

	mu     sync.Mutex // serialises attempts
	seen   []byte     // the content of the last attempt
	nrules int        // limited rules in force

	applied, failed atomic.Int64
	stop            context.CancelFunc
	done            chan struct{}
}

// Watch loads the rules file at path and starts watching it. It fails if
// the file cannot be read or compiled now, or if its rules do not build
// with opts.LimiterOptions (a reload that fails so keeps the rules in
// force). Call Close to stop.
func Watch(path string, reg *Registry, opts WatchOptions) (*Watcher, error) {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	w := &Watcher{path: path, reg: reg, opts: opts, log: opts.Logger, done: make(chan struct{})}
	if w.log == nil {
		w.log = slog.Default()
	}
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(path, data, reg)
	if err != nil {
		return nil, err
	}
	set, err := build(cfg, opts.LimiterOptions)
	if err != nil {
		return nil, err
	}
	w.seen, w.nrules = data, len(cfg.Rules)
	w.Live = NewLive(set)
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	var sig chan os.Signal
	if opts.SIGHUP {
		sig = make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGHUP)
	}
	go w.loop(ctx, sig)
	return w, nil
}

// Reload reads and compiles the file now, and installs it even if its
// content has not changed. It returns the reason the file was rejected,
// an Errors for a bad file.
func (w *Watcher) Reload() error { return w.attempt("reload", true) }

// Counts returns how many reloads were applied and how many failed since
// Watch.
func (w *Watcher) Counts() (applied, failed int64) { return w.applied.Load(), w.failed.Load() }

// Close stops watching and waits for the watching goroutine to end. The
// rules in force stay.
func (w *Watcher) Close() {
	w.stop()
	<-w.done
}

func (w *Watcher) loop(ctx context.Context, sig chan os.Signal) {
	defer close(w.done)
	if sig != nil {
		defer signal.Stop(sig)
	}
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.attempt("poll", false)
		case <-sig:
			w.attempt("signal", true)
		}
	}
}

func (w *Watcher) attempt(trigger string, force bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	data, err := readFile(w.path)
	if err == nil && !force && bytes.Equal(data, w.seen) {
		return nil
	}
	var cfg *Config
	var set *Set
	if err == nil {
		w.seen = data
		cfg, err = Parse(w.path, data, w.reg)
	}
	if err == nil {
		set, err = build(cfg, w.opts.LimiterOptions)
	}
	ev := Event{Path: w.path, Time: time.Now(), Trigger: trigger, Err: err}
	if err != nil {
		w.failed.Add(1)
		w.logFailure(trigger, err)
	} else {
		w.Store(set)
		w.nrules = len(cfg.Rules)
		w.applied.Add(1)
		ev.Applied = true
		w.log.Info("ratelimit rules reloaded", "path", w.path, "trigger", trigger, "rules", len(cfg.Rules))
	}
	ev.Rules = w.nrules
	if w.opts.OnEvent != nil {
		w.opts.OnEvent(ev)
	}
	return err
}

// build is cfg.Build(opts...), with the panic of a Limiter that refuses
// the rules with these options (ratelimit.WithErrorHandler for a group of
// rules none of which fails closed) returned as an error: on a reload, a
// panic would end the process from the polling goroutine.
func build(cfg *Config, opts []ratelimit.Option) (set *Set, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ratelimit: config: the rules do not build with the watcher's options: %v", r)
		}
	}()
	return cfg.Build(opts...), nil
}

func (w *Watcher) logFailure(trigger string, err error) {
	var errs Errors
	if !errors.As(err, &errs) {
		w.log.Error("ratelimit rules not reloaded; the old rules stay", "path", w.path, "trigger", trigger, "error", err)
		return
	}
	w.log.Error("ratelimit rules rejected; the old rules stay", "path", w.path, "trigger", trigger, "problems", len(errs))
	for _, p := range errs {
		w.log.Error(p.String())
	}
}
