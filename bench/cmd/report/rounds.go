package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/ratelimit/bench"
)

// The middleware benchmarks run as one process per (library, case, -cpu)
// and round: a library that misbehaves in one run (throttled's status is
// flaky under load) loses that run alone, noted in its row, and every other
// figure stands. Within a round, each case runs every library back to back,
// in an order rotated from round to round, so that a burst of load from
// elsewhere lands on neighbours in turn rather than on one library.

// roundStats are one library's runs of one case at one -cpu.
type roundStats struct {
	ns, bytes, allocs []float64
	failed            []string // one line per failed run
}

// benchRounds is every run of the middleware benchmarks, keyed like
// report.bench plus the -cpu value: "lib/allow/keys=1@2".
type benchRounds struct {
	cpus  []int
	stats map[string]*roundStats
	loads []string // the load average at the start of each round
}

func roundKey(lib string, c bench.Case, cpu int) string {
	return fmt.Sprintf("%s/%s@%d", lib, c, cpu)
}

var runLine = regexp.MustCompile(`^BenchmarkMiddleware/\S+\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// runBenchmarks builds the bench module's test binary once and runs every
// (library, case, -cpu) in count interleaved rounds. report.bench gets the
// runs at the machine's core count (the figures of RESULTS.md); the runs at
// every -cpu, their spread, the failures and the load of each round go to
// middleware-rounds.md beside it.
func (r *report) runBenchmarks(dir string) error {
	exe := filepath.Join(os.TempDir(), fmt.Sprintf("ratelimit-bench-%d.test", os.Getpid()))
	build := exec.Command("go", "test", "-c", "-o", exe, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c: %w\n%s", err, out)
	}
	defer os.Remove(exe)
	cpus := parseCPUs(*cpuList)
	r.benchCmd = fmt.Sprintf("go test -c (in bench/), then per round, case, library and -cpu in %v: "+
		"<binary> -test.run '^$' -test.bench '^BenchmarkMiddleware$/^<library>$/^<case>$' -test.benchmem -test.count 1 -test.benchtime %s -test.cpu <n>; %d rounds",
		cpus, *benchtime, *count)
	raw, err := os.Create(filepath.Join(*outDir, "bench.txt"))
	if err != nil {
		return err
	}
	defer raw.Close()
	r.rounds = &benchRounds{cpus: cpus, stats: map[string]*roundStats{}}
	r.bench = map[string]*benchStats{}
	libs := libNames()
	for round := 0; round < *count; round++ {
		load := loadAvg()
		r.rounds.loads = append(r.rounds.loads, load)
		log.Printf("  round %d of %d (load average %s)", round+1, *count, load)
		for _, c := range bench.Cases {
			for i := range libs {
				lib := libs[(i+round)%len(libs)]
				for _, cpu := range cpus {
					r.runOne(exe, dir, lib, c, cpu, round, raw)
				}
			}
		}
	}
	for _, c := range bench.Cases {
		for _, cpu := range cpus {
			if st := r.rounds.stats[roundKey("sluicehq", c, cpu)]; st == nil || len(st.ns) == 0 {
				return fmt.Errorf("sluicehq %v at -cpu %d: no successful run", c, cpu)
			}
		}
	}
	return r.rounds.write(filepath.Join(*outDir, "middleware-rounds.md"), r.machine)
}

// runOne runs one benchmark once and records its figures, or its failure.
func (r *report) runOne(exe, dir, lib string, c bench.Case, cpu, round int, raw io.Writer) {
	path, keys, _ := strings.Cut(c.String(), "/")
	sel := fmt.Sprintf("^BenchmarkMiddleware$/^%s$/^%s$/^%s$", regexp.QuoteMeta(lib), path, regexp.QuoteMeta(keys))
	cmd := exec.Command(exe, "-test.run", "^$", "-test.bench", sel, "-test.benchmem", "-test.count", "1",
		"-test.benchtime", *benchtime, "-test.cpu", strconv.Itoa(cpu), "-test.timeout", "10m")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	raw.Write(out)
	key := roundKey(lib, c, cpu)
	st := r.rounds.stats[key]
	if st == nil {
		st = &roundStats{}
		r.rounds.stats[key] = st
	}
	var m []string
	for _, line := range strings.Split(string(out), "\n") {
		if m = runLine.FindStringSubmatch(line); m != nil {
			break
		}
	}
	if err != nil || m == nil {
		why := firstFailure(out, err)
		st.failed = append(st.failed, fmt.Sprintf("round %d: %s", round+1, why))
		r.failures = append(r.failures, fmt.Sprintf("middleware %s %v -cpu %d, round %d (that run is left out): %s", lib, c, cpu, round+1, why))
		log.Printf("  %s %v -cpu %d: FAILED: %s", lib, c, cpu, why)
		return
	}
	f := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
	st.ns, st.bytes, st.allocs = append(st.ns, f(m[1])), append(st.bytes, f(m[2])), append(st.allocs, f(m[3]))
	if cpu == r.machine.cores || len(r.rounds.cpus) == 1 {
		bs := r.bench[lib+"/"+c.String()]
		if bs == nil {
			bs = &benchStats{}
			r.bench[lib+"/"+c.String()] = bs
		}
		bs.ns, bs.bytes, bs.allocs = append(bs.ns, f(m[1])), append(bs.bytes, f(m[2])), append(bs.allocs, f(m[3]))
	}
}

// firstFailure is the line of out that tells why a run failed.
func firstFailure(out []byte, err error) string {
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if strings.Contains(line, ".go:") || strings.HasPrefix(line, "panic:") {
			return line
		}
	}
	if err != nil {
		return err.Error()
	}
	return "no benchmark result in the output"
}

func parseCPUs(s string) []int {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			cpus = append(cpus, n)
		}
	}
	if len(cpus) == 0 {
		log.Fatalf("-cpu %q: want a comma-separated list of positive numbers", s)
	}
	return cpus
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// write writes the per-cpu tables to path, under a title of their own.
func (br *benchRounds) write(path string, m machine) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Middleware round trip, interleaved rounds\n\nWritten by `go run ./bench/cmd/report`. %s, %d cores, %s, %s.\n\n", m.cpu, m.cores, m.goVersion, m.date)
	br.tables(&b, "##")
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// tables writes, for each -cpu, the median ns/op with the min-max spread
// and allocs/op of every library and case, the speed-up over the fastest
// other library, then the load of each round and the failed runs.
func (br *benchRounds) tables(b *bytes.Buffer, heading string) {
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p("Load average (1, 5, 15 min) at the start of each round: %s. On a shared machine, compare figures of one run only: the rounds interleave the libraries, so load from elsewhere falls on each of them in turn.\n\n", strings.Join(br.loads, "; "))
	libs := libNames()
	for _, cpu := range br.cpus {
		p("%s -cpu %d\n\nMedian ns/op [min-max] over the rounds, allocs/op; a failed run is left out and counted.\n\n| library |", heading, cpu)
		for _, c := range bench.Cases {
			p(" %s |", caseTitle(c))
		}
		p("\n|---|%s\n", strings.Repeat("---:|", len(bench.Cases)))
		for _, lib := range libs {
			p("| %s |", lib)
			for _, c := range bench.Cases {
				p(" %s |", br.cell(lib, c, cpu))
			}
			p("\n")
		}
		p("| **speed-up of sluicehq over the fastest other library** |")
		for _, c := range bench.Cases {
			if s, best, ok := br.speedup(c, cpu); ok {
				p(" **%.2fx** (%s) |", s, best)
			} else {
				p(" – |")
			}
		}
		p("\n\n")
	}
	var failed []string
	for _, lib := range libs {
		for _, c := range bench.Cases {
			for _, cpu := range br.cpus {
				if st := br.stats[roundKey(lib, c, cpu)]; st != nil {
					for _, f := range st.failed {
						failed = append(failed, fmt.Sprintf("- %s %s -cpu %d, %s\n", lib, caseTitle(c), cpu, f))
					}
				}
			}
		}
	}
	if len(failed) > 0 {
		p("Failed runs (left out of the medians; the other figures stand):\n\n%s\n", strings.Join(failed, ""))
	}
}

// speedup is the fastest other library's median ns/op over ours at cpu.
func (br *benchRounds) speedup(c bench.Case, cpu int) (float64, string, bool) {
	best, bestNs := br.fastest(c, cpu)
	ours := bench.Median(br.stats[roundKey("sluicehq", c, cpu)].nsOrNil())
	if best == "" || ours == 0 {
		return 0, "", false
	}
	return bestNs / ours, best, true
}

func (st *roundStats) nsOrNil() []float64 {
	if st == nil {
		return nil
	}
	return st.ns
}

func (br *benchRounds) cell(lib string, c bench.Case, cpu int) string {
	st := br.stats[roundKey(lib, c, cpu)]
	if st == nil {
		return "–"
	}
	s := "–"
	if len(st.ns) > 0 {
		s = fmt.Sprintf("%.0f [%.0f-%.0f], %.0f allocs", bench.Median(st.ns), slices.Min(st.ns), slices.Max(st.ns), bench.Median(st.allocs))
	}
	if len(st.failed) > 0 {
		s += fmt.Sprintf(" (%d of %d runs FAILED)", len(st.failed), len(st.failed)+len(st.ns))
	}
	return s
}

// fastest is the other library with the lowest median at cpu.
func (br *benchRounds) fastest(c bench.Case, cpu int) (string, float64) {
	best, bestNs := "", 0.0
	for _, lib := range libNames()[1:] {
		st := br.stats[roundKey(lib, c, cpu)]
		if st == nil || len(st.ns) == 0 {
			continue
		}
		if ns := bench.Median(st.ns); best == "" || ns < bestNs {
			best, bestNs = lib, ns
		}
	}
	return best, bestNs
}

// targets are the memory path's targets, at every -cpu: at least 3x the
// fastest other library in every case (2.5x for one hot key allowed at
// more than one CPU, where every check updates one key), no allocation on
// the deny path and at most one on the allow path, and deny never slower
// than allow.
func (br *benchRounds) targets() []target {
	var ts []target
	for _, cpu := range br.cpus {
		var worst []string
		met := true
		maxAllow, maxDeny := 0.0, 0.0
		for _, c := range bench.Cases {
			want := 3.0
			if cpu > 1 && !c.Deny && c.Keys == 1 {
				want = 2.5
			}
			s, _, ok := br.speedup(c, cpu)
			if !ok || s < want {
				met = false
				worst = append(worst, fmt.Sprintf("%s %.2fx < %.1fx", caseTitle(c), s, want))
			}
			a := bench.Median(br.stats[roundKey("sluicehq", c, cpu)].allocsOrNil())
			if c.Deny {
				maxDeny = math.Max(maxDeny, a)
			} else {
				maxAllow = math.Max(maxAllow, a)
			}
		}
		m := "every case"
		if !met {
			m = strings.Join(worst, "; ")
		}
		ts = append(ts, target{fmt.Sprintf("memory, -cpu %d: at least 3x faster than the fastest other library in every case (2.5x for one hot key allowed on more than one CPU)", cpu), m, met})
		ts = append(ts, target{fmt.Sprintf("memory, -cpu %d: no allocation on deny, at most 1 on allow (headers on)", cpu),
			fmt.Sprintf("deny %.0f, allow %.0f allocs/op", maxDeny, maxAllow), maxDeny == 0 && maxAllow <= 1})
		ok := true
		var parts []string
		for _, keys := range []int{1, 10_000} {
			a := bench.Median(br.stats[roundKey("sluicehq", bench.Case{Keys: keys}, cpu)].nsOrNil())
			d := bench.Median(br.stats[roundKey("sluicehq", bench.Case{Deny: true, Keys: keys}, cpu)].nsOrNil())
			parts = append(parts, fmt.Sprintf("%s keys: deny %.0f vs allow %.0f ns/op", commas(keys), d, a))
			ok = ok && d <= a
		}
		ts = append(ts, target{fmt.Sprintf("memory, -cpu %d: deny path never slower than allow path", cpu), strings.Join(parts, "; "), ok})
	}
	return ts
}

func (st *roundStats) allocsOrNil() []float64 {
	if st == nil {
		return nil
	}
	return st.allocs
}
