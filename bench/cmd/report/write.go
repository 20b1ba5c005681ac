package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
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
	return bench.Median(st.ns), bench.Median(st.bytes), bench.Median(st.allocs), true
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
