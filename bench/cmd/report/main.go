// Command report runs every measurement of the bench module and writes
// bench/results/RESULTS.md, the SVG charts beside it, the raw benchmark
// output (bench.txt, benchstat's format) and the results section of
// docs/benchmarks.md. From the repository root:
//
//	go run ./bench/cmd/report
//
// It runs, in order: the configuration tests; the middleware benchmarks
// (go test -bench on the bench module, -count and -benchtime below); the
// bytes per tracked key of each in-memory store at 200,000 keys (one
// subprocess per library); on a redis-server it starts on a free loopback
// port: checks/s and round trips per check under 64 concurrent checks, the
// accuracy of four instances sharing the Redis, and a loopback HTTP load
// test; and the timeline simulation. The whole run takes about six minutes
// on 2 cores. Use -quick for a smoke test of a few seconds' worth of each.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/ratelimit"
	"github.com/sluicehq/ratelimit/bench"
	redisstore "github.com/sluicehq/ratelimit/stores/redis"
)

var (
	count     = flag.Int("count", 5, "rounds of the middleware benchmarks (the median is reported)")
	cpuList   = flag.String("cpu", "1,2", "the -cpu values of the middleware benchmarks (RESULTS.md shows the machine's core count; middleware-rounds.md every value)")
	benchtime = flag.String("benchtime", "1s", "go test -benchtime for the middleware benchmarks")
	perKeyN   = flag.Int("keys", 200_000, "keys inserted for the bytes-per-key measurement")
	redisTime = flag.Duration("redis-time", 3*time.Second, "duration of each Redis throughput measurement")
	workers   = flag.Int("workers", 64, "concurrent checks of the Redis throughput measurement")
	accTime   = flag.Duration("accuracy-time", 3*time.Second, "duration of each accuracy run")
	loadTime  = flag.Duration("load-time", 8*time.Second, "measured duration of each load test (after 1s of warm-up)")
	conns     = flag.Int("conns", 32, "connections of the load test")
	quick     = flag.Bool("quick", false, "smoke test: tiny durations, -count 1 (numbers are not meaningful)")
	outDir    = flag.String("out", "", "results directory (default: the bench module's results/)")
	docPath   = flag.String("doc", "", "Markdown file whose results section is rewritten (default: the repository's docs/benchmarks.md; \"-\" for none)")

	perKeyChild = flag.String("perkey-child", "", "internal: measure bytes per key of this library and print JSON")
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("report: ")
	flag.Parse()
	if *perKeyChild != "" {
		perKeyMain(*perKeyChild)
		return
	}
	if *quick {
		*count, *benchtime, *perKeyN = 1, "20ms", 20_000
		*redisTime, *accTime, *loadTime = 300*time.Millisecond, time.Second, 500*time.Millisecond
	}
	benchDir, err := findBenchDir()
	if err != nil {
		log.Fatal(err)
	}
	if *outDir == "" {
		*outDir = filepath.Join(benchDir, "results")
	}
	if *docPath == "" {
		*docPath = filepath.Join(benchDir, "..", "docs", "benchmarks.md")
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		log.Fatal(err)
	}
	r := &report{start: time.Now(), machine: machineInfo()}
	failed := false
	step := func(name string, f func() error) {
		t0 := time.Now()
		log.Printf("%s ...", name)
		if err := f(); err != nil {
			log.Printf("%s FAILED: %v", name, err)
			r.failures = append(r.failures, fmt.Sprintf("%s: %v", name, err))
			failed = true
			return
		}
		log.Printf("%s done in %v", name, time.Since(t0).Round(time.Second))
	}
	step("configuration tests", func() error { return runConfigTests(benchDir) })
	step("middleware benchmarks", func() error { return r.runBenchmarks(benchDir) })
	step("bytes per key", r.runPerKey)
	srv, err := bench.StartRedis()
	if err != nil {
		r.failures = append(r.failures, "redis: "+err.Error())
		failed = true
	} else {
		r.machine.redis = srv.Version
		step("redis throughput", func() error { return r.runRedis(srv) })
		step("accuracy", func() error { return r.runAccuracy(srv) })
		step("load test", func() error { return r.runLoad(srv) })
		srv.Stop()
	}
	r.timeline = bench.TimelineSeries()
	r.elapsed = time.Since(r.start)
	if err := r.write(); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s in %v", filepath.Join(*outDir, "RESULTS.md"), r.elapsed.Round(time.Second))
	if failed {
		log.Fatalf("%d step(s) failed: %s", len(r.failures), strings.Join(r.failures, "; "))
	}
}

// findBenchDir returns the bench module's directory, from the repository
// root or from inside bench/.
func findBenchDir() (string, error) {
	for _, d := range []string{"bench", ".", ".."} {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/sluicehq/ratelimit/bench\n")) {
			return filepath.Abs(d)
		}
	}
	return "", fmt.Errorf("run from the repository root or from bench/: no bench module found")
}

type report struct {
	start    time.Time
	elapsed  time.Duration
	machine  machine
	failures []string

	benchCmd string
	bench    map[string]*benchStats // "lib/allow/keys=1", at the machine's core count
	rounds   *benchRounds           // every run, at every -cpu
	perKey   []bench.PerKey
	redis    []bench.RedisResult
	accuracy []*bench.AccuracyRun
	load     []bench.LoadResult
	timeline []bench.Series
}

