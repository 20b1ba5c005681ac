// Command ratelimit-lint checks rules files for the config package, for CI:
//
//	ratelimit-lint [-keys client_ip,tenant] [-stores redis] [-predicates from_lb] rules.yaml...
//
// It prints every problem as file:line:col: path: message, the same
// errors config.Load reports, and exits 1 if any file has a problem, 2 on
// bad usage or an unreadable file, 0 otherwise. The application's registry
// lives in Go, so the names a file may use are given as flags; names not
// given are reported as unknown.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ratelimit-lint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keys := fs.String("keys", "", "comma-separated key names the application registers")
	stores := fs.String("stores", "", "comma-separated store names the application registers")
	preds := fs.String("predicates", "", "comma-separated predicate names the application registers")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "usage: ratelimit-lint [-keys a,b] [-stores a,b] [-predicates a,b] file...")
		return 2
	}
	reg := &config.Registry{
		Keys:       map[string]ratelimit.KeyFunc{},
		Stores:     map[string]ratelimit.Store{},
		Predicates: map[string]func(*http.Request) bool{},
	}
	for _, k := range names(*keys) {
		reg.Keys[k] = ratelimit.Global()
	}
	for _, s := range names(*stores) {
		reg.Stores[s] = lintStore{}
	}
	for _, p := range names(*preds) {
		reg.Predicates[p] = func(*http.Request) bool { return true }
	}
	code := 0
	for _, path := range fs.Args() {
		_, err := config.Load(path, reg)
		var errs config.Errors
		switch {
		case errors.As(err, &errs):
			fmt.Fprintln(stdout, errs.Error())
			code = max(code, 1)
		case err != nil:
			fmt.Fprintln(stderr, err)
			code = 2
		}
	}
	return code
}

func names(s string) []string {
	var out []string
	for _, n := range strings.Split(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// lintStore stands for a registered store: the linter never calls it.
type lintStore struct{ ratelimit.Store }
