package main

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit/bench"
)

// printf appends formatted text to the report being written.
type printf func(format string, a ...any)

// markdown returns the results section of the benchmark document; img is the
// path prefix of the charts, relative to the document.
func (r *report) markdown(img string) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	r.mdMachine(p)
	mdLibraries(p)
	if r.bench != nil {
		r.mdMiddleware(p, img)
	}
	if len(r.perKey) > 0 {
		r.mdPerKey(p)
	}
	if len(r.redis) > 0 {
		r.mdRedis(p, img)
	}
	if len(r.accuracy) > 0 {
		r.mdAccuracy(p)
	}
	if len(r.load) > 0 {
		r.mdLoad(p)
	}
	r.mdTimeline(p, img)
	r.mdTargets(p)
	return b.String()
}

// mdMachine writes the machine table and the failed steps.
func (r *report) mdMachine(p printf) {
	m := r.machine
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
}

// mdLibraries writes the table of the libraries compared and their versions.
func mdLibraries(p printf) {
	vers := moduleVersions()
	p("### Libraries\n\n| library | module | version | algorithm and store | headers |\n|---|---|---|---|---|\n")
	for _, l := range bench.Libraries() {
		p("| %s | `%s` | %s | %s | %s |\n", l.Name, l.Module, ver(vers, l.Module), l.Algorithm, l.Headers)
	}
	p("| redis_rate | `github.com/go-redis/redis_rate/v10` | %s | GCRA on Redis (no HTTP middleware: Redis only) | none |\n", ver(vers, "github.com/go-redis/redis_rate/v10"))
	p("\ngo-redis: %s.\n\n", ver(vers, "github.com/redis/go-redis/v9"))
}

// mdMiddleware writes section 1, the in-process middleware benchmark.
func (r *report) mdMiddleware(p printf, img string) {
	m := r.machine
	p("### 1. Full middleware round trip, in-process memory\n\n")
	p("`ServeHTTP` of each library's net/http middleware around a handler that writes 200, rate-limit headers on, `b.RunParallel` on %d cores, keyed by the client IP of `RemoteAddr`. Allow path: a limit of 10^9 per hour that never denies (not 10^9 per second: go-limiter refills only interval/N tokens per elapsed interval, 1 token at 10^9/s, and would deny after its first second); deny path: 1 per hour, exhausted for every key before the timer starts. Median of %d runs of `-benchtime %s`, interleaved (each run goes through every library) (raw output: bench.txt, benchstat format). Command: `%s`.\n\n", m.cores, *count, *benchtime, r.benchCmd)
	if r.rounds != nil {
		var rb bytes.Buffer
		r.rounds.tables(&rb, "####")
		p("%s", rb.String())
		p("The tables below are the runs at -cpu %d (the machine's cores).\n\n", m.cores)
	}
	p("![ns/op by library](%sns_per_op.svg)\n\n", img)
	r.mdBenchTables(p)
	r.mdSpeedup(p)
}

// mdBenchTables writes the median ns/op, B/op and allocs/op of each library and case.
func (r *report) mdBenchTables(p printf) {
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
}

// mdSpeedup writes the run-to-run spread and the speed-up over the fastest peer.
func (r *report) mdSpeedup(p printf) {
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

// mdPerKey writes section 2, the memory per tracked key.
func (r *report) mdPerKey(p printf) {
	p("### 2. Memory per tracked key\n\nLive heap (after GC) grown from before creating a fresh store to after counting one event for each of %s distinct client-IP keys through the library's limiter API, divided by the keys; each library in its own process. Key strings are built per event, so a store that keeps them pays for them.\n\n| library | bytes per key |\n|---|---:|\n", commas(*perKeyN))
	for _, pk := range r.perKey {
		p("| %s | %.1f |\n", pk.Library, pk.Bytes)
	}
	p("\n")
}

// mdRedis writes section 3, the Redis throughput table.
func (r *report) mdRedis(p printf, img string) {
	p("### 3. Redis\n\n%d concurrent checks for %v per row, one go-redis client per library (pool of %d connections), on a private redis-server on loopback, flushed between rows. Checks go through each library's limiter API (redis_rate has no middleware). Round trips are counted by a go-redis hook (a pipeline is one); commands by INFO commandstats deltas, which include the commands a script runs. Allow path: 10^6/s (never denies; with 10^9/s redis_rate's float-seconds arithmetic cannot advance its state and skips its write, so the run checks that every library stored state for every key); deny path: 1 per hour, exhausted for every key first; every decision is checked.\n\n", *workers, *redisTime, *workers)
	p("![Redis checks/s](%sredis_checks.svg)\n\n", img)
	p("| case | library | checks/s | round trips/check | server commands/check | server CPU/check | failed checks | p50 | p99 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, res := range r.redis {
		p("| %s | %s | %.0f | %.2f | %.2f | %.1f µs | %s | %s | %s |\n", caseTitle(res.Case), res.Library, res.ChecksPerSec(), res.RoundTripsPerCheck(), res.CommandsPerCheck(), float64(res.ServerCPUPerCheck())/float64(time.Microsecond), failed(res), fmtDur(res.P50), fmtDur(res.P99))
	}
	p("\nchecks/s counts decided checks; a failed check returned an error (throttled gives up after 10 compare-and-swap conflicts on a hot key). Round trips, commands and server CPU (INFO cpu, user + system, of the single redis-server) are per check attempted. With 64 checks in flight the server is the bottleneck, so checks/s follows its CPU per check.\n")
	p("\n")
}

// mdAccuracy writes section 4, the accuracy of instances sharing one Redis.
func (r *report) mdAccuracy(p printf) {
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

// mdLoad writes section 5, the loopback load test.
func (r *report) mdLoad(p printf) {
	p("### 5. Load test on loopback\n\nA real `net/http` server on 127.0.0.1 serving a handler that writes 200, %d keep-alive connections from a Go client in the same process (one worker each), 1 s warm-up then %v. All requests come from 127.0.0.1: one hot key, limit 10^9 per hour (never denies). Added latency is the difference from *no limiter* at the same percentile.\n\n", *conns, *loadTime)
	p("| server | requests | non-200 | req/s | p50 | p90 | p99 | p99.9 | added p50 | added p99 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	base := r.load[0]
	for _, l := range r.load {
		p("| %s | %d | %d | %.0f | %s | %s | %s | %s | %s | %s |\n", l.Name, l.Requests, l.Non200, l.RPS(), fmtDur(l.P50), fmtDur(l.P90), fmtDur(l.P99), fmtDur(l.P999), signed(l.P50-base.P50), signed(l.P99-base.P99))
	}
	p("\nA non-200 is the limiter's own answer: the Redis row fails closed (503) when a check takes longer than its 50 ms budget.\n")
	p("\n")
}

// mdTimeline writes section 6, what the algorithms admit over time.
func (r *report) mdTimeline(p printf, img string) {
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
}

// mdTargets writes the performance targets and whether they were met.
func (r *report) mdTargets(p printf) {
	p("### Performance targets\n\n| target | measured | met |\n|---|---|---|\n")
	for _, t := range r.targets() {
		met := "yes"
		if !t.met {
			met = "**no**"
		}
		p("| %s | %s | %s |\n", t.name, t.measured, met)
	}
	p("\n")
}
