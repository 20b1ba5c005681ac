package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/ratelimit/config"
)

// bigFile is a file of rules rules sharing overrides overrides.
func bigFile(rules, overrides int) []byte {
	var b strings.Builder
	b.WriteString("version: 1\nrules:\n")
	per := max(1, overrides/rules)
	o := 0
	for i := range rules {
		fmt.Fprintf(&b, "  - name: rule-%d\n    key: tenant\n    limit: %d/min burst %d\n    match: {methods: [GET, POST], routes: [\"/api/v%d/*\"]}\n", i, 100+i, 120+i, i)
		if o < overrides {
			b.WriteString("    overrides:\n")
			for j := 0; j < per && o < overrides; j++ {
				lim := "1000/min"
				if o%10 == 0 {
					lim = "0"
				}
				fmt.Fprintf(&b, "      tenant-%d: %s\n", o, lim)
				o++
			}
		}
	}
	return []byte(b.String())
}

// BenchmarkCompile compiles a file of 16 rules with 10,000 overrides, and
// a file of 1,000 rules with 10,000 overrides, and builds its Set: what a
// reload costs.
func BenchmarkCompile(b *testing.B) {
	reg := testRegistry(b, nil)
	for _, c := range []struct{ rules, overrides int }{{16, 10_000}, {1_000, 10_000}} {
		data := bigFile(c.rules, c.overrides)
		b.Run(fmt.Sprintf("rules=%d/overrides=%d", c.rules, c.overrides), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				cfg, err := config.Parse("big.yaml", data, reg)
				if err != nil {
					b.Fatal(err)
				}
				cfg.Build()
			}
		})
	}
}
