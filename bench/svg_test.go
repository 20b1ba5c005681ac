package bench

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func wellFormed(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

func TestChartsWellFormed(t *testing.T) {
	bar := &BarChart{Title: "a < b & c", YLabel: "ns", Categories: []string{"x", "y"}, Series: []string{"p", "q"},
		Values: [][]float64{{1, 2}, {3, 1234.5}}}
	wellFormed(t, bar.SVG())
	line := &LineChart{Title: "t", XLabel: "s", YLabel: "n", Series: TimelineSeries(),
		Refs: []Ref{{Name: "limit", Y: 100, Color: "#c00"}}, Bands: []Band{{From: 3, To: 4.5, Label: "idle", Shade: true}}}
	s := line.SVG()
	wellFormed(t, s)
	for _, want := range []string{"<polyline", "limit", "idle"} {
		if !strings.Contains(s, want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestNiceScale(t *testing.T) {
	for _, c := range []struct{ max, step, top float64 }{{9422, 2000, 10000}, {300, 50, 300}, {1, 0.2, 1}} {
		step, top := niceScale(c.max, 6)
		if step != c.step || top != c.top {
			t.Errorf("niceScale(%v) = %v, %v; want %v, %v", c.max, step, top, c.step, c.top)
		}
	}
}
