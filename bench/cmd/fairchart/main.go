// Command fairchart draws the per-flow admitted rate of a saturated
// server with and without fair queuing: one tenant offering ten times its
// fair share beside nine offering half of theirs, on 4 seats of 10 ms
// (exponential) service. The numbers come from the fair package's
// simulation harness (TestChartData, virtual time under
// testing/synctest), so they are the same on any machine. From the
// repository root:
//
//	go run ./bench/cmd/fairchart
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/sluicehq/ratelimit/bench"
)

// chartData mirrors the JSON TestChartData writes.
type chartData struct {
	Seats   int       `json:"seats"`
	SvcMS   float64   `json:"svc_ms"`
	Flows   []string  `json:"flows"`
	Offered []float64 `json:"offered"`
	FIFO    []float64 `json:"fifo"`
	Fair    []float64 `json:"fair"`
}

func main() {
	out := flag.String("out", "bench/results/fair_flows.svg", "the SVG to write")
	root := flag.String("root", ".", "the repository root (the core module)")
	flag.Parse()

	tmp, err := os.MkdirTemp("", "fairchart")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	data := filepath.Join(tmp, "flows.json")
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestChartData$", "./fair", "-args", "-fairchart.out="+data)
	cmd.Dir = *root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		log.Fatalf("fairchart: the simulation failed: %v", err)
	}
	b, err := os.ReadFile(data)
	if err != nil {
		log.Fatal(err)
	}
	var d chartData
	if err := json.Unmarshal(b, &d); err != nil {
		log.Fatalf("fairchart: %s: %v", data, err)
	}
	c := bench.BarChart{
		Title:      "Admitted requests per second, per flow, on a saturated server",
		YLabel:     "requests/s",
		Categories: d.Flows,
		Series:     []string{"offered", "admitted: first come, first served", "admitted: fair.Scheduler"},
		Values:     [][]float64{d.Offered, d.FIFO, d.Fair},
		Log:        true, // the elephant offers 20x what a light flow does
		Note: fmt.Sprintf("%d seats x %.0f ms mean service (capacity %.0f/s); one flow at 10x its fair share, nine at 0.5x; simulated, virtual time",
			d.Seats, d.SvcMS, float64(d.Seats)*1000/d.SvcMS),
	}
	if err := os.WriteFile(*out, []byte(c.SVG()), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", *out)
}
