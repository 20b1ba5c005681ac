// Command matrixcheck runs the configuration matrix in separate benchmark
// processes and checks every row against its bar in each one: a figure
// that holds in one process and not in another (a memory layout, a
// neighbour's load) is not a figure.
//
// Each process measures go-limiter and every row side by side, so each row is
// judged by its ratio to go-limiter in the same process. By default it runs
// BenchmarkConfigurationPairs, which measures each row and go-limiter turn
// about within the same second; with -bench '^BenchmarkConfigurations/' it
// runs the matrix that measures go-limiter once, before every row.
//
//	row                      bar, allow and deny, 1 key and 10,000 keys
//	stacked                  2x go-limiter
//	concurrency              2x go-limiter
//	every other row          3x go-limiter
//	allocations              at most 1 on allow, 0 on deny
//
// With -count, a process measures each cell as many times in a row and is
// judged by the median of them: for paired lines, the median of each
// sample's own ratio to go-limiter. A burst of load moves one sample of
// three; a memory layout that lasts the process moves them all.
//
// With -base, a second test binary (built from an earlier commit) runs in
// the same rounds, interleaved, and each row's median is compared with its
// median there.
//
//	cd bench && go test -c -o /tmp/bench.test . && go run ./cmd/matrixcheck -bin /tmp/bench.test -runs 10
//
// With -out, each process's output is kept in that directory (new-N.txt,
// base-N.txt), to be read again or charted.
//
// A paired line also carries the median time of a move of a cache line
// between two cores that the benchmark's probes measured while it ran
// (xcore-ns, see bench.CrossCoreNs): from -far on, the cell ran while the
// cores were far apart (or busy with other work), and a row's verdict says
// in how many of the processes it missed its bar in that was so. That explains a miss; it
// does not excuse one.
//
// It prints one line per row, case and -cpu and exits 1 if a bar was
// missed in any process.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

var (
	bin       = flag.String("bin", "", "the bench module's test binary (go test -c)")
	base      = flag.String("base", "", "an earlier build of the same binary, run interleaved for comparison")
	runs      = flag.Int("runs", 10, "separate processes per binary")
	cpus      = flag.String("cpu", "1,2", "the -test.cpu list of each process")
	benchtime = flag.String("benchtime", "150ms", "the -test.benchtime of each process")
	count     = flag.Int("count", 1, "the -test.count of each process: each cell is judged by the median of as many samples")
	outDir    = flag.String("out", "", "a directory to keep each process's output in")
	farNs     = flag.Float64("far", 100, "the cross-core hand-over time (ns) from which a cell ran on far (or busy) cores")
	match     = flag.String("bench", "^BenchmarkConfigurationPairs/", "the -test.bench pattern")
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("matrixcheck: ")
	flag.Parse()
	if *bin == "" {
		log.Fatal("-bin is required: cd bench && go test -c -o /tmp/bench.test .")
	}
	var cur, old []process
	for i := range *runs {
		p, err := run(*bin, "new", i+1)
		if err != nil {
			log.Fatalf("run %d of %s: %v", i+1, *bin, err)
		}
		cur = append(cur, p)
		if *base != "" {
			p, err := run(*base, "base", i+1)
			if err != nil {
				log.Fatalf("run %d of %s: %v", i+1, *base, err)
			}
			old = append(old, p)
		}
		fmt.Fprintf(os.Stderr, "round %d of %d done\n", i+1, *runs)
	}
	if !report(os.Stdout, cur, old, *farNs) {
		os.Exit(1)
	}
}

// run runs exe once and parses its benchmark lines; with -out, it keeps
// the output as <-out>/<name>-<i>.txt.
func run(exe, name string, i int) (process, error) {
	cmd := exec.Command(exe, "-test.run", "^$", "-test.bench", *match,
		"-test.benchtime", *benchtime, "-test.cpu", *cpus, "-test.benchmem",
		"-test.count", strconv.Itoa(*count))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out.String())
	}
	if *outDir != "" {
		if err := os.WriteFile(filepath.Join(*outDir, fmt.Sprintf("%s-%d.txt", name, i)), out.Bytes(), 0o644); err != nil {
			return nil, err
		}
	}
	return parse(&out)
}

// cell is a row's case at one -cpu in one process: the median of its
// samples' ns/op, and the most allocations any of them made.
// On paired lines (BenchmarkConfigurationPairs), ratio is the median of
// each sample's go-limiter time over its own, and xcore the median of the
// samples' cross-core hand-over times (each itself the median of the
// probes before the sample's turns).
type cell struct {
	ns, allocs, ratio, xcore float64
}

// process is one benchmark process's cells, keyed "row/case@cpu".
type process map[string]cell

