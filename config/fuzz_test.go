package config_test

import (
	"errors"
	"os"
	"testing"

	"github.com/sluicehq/ratelimit/config"
)

// FuzzParse checks that Parse never panics and returns either a whole
// Config and no error, or no Config and an Errors with positions in the
// file: never part of a file.
func FuzzParse(f *testing.F) {
	full, _ := os.ReadFile("testdata/full.yaml")
	f.Add(full)
	f.Add([]byte(`{"rules": [{"name": "ip", "key": "client_ip", "limit": "5/s"}]}`))
	f.Add([]byte("rules:\n  - name: a\n    key: tenant\n    limit: 1/s\n    overrides:\n      - {keys: [x, y], limit: 0}\n"))
	f.Add([]byte("rules:\n  - &a {name: a, key: tenant, limit: 1/s}\n  - *a\n"))
	reg := testRegistry(f, nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data, reg)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("cfg %v with err %v", cfg, err)
		}
		if err != nil {
			var errs config.Errors
			if !errors.As(err, &errs) || len(errs) == 0 || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("error %T %v", err, err)
			}
			for _, p := range errs {
				if p.Line < 1 || p.Col < 1 {
					t.Fatalf("problem without a position: %v", p)
				}
			}
			return
		}
		if len(cfg.Rules) == 0 {
			t.Fatal("a Config without rules")
		}
		cfg.Build() // a Config that compiled builds its Limiters without panicking
	})
}
