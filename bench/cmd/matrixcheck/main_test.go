package main

import (
	"strings"
	"testing"
)

const processA = `goos: linux
BenchmarkConfigurations/go-limiter/allow/keys=1         	 1000	       600.0 ns/op	     700 B/op	       9 allocs/op
BenchmarkConfigurations/go-limiter/allow/keys=1-2       	 1000	       480.0 ns/op	     700 B/op	       9 allocs/op
BenchmarkConfigurations/go-limiter/deny/keys=1-2        	 1000	       500.0 ns/op	     700 B/op	      10 allocs/op
BenchmarkConfigurations/default/allow/keys=1            	 1000	       150.0 ns/op	      32 B/op	       1 allocs/op
BenchmarkConfigurations/default/allow/keys=1-2          	 1000	       150.0 ns/op	      32 B/op	       1 allocs/op
BenchmarkConfigurations/stacked/deny/keys=1-2           	 1000	       200.0 ns/op	      16 B/op	       1 allocs/op
PASS
`

const processB = `BenchmarkConfigurations/go-limiter/allow/keys=1         	 1000	       600.0 ns/op	     700 B/op	       9 allocs/op
BenchmarkConfigurations/go-limiter/allow/keys=1-2       	 1000	       480.0 ns/op	     700 B/op	       9 allocs/op
BenchmarkConfigurations/go-limiter/deny/keys=1-2        	 1000	       500.0 ns/op	     700 B/op	      10 allocs/op
BenchmarkConfigurations/default/allow/keys=1            	 1000	       150.0 ns/op	      32 B/op	       1 allocs/op
BenchmarkConfigurations/default/allow/keys=1-2          	 1000	       200.0 ns/op	      32 B/op	       1 allocs/op
BenchmarkConfigurations/stacked/deny/keys=1-2           	 1000	       200.0 ns/op	       0 B/op	       0 allocs/op
`