var (
	line     = regexp.MustCompile(`^Benchmark(Configurations|ConfigurationPairs)/([^/]+)/((?:allow|deny)/keys=\d+)(?:-(\d+))?\s+\d+\s+([\d.]+) ns/op.*?([\d.]+) allocs/op`)
	peerLine = regexp.MustCompile(`\s([\d.]+) go-limiter-ns/op`)
	coreLine = regexp.MustCompile(`\s([\d.]+) xcore-ns`)
)

// parse reads a process's output. It refuses output that mixes the two
// benchmarks (their cells have the same names), and a paired line without
// go-limiter's figure.
func parse(r io.Reader) (process, error) {
	samples, ratios, xcores := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	p := process{}
	kind := ""
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if kind != "" && m[1] != kind {
			return nil, fmt.Errorf("the output mixes Benchmark%s and Benchmark%s: choose one with -bench", kind, m[1])
		}
		kind = m[1]
		cpu := m[4]
		if cpu == "" {
			cpu = "1"
		}
		ns, _ := strconv.ParseFloat(m[5], 64)
		allocs, _ := strconv.ParseFloat(m[6], 64)
		k := m[2] + "/" + m[3] + "@" + cpu
		samples[k] = append(samples[k], ns)
		c := p[k]
		if kind == "ConfigurationPairs" {
			pm := peerLine.FindStringSubmatch(sc.Text())
			if pm == nil || ns <= 0 {
				return nil, fmt.Errorf("a paired line without go-limiter-ns/op: %s", sc.Text())
			}
			peer, _ := strconv.ParseFloat(pm[1], 64)
			ratios[k] = append(ratios[k], peer/ns)
			c.ratio = median(ratios[k])
		}
		if cm := coreLine.FindStringSubmatch(sc.Text()); cm != nil {
			v, _ := strconv.ParseFloat(cm[1], 64)
			xcores[k] = append(xcores[k], v)
			c.xcore = median(xcores[k])
		}
		c.ns, c.allocs = median(samples[k]), max(c.allocs, allocs)
		p[k] = c
	}
	if len(p) == 0 {
		return nil, fmt.Errorf("no BenchmarkConfigurations or BenchmarkConfigurationPairs line in the output")
	}
	return p, sc.Err()
}

// bar is how many times faster than go-limiter row must be.
func bar(row string) float64 {
	switch row {
	case "stacked", "concurrency":
		return 2
	}
	return 3
}

// report prints each row's figures over the processes and reports whether
// every bar held in every process; a cell whose xcore reached farNs ran
// while the cores were far apart or busy.
func report(w io.Writer, cur, old []process, farNs float64) bool {
	var keys []string
	for _, p := range cur {
		for k := range p {
			if !strings.HasPrefix(k, "go-limiter/") && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "%-40s %9s %8s %8s %6s %7s  %s\n", "row/case@cpu", "median ns", "min x", "median x", "allocs", "vs base", "verdict")
	ok := true
	for _, k := range keys {
		row, rest, _ := strings.Cut(k, "/")
		peer := "go-limiter/" + rest
		var ns, ratios []float64
		allocs, below, belowFar, probed := 0.0, 0, 0, false
		for _, p := range cur {
			c, pc := p[k], p[peer]
			if c.ns > 0 {
				ns = append(ns, c.ns)
			}
			probed = probed || c.xcore > 0
			allocs = max(allocs, c.allocs)
			r := c.ratio
			if r == 0 && pc.ns > 0 && c.ns > 0 {
				r = pc.ns / c.ns
			}
			if r > 0 {
				ratios = append(ratios, r)
				if r < bar(row) {
					below++
					if c.xcore >= farNs {
						belowFar++
					}
				}
			}
		}
		maxAllocs := 1.0
		if strings.HasPrefix(rest, "deny/") {
			maxAllocs = 0
		}
		verdict := "ok"
		if len(ratios) < len(cur) {
			verdict = fmt.Sprintf("MISSING in %d of %d", len(cur)-len(ratios), len(cur))
			ratios = append(ratios, 0)
		}
		if below > 0 {
			verdict = strings.TrimPrefix(verdict+fmt.Sprintf(", BELOW %.0fx in %d of %d", bar(row), below, len(cur)), "ok, ")
			if probed {
				verdict += fmt.Sprintf(" (%d with slow cross-core hand-overs)", belowFar)
			}
		}
		if allocs > maxAllocs {
			verdict += fmt.Sprintf(", %.0f allocs > %.0f", allocs, maxAllocs)
		}
		ok = ok && verdict == "ok"
		vsBase := "-"
		if len(old) > 0 {
			var o []float64
			for _, p := range old {
				if c, found := p[k]; found {
					o = append(o, c.ns)
				}
			}
			if len(o) > 0 {
				vsBase = fmt.Sprintf("%.2f", median(ns)/median(o))
			}
		}
		fmt.Fprintf(w, "%-40s %9.0f %8.2f %8.2f %6.0f %7s  %s\n", k, median(ns), slices.Min(ratios), median(ratios), allocs, vsBase, verdict)
	}
	return ok
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