type machine struct {
	cpu, kernel, goVersion, goToolchain, date, loadavg, redis string
	cores                                                     int
}

func machineInfo() machine {
	m := machine{cores: runtime.NumCPU(), goVersion: runtime.Version(), date: time.Now().UTC().Format("2006-01-02 15:04 MST")}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			m.loadavg = strings.Join(f[:3], " ")
		}
	}
	if out, err := exec.Command("go", "version").Output(); err == nil {
		m.goToolchain = strings.TrimSpace(string(out))
	}
	return m
}

func runConfigTests(dir string) error {
	cmd := exec.Command("go", "test", "-count=1", "-run", "^(TestConfigurations|TestTrackersKeyed|TestRedisConfigurations)$", ".")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	os.Stderr.Write(out)
	if err != nil {
		return fmt.Errorf("a library is misconfigured, no number would be trustworthy: %w", err)
	}
	return nil
}

type benchStats struct {
	ns, bytes, allocs []float64
}

func perKeyMain(name string) {
	for _, lib := range bench.Libraries() {
		if lib.Name == name {
			pk, err := bench.BytesPerKey(lib, *perKeyN)
			if err != nil {
				log.Fatal(err)
			}
			json.NewEncoder(os.Stdout).Encode(pk)
			return
		}
	}
	log.Fatalf("no library %q", name)
}

// runPerKey measures each library in its own process, so that no library's
// leftovers (goroutines, caches, heap) weigh on another's figure.
func (r *report) runPerKey() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for _, lib := range bench.Libraries() {
		out, err := exec.Command(exe, "-perkey-child", lib.Name, "-keys", strconv.Itoa(*perKeyN)).Output()
		if err != nil {
			return fmt.Errorf("%s: %w", lib.Name, err)
		}
		var pk bench.PerKey
		if err := json.Unmarshal(out, &pk); err != nil {
			return fmt.Errorf("%s: %w", lib.Name, err)
		}
		log.Printf("  %s: %.1f B/key", pk.Library, pk.Bytes)
		r.perKey = append(r.perKey, pk)
	}
	return nil
}

var redisCases = []bench.Case{{Deny: false, Keys: 1}, {Deny: false, Keys: 10_000}, {Deny: true, Keys: 1}, {Deny: true, Keys: 10_000}}

func (r *report) runRedis(srv *bench.RedisServer) error {
	for _, c := range redisCases {
		for _, lib := range bench.RedisLibraries() {
			res, err := bench.RunRedis(srv, lib, c, *workers, *redisTime)
			if err != nil {
				return err
			}
			if res.Wrong > 0 {
				return fmt.Errorf("%s %v: %d wrong decisions", lib.Name, c, res.Wrong)
			}
			log.Printf("  %s %v: %.0f checks/s, %.2f round trips/check", lib.Name, c, res.ChecksPerSec(), res.RoundTripsPerCheck())
			r.redis = append(r.redis, res)
		}
	}
	return nil
}

func (r *report) runAccuracy(srv *bench.RedisServer) error {
	for _, alg := range bench.Algorithms {
		for _, p := range []bench.Pattern{bench.Steady, bench.Boundary} {
			run, err := bench.RunAccuracy(srv, alg, p, 4, 4, *accTime)
			if err != nil {
				return err
			}
			if run.Errors > 0 {
				return fmt.Errorf("%v %s: %d errors", alg, p, run.Errors)
			}
			log.Printf("  %v %s: %d checks, %d admitted", alg, p, run.Checks, len(run.Admitted))
			r.accuracy = append(r.accuracy, run)
		}
	}
	return nil
}

func (r *report) runLoad(srv *bench.RedisServer) error {
	c, _ := srv.Client(*conns)
	defer c.Close()
	lim := bench.Unlimited
	variants := []struct {
		name string
		h    func() http.Handler
	}{
		{"no limiter", func() http.Handler { return bench.OK }},
		{"sluicehq, memory store", func() http.Handler {
			return ratelimit.New(ratelimit.Limit{Rate: lim.N, Period: lim.Per}, ratelimit.ByIP())(bench.OK)
		}},
		{"sluicehq, Redis store", func() http.Handler {
			return ratelimit.NewRules([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: lim.N, Period: lim.Per}, Key: ratelimit.ByIP(), OnStoreError: ratelimit.FailurePolicy{Status: 503}}}, ratelimit.WithStore(redisstore.New(c)), ratelimit.WithTimeout(50*time.Millisecond))(bench.OK)
		}},
	}
	for _, v := range variants {
		res, err := bench.LoadTest(v.name, v.h(), *conns, time.Second, *loadTime, 5_000_000)
		if err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
		if res.Errors > 0 {
			return fmt.Errorf("%s: %d errors, %d non-200 responses", v.name, res.Errors, res.Non200)
		}
		// A non-200 is the limiter's own answer (the Redis row fails closed
		// with 503 past its 50 ms budget, which a loaded machine can reach):
		// it is counted in the row, and the other rows carry on.
		log.Printf("  %s: %.0f req/s, p50 %v, p99 %v, %d non-200", v.name, res.RPS(), res.P50, res.P99, res.Non200)
		r.load = append(r.load, res)
	}
	return nil
}

func moduleVersions() map[string]string {
	v := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			ver := d.Version
			if d.Replace != nil {
				ver = "local (" + d.Replace.Path + ")"
			}
			v[d.Path] = ver
		}
	}
	return v
}
