package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit/bench"
)

const (
	docStart = "<!-- results:start (written by go run ./bench/cmd/report; do not edit by hand) -->"
	docEnd   = "<!-- results:end -->"
)

func (r *report) write() error {
	charts := map[string]string{}
	if r.bench != nil {
		charts["ns_per_op.svg"] = r.nsChart().SVG()
	}
	if len(r.redis) > 0 {
		charts["redis_checks.svg"] = r.redisChart().SVG()
	}
	charts["timeline.svg"] = r.timelineChart().SVG()
	for name, svg := range charts {
		if err := os.WriteFile(filepath.Join(*outDir, name), []byte(svg), 0o644); err != nil {
			return err
		}
	}
	body := r.markdown("")
	doc := "# Benchmark results\n\n" +
		"Written by `go run ./bench/cmd/report` (method and fairness notes: [docs/benchmarks.md](../../docs/benchmarks.md)); every figure below was measured by that run. Do not edit: rerun.\n\n" + body
	if err := os.WriteFile(filepath.Join(*outDir, "RESULTS.md"), []byte(doc), 0o644); err != nil {
		return err
	}
	if *docPath == "-" {
		return nil
	}
	rel, err := filepath.Rel(filepath.Dir(*docPath), *outDir)
	if err != nil {
		return err
	}
	return updateDoc(*docPath, r.markdown(filepath.ToSlash(rel)+"/"))
}

// updateDoc replaces the results section of the Markdown file at path.
func updateDoc(path, body string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	s := string(b)
	i, j := strings.Index(s, docStart), strings.Index(s, docEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no results markers", path)
	}
	s = s[:i+len(docStart)] + "\n\n" + body + "\n" + s[j:]
	return os.WriteFile(path, []byte(s), 0o644)
}

func libNames() []string {
	var n []string
	for _, l := range bench.Libraries() {
		n = append(n, l.Name)
	}
	return n
}

func (r *report) med(lib string, c bench.Case) (ns, b, allocs float64, ok bool) {
	st := r.bench[lib+"/"+c.String()]
	if st == nil {
		return math.NaN(), math.NaN(), math.NaN(), false
	}
	return median(st.ns), median(st.bytes), median(st.allocs), true
}

func caseTitle(c bench.Case) string {
	path := "allow"
	if c.Deny {
		path = "deny"
	}
	k := "1 key"
	if c.Keys != 1 {
		k = fmt.Sprintf("%s keys", commas(c.Keys))
	}
	return path + ", " + k
}