func mustParse(t *testing.T, s string) process {
	t.Helper()
	p, err := parse(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A row is judged in each process against go-limiter of that process: one
// process below the bar fails the row, however good the others are, and an
// allocation on the deny path fails it too.
func TestEveryProcessIsHeldToTheBar(t *testing.T) {
	var out strings.Builder
	ok := report(&out, []process{mustParse(t, processA), mustParse(t, processB)}, nil, 100)
	if ok {
		t.Fatalf("a row below its bar in one process passed:\n%s", out.String())
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	for key, want := range map[string]string{
		"default/allow/keys=1@1": "ok",                 // 4x in both
		"default/allow/keys=1@2": "BELOW 3x in 1 of 2", // 3.2x, then 2.4x
		"stacked/deny/keys=1@2":  "1 allocs > 0",       // 2.5x ≥ 2x, but one allocation
	} {
		if !strings.Contains(lines[key], want) {
			t.Errorf("%s: %q, want it to say %q", key, lines[key], want)
		}
	}
}

// Output without a matrix line is an error, not an empty pass.
func TestOutputWithoutMatrixLinesIsAnError(t *testing.T) {
	if _, err := parse(strings.NewReader("PASS\nok\n")); err == nil {
		t.Fatal("no error for output without BenchmarkConfigurations lines")
	}
}

// A row missing from a process (a crashed sub-benchmark) fails the row.
func TestRowMissingFromAProcessFails(t *testing.T) {
	b := mustParse(t, processB)
	delete(b, "default/allow/keys=1@1")
	var out strings.Builder
	report(&out, []process{mustParse(t, processA), b}, nil, 100)
	if !strings.Contains(out.String(), "MISSING in 1 of 2") {
		t.Fatalf("a row missing from one process was not reported:\n%s", out.String())
	}
}

// A process's cell is the median of its samples: a burst of load that
// slows one sample of three does not fail a row, a slowdown that lasts
// (two of three) does, and an allocation in any sample counts.
func TestCellIsTheMedianOfItsSamples(t *testing.T) {
	const peer = "BenchmarkConfigurations/go-limiter/allow/keys=1-2 1000 480.0 ns/op 700 B/op 9 allocs/op\n"
	sample := func(ns string, allocs string) string {
		return "BenchmarkConfigurations/default/allow/keys=1-2 1000 " + ns + " ns/op 32 B/op " + allocs + " allocs/op\n"
	}
	for _, c := range []struct {
		name, out, want string
	}{
		{"one burst", peer + sample("150.0", "1") + sample("155.0", "1") + sample("400.0", "1"), "ok"},
		{"lasting", peer + sample("150.0", "1") + sample("400.0", "1") + sample("390.0", "1"), "BELOW 3x in 1 of 1"},
		{"one allocation too many", peer + sample("150.0", "1") + sample("150.0", "2") + sample("150.0", "1"), "2 allocs > 1"},
	} {
		p := mustParse(t, c.out)
		var out strings.Builder
		report(&out, []process{p}, nil, 100)
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("%s: got\n%s\nwant it to say %q", c.name, out.String(), c.want)
		}
	}
}

// A paired line (BenchmarkConfigurationPairs) is judged against the
// go-limiter figure measured in turn with it, not against a go-limiter
// line of the process.
func TestPairedLineIsJudgedAgainstItsOwnPeer(t *testing.T) {
	const out = "BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 150.0 ns/op 600.0 go-limiter-ns/op 4.0 x-go-limiter 32 B/op 1 allocs/op\n" +
		"BenchmarkConfigurationPairs/default/allow/keys=10000-2 1000 150.0 ns/op 300.0 go-limiter-ns/op 2.0 x-go-limiter 32 B/op 1 allocs/op\n"
	var got strings.Builder
	report(&got, []process{mustParse(t, out)}, nil, 100)
	lines := map[string]string{}
	for _, l := range strings.Split(got.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines[f[0]] = l
		}
	}
	for key, want := range map[string]string{
		"default/allow/keys=1@2":     "ok",
		"default/allow/keys=10000@2": "BELOW 3x in 1 of 1",
	} {
		if !strings.Contains(lines[key], want) {
			t.Errorf("%s: %q, want it to say %q", key, lines[key], want)
		}
	}
}

// A row's misses are counted again among the processes in which the cell
// ran with slow cross-core hand-overs (its probe reached -far), and only
// there; the verdict is a miss either way.
func TestMissesOnFarCoresAreCounted(t *testing.T) {
	line := func(ns, xcore string) string {
		return "BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 " + ns + " ns/op 500.0 go-limiter-ns/op 2.0 x-go-limiter " + xcore + " xcore-ns 32 B/op 1 allocs/op\n"
	}
	procs := []process{mustParse(t, line("250.0", "180.0")), mustParse(t, line("120.0", "30.0")), mustParse(t, line("250.0", "40.0"))}
	var out strings.Builder
	if report(&out, procs, nil, 100) {
		t.Fatalf("a row below its bar passed:\n%s", out.String())
	}
	if want := "BELOW 3x in 2 of 3 (1 with slow cross-core hand-overs)"; !strings.Contains(out.String(), want) {
		t.Fatalf("got\n%s\nwant it to say %q", out.String(), want)
	}
}

// A cell's hand-over time is the median of its samples': one sample whose
// probe the operating system stopped (microseconds, once) does not mark the
// cell as run on far cores; most samples far apart do.
func TestOneStoppedProbeDoesNotMarkACellFar(t *testing.T) {
	line := func(xcore string) string {
		return "BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 250.0 ns/op 500.0 go-limiter-ns/op 2.0 x-go-limiter " + xcore + " xcore-ns 32 B/op 1 allocs/op\n"
	}
	stopped := mustParse(t, line("30.0")+line("2900.0")+line("40.0"))
	far := mustParse(t, line("180.0")+line("30.0")+line("190.0"))
	var out strings.Builder
	report(&out, []process{stopped, far}, nil, 100)
	if want := "BELOW 3x in 2 of 2 (1 with slow cross-core hand-overs)"; !strings.Contains(out.String(), want) {
		t.Fatalf("got\n%s\nwant it to say %q", out.String(), want)
	}
}

// A paired cell is judged by the median of its samples' own ratios, not
// by the ratio of two medians taken from different samples: two samples
// of three below 3x fail it.
func TestPairedSamplesKeepTheirPairing(t *testing.T) {
	paired := func(ns, peer string) string {
		return "BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 " + ns + " ns/op " + peer + " go-limiter-ns/op 32 B/op 1 allocs/op\n"
	}
	p := mustParse(t, paired("100.0", "290.0")+paired("300.0", "880.0")+paired("200.0", "1000.0"))
	var out strings.Builder
	if report(&out, []process{p}, nil, 100) {
		t.Fatalf("a cell whose median sample is below 3x passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "BELOW 3x in 1 of 1") {
		t.Fatalf("got\n%s\nwant BELOW 3x in 1 of 1", out.String())
	}
}

// Output that mixes the two benchmarks, whose cells have the same names,
// and a paired line without go-limiter's figure are errors, not figures.
func TestAmbiguousOutputIsRefused(t *testing.T) {
	for name, out := range map[string]string{
		"mixed": "BenchmarkConfigurations/default/allow/keys=1-2 1000 150.0 ns/op 32 B/op 1 allocs/op\n" +
			"BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 150.0 ns/op 600.0 go-limiter-ns/op 32 B/op 1 allocs/op\n",
		"no peer": "BenchmarkConfigurationPairs/default/allow/keys=1-2 1000 150.0 ns/op 32 B/op 1 allocs/op\n",
	} {
		if _, err := parse(strings.NewReader(out)); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}
