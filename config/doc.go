// Package config compiles a rules file, YAML or JSON, into ordinary
// ratelimit rules, and keeps a running service's rules in step with the
// file, so that limits change without a deploy.
//
// A file names its key functions, stores and predicates; the application
// defines them in Go, in a Registry, so the file never holds code:
//
//	reg := &config.Registry{
//		Keys:   map[string]ratelimit.KeyFunc{"client_ip": ratelimit.ByClientIP("10.0.0.0/8")},
//		Stores: map[string]ratelimit.Store{"redis": redisstore.New(client)},
//	}
//	w, err := config.Watch("/etc/ratelimit/rules.yaml", reg, config.WatchOptions{SIGHUP: true})
//	if err != nil {
//		log.Fatal(err) // every problem, as file:line:col: path: message
//	}
//	defer w.Close()
//	http.ListenAndServe(":8080", w.Handler(mux))
//
// Parse and Load check a file strictly (unknown fields, duplicate names,
// bad limits, unknown registry names, contradictory settings) and report
// every problem at once; a file with any problem compiles to nothing.
// A file holds any number of rules: Config.Build makes a Set, which sends
// each request to a Limiter of the rules that can apply to it (by method
// and route), and Parse rejects a file in which one request could match
// more than 16 (a Limiter's bound). Live swaps Sets atomically.
// Watch polls the file's content, and reloads on SIGHUP and on
// Watcher.Reload; a bad file keeps the rules in force and is logged.
//
// State lives in the Registry's stores, keyed by rule name, so a reload
// keeps the counters of every rule whose name, algorithm and key are
// unchanged, and applies a changed limit to them. See docs/config.md for
// the file format, and cmd/ratelimit-lint to check files in CI.
package config