func commas(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func (r *report) nsChart() *bench.BarChart {
	c := &bench.BarChart{
		Title:  "Full middleware round trip, in-process memory (lower is better)",
		Note:   fmt.Sprintf("ns/op, median of %d runs, b.RunParallel on %d cores, rate-limit headers on; %s", *count, r.machine.cores, r.machine.date),
		YLabel: "ns per request",
		Series: libNames(),
	}
	for _, cs := range bench.Cases {
		c.Categories = append(c.Categories, caseTitle(cs))
	}
	for _, lib := range c.Series {
		var row []float64
		for _, cs := range bench.Cases {
			ns, _, _, _ := r.med(lib, cs)
			row = append(row, math.Round(ns))
		}
		c.Values = append(c.Values, row)
	}
	return c
}

func (r *report) redisChart() *bench.BarChart {
	c := &bench.BarChart{
		Title:  "Redis: checks per second under 64 concurrent checks (higher is better)",
		Log:    true,
		Note:   fmt.Sprintf("one redis-server %s on loopback, shared by nothing else; %s", r.machine.redis, r.machine.date),
		YLabel: "checks per second (log scale)",
	}
	for _, l := range bench.RedisLibraries() {
		c.Series = append(c.Series, l.Name)
	}
	for _, cs := range redisCases {
		c.Categories = append(c.Categories, caseTitle(cs))
	}
	for _, lib := range c.Series {
		var row []float64
		for _, cs := range redisCases {
			v := math.NaN()
			for _, res := range r.redis {
				if res.Library == lib && res.Case == cs {
					v = math.Round(res.ChecksPerSec())
				}
			}
			row = append(row, v)
		}
		c.Values = append(c.Values, row)
	}
	return c
}

func (r *report) timelineChart() *bench.LineChart {
	l := bench.AccuracyLimit
	c := &bench.LineChart{
		Title:  "Admitted requests per trailing second, one client offering 3x the limit",
		Note:   fmt.Sprintf("limit %d/s (GCRA burst %d); simulated on the memory store with exact times, windows aligned at whole seconds", l.Rate, l.Capacity()),
		XLabel: "time (s)",
		YLabel: "requests admitted in the trailing second",
		Series: r.timeline,
		Refs: []bench.Ref{
			{Name: fmt.Sprintf("limit (%d/s)", l.Rate), Y: float64(l.Rate), Color: "#c00000"},
			{Name: fmt.Sprintf("2x limit (%d)", 2*l.Rate), Y: float64(2 * l.Rate), Color: "#555555"},
		},
	}
	for _, ph := range bench.Timeline {
		c.Bands = append(c.Bands, bench.Band{From: ph.From, To: ph.To, Label: ph.Label, Shade: ph.PerSec == 0})
	}
	return c
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}

func (r *report) markdown(img string) string {
	var b strings.Builder
	m := r.machine
	vers := moduleVersions()
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	p("### Machine\n\n| | |\n|---|---|\n")
	p("| CPU | %s |\n| cores (GOMAXPROCS) | %d |\n| Go | %s (%s) |\n| OS | %s |\n| Redis | %s |\n| date | %s |\n| load average at start | %s |\n| duration of the run | %v |\n\n",
		m.cpu, m.cores, m.goVersion, m.goToolchain, m.kernel, m.redis, m.date, m.loadavg, r.elapsed.Round(time.Second))
	if *quick {
		p("**This was a -quick smoke run: the numbers are not meaningful.**\n\n")
	}
	if len(r.failures) > 0 {
		p("**Failed steps:**\n\n")
		for _, f := range r.failures {
			p("- %s\n", f)
		}
		p("\n")
	}

	p("### Libraries\n\n| library | module | version | algorithm and store | headers |\n|---|---|---|---|---|\n")
	for _, l := range bench.Libraries() {
		p("| %s | `%s` | %s | %s | %s |\n", l.Name, l.Module, ver(vers, l.Module), l.Algorithm, l.Headers)
	}
	p("| redis_rate | `github.com/go-redis/redis_rate/v10` | %s | GCRA on Redis (no HTTP middleware: Redis only) | none |\n", ver(vers, "github.com/go-redis/redis_rate/v10"))
	p("\ngo-redis: %s.\n\n", ver(vers, "github.com/redis/go-redis/v9"))

	if r.bench != nil {
		p("### 1. Full middleware round trip, in-process memory\n\n")
		p("`ServeHTTP` of each library's net/http middleware around a handler that writes 200, rate-limit headers on, `b.RunParallel` on %d cores, keyed by the client IP of `RemoteAddr`. Allow path: a limit of 10^9 per hour that never denies (not 10^9 per second: go-limiter refills only interval/N tokens per elapsed interval, 1 token at 10^9/s, and would deny after its first second); deny path: 1 per hour, exhausted for every key before the timer starts. Median of %d runs of `-benchtime %s`, interleaved (each run goes through every library) (raw output: bench.txt, benchstat format). Command: `%s`.\n\n", m.cores, *count, *benchtime, r.benchCmd)
		if r.rounds != nil {
			var rb bytes.Buffer
			r.rounds.tables(&rb, "####")
			p("%s", rb.String())
			p("The tables below are the runs at -cpu %d (the machine's cores).\n\n", m.cores)
		}
		p("![ns/op by library](%sns_per_op.svg)\n\n", img)
		for _, t := range []struct {
			title string
			pick  func(ns, b, a float64) float64
			f     string
		}{
			{"ns/op", func(ns, _, _ float64) float64 { return ns }, "%.0f"},
			{"B/op", func(_, b, _ float64) float64 { return b }, "%.0f"},
			{"allocs/op", func(_, _, a float64) float64 { return a }, "%.0f"},
		} {
			p("**%s**\n\n| library |", t.title)
			for _, c := range bench.Cases {
				p(" %s |", caseTitle(c))
			}
			p("\n|---|")
			for range bench.Cases {
				p("---:|")
			}
			p("\n")
			for _, lib := range libNames() {
				p("| %s |", lib)
				for _, c := range bench.Cases {
					ns, bb, a, ok := r.med(lib, c)
					if !ok {
						p(" – |")
						continue
					}
					p(" "+t.f+" |", t.pick(ns, bb, a))
				}
				p("\n")
			}
			p("\n")
		}
		spread, where := 0.0, ""
		for name, st := range r.bench {
			lo, hi := slices.Min(st.ns), slices.Max(st.ns)
			if lo > 0 && hi/lo > spread {
				spread, where = hi/lo, name
			}
		}
		p("Run-to-run spread: the largest max/min ratio of ns/op over the %d runs is %.2f (%s). A spread far above 1.1 means the machine was busy; compare medians with care.\n\n", *count, spread, where)
		p("**Speed-up of sluicehq over the fastest other library** (its ns/op divided by ours)\n\n| case | fastest other | its ns/op | ours | speed-up |\n|---|---|---:|---:|---:|\n")
		for _, c := range bench.Cases {
			best, bestNs := r.fastestPeer(c)
			ours, _, _, _ := r.med("sluicehq", c)
			p("| %s | %s | %.0f | %.0f | %.2fx |\n", caseTitle(c), best, bestNs, ours, bestNs/ours)
		}
		p("\n")
	}

	if len(r.perKey) > 0 {
		p("### 2. Memory per tracked key\n\nLive heap (after GC) grown from before creating a fresh store to after counting one event for each of %s distinct client-IP keys through the library's limiter API, divided by the keys; each library in its own process. Key strings are built per event, so a store that keeps them pays for them.\n\n| library | bytes per key |\n|---|---:|\n", commas(*perKeyN))
		for _, pk := range r.perKey {
			p("| %s | %.1f |\n", pk.Library, pk.Bytes)
		}
		p("\n")
	}

	if len(r.redis) > 0 {
		p("### 3. Redis\n\n%d concurrent checks for %v per row, one go-redis client per library (pool of %d connections), on a private redis-server on loopback, flushed between rows. Checks go through each library's limiter API (redis_rate has no middleware). Round trips are counted by a go-redis hook (a pipeline is one); commands by INFO commandstats deltas, which include the commands a script runs. Allow path: 10^6/s (never denies; with 10^9/s redis_rate's float-seconds arithmetic cannot advance its state and skips its write, so the run checks that every library stored state for every key); deny path: 1 per hour, exhausted for every key first; every decision is checked.\n\n", *workers, *redisTime, *workers)
		p("![Redis checks/s](%sredis_checks.svg)\n\n", img)
		p("| case | library | checks/s | round trips/check | server commands/check | server CPU/check | failed checks | p50 | p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, res := range r.redis {
			p("| %s | %s | %.0f | %.2f | %.2f | %.1f µs | %s | %s | %s |\n", caseTitle(res.Case), res.Library, res.ChecksPerSec(), res.RoundTripsPerCheck(), res.CommandsPerCheck(), float64(res.ServerCPUPerCheck())/float64(time.Microsecond), failed(res), fmtDur(res.P50), fmtDur(res.P99))
		}
		p("\nchecks/s counts decided checks; a failed check returned an error (throttled gives up after 10 compare-and-swap conflicts on a hot key). Round trips, commands and server CPU (INFO cpu, user + system, of the single redis-server) are per check attempted. With 64 checks in flight the server is the bottleneck, so checks/s follows its CPU per check.\n")
		p("\n")
	}

	if len(r.accuracy) > 0 {
		l := bench.AccuracyLimit
		p("### 4. Accuracy: four instances sharing one Redis\n\n")
		p("Four `Limiter`s, each with its own go-redis client and `redisstore.Store`, check one shared key under %d/s (%d workers each) for %v per run. *steady*: every worker checks back to back; *boundary*: workers check only in the last and first 200 ms of each second (windows are epoch-aligned on Redis's clock, which is this host's). An admission counts in an interval only if its whole round trip lies inside it, so the decision (made on Redis's clock) certainly fell in it: the count can only understate by requests in flight at the edges (the p99 and largest round trip of the admitted checks are given). Most denied checks are answered by the store's local denied cache (the default) without a round trip. Fixed-window admissions are placed in their window exactly, from ResetAfter.\n\n", l.Rate, r.accuracy[0].Workers, *accTime)
		p("| algorithm | load | checks | admitted | interval | max admitted | bound | holds | admitted round trip p99 / max |\n|---|---|---:|---:|---|---:|---:|---|---:|\n")
		for _, run := range r.accuracy {
			for _, c := range bench.Checks(run) {
				holds := "yes"
				if !c.OK {
					holds = "**no**"
				}
				p("| %v | %s | %d | %d | %s | %d | %d (%s) | %s | %s |\n", run.Algorithm, run.Pattern, run.Checks, len(run.Admitted), c.What, c.Max, c.Bound, c.Note, holds, fmtDur(run.RTTp99)+" / "+fmtDur(run.RTTMax))
			}
		}
		p("\n")
	}

	if len(r.load) > 0 {
		p("### 5. Load test on loopback\n\nA real `net/http` server on 127.0.0.1 serving a handler that writes 200, %d keep-alive connections from a Go client in the same process (one worker each), 1 s warm-up then %v. All requests come from 127.0.0.1: one hot key, limit 10^9 per hour (never denies). Added latency is the difference from *no limiter* at the same percentile.\n\n", *conns, *loadTime)
		p("| server | requests | non-200 | req/s | p50 | p90 | p99 | p99.9 | added p50 | added p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		base := r.load[0]
		for _, l := range r.load {
			p("| %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %s |\n", l.Name, l.Requests, l.Non200, l.RPS(), fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), signed(l.P50-base.P50), signed(l.P99-base.P99))
		}
		p("\nA non-200 is the limiter's own answer: the Redis row fails closed (503) when a check takes longer than its 50 ms budget.\n")
		p("\n")
	}

	p("### 6. What the algorithms admit over time\n\n![timeline](%stimeline.svg)\n\n", img)
	p("One client offers 3x the limit (%d/s) in the phases shown, idle in the grey bands; the curves count admissions in the trailing second. Simulated on the memory store with explicit timestamps (the Redis store gives the same decisions; section 4 measures it on Redis).\n\n", bench.AccuracyLimit.Rate)
	p("| algorithm | most admitted in any trailing second |\n|---|---:|\n")
	for _, s := range r.timeline[:len(bench.Algorithms)] {
		most := 0.0
		for _, y := range s.Y {
			most = math.Max(most, y)
		}
		p("| %s | %.0f |\n", s.Name, most)
	}
	p("\n")

	p("### Performance targets\n\n| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.targets() {
		met := "yes"
		if !t.met {
			met = "**no**"
		}
		p("| %s | %s | %s |\n", t.name, t.measured, met)
	}
	p("\n")
	return b.String()
}

func failed(r bench.RedisResult) string {
	if r.Errors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.1f%%)", r.Errors, 100*float64(r.Errors)/float64(r.Checks))
}

func signed(d time.Duration) string {
	if d < 0 {
		return "-" + fmtDur(-d)
	}
	return "+" + fmtDur(d)
}

func ver(v map[string]string, mod string) string {
	if s, ok := v[mod]; ok && s != "" {
		return s
	}
	if mod == "github.com/sluicehq/ratelimit" {
		return "this repository"
	}
	return "?"
}

func (r *report) fastestPeer(c bench.Case) (string, float64) {
	best, bestNs := "", math.Inf(1)
	for _, lib := range libNames()[1:] {
		if ns, _, _, ok := r.med(lib, c); ok && ns < bestNs {
			best, bestNs = lib, ns
		}
	}
	return best, bestNs
}
