package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Palette is the series colours of the charts (colour-blind friendly).
var Palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

// BarChart is a grouped bar chart: one group per category, one bar per
// series in each group.
type BarChart struct {
	Title      string
	YLabel     string
	Categories []string
	Series     []string
	Values     [][]float64 // Values[series][category]; NaN for none
	Note       string      // a line under the title
	Log        bool        // logarithmic value axis (values must be positive)
}

// SVG renders the chart as a standalone SVG document.
func (c *BarChart) SVG() string {
	const (
		width, height        = 960.0, 540.0
		left, right, top, bt = 100.0, 190.0, 70.0, 60.0
	)
	plotW, plotH := width-left-right, height-top-bt
	maxV, minV := 0.0, math.Inf(1)
	for _, s := range c.Values {
		for _, v := range s {
			if !math.IsNaN(v) {
				maxV = math.Max(maxV, v)
				if v > 0 {
					minV = math.Min(minV, v)
				}
			}
		}
	}
	var b strings.Builder
	header(&b, width, height, c.Title, c.Note)
	var y func(float64) float64
	var ticks []float64
	if c.Log && minV < maxV {
		lo := math.Floor(math.Log10(minV))
		hi := math.Ceil(math.Log10(maxV * 1.6)) // room for the value labels
		y = func(v float64) float64 {
			if v <= 0 {
				return top + plotH
			}
			return top + plotH - (math.Log10(v)-lo)/(hi-lo)*plotH
		}
		for e := lo; e <= hi; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		step, top1 := niceScale(maxV*1.12, 6) // room for the value labels
		y = func(v float64) float64 { return top + plotH - v/top1*plotH }
		for v := 0.0; v <= top1+step/2; v += step {
			ticks = append(ticks, v)
		}
	}
	for _, v := range ticks {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), left+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="12">%s</text>`+"\n", left-6, y(v)+4, fmtNum(v))
	}
	axes(&b, left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" font-size="13">%s</text>`+"\n", top+plotH/2, esc(c.YLabel))
	groupW := plotW / float64(len(c.Categories))
	barW := groupW * 0.8 / float64(len(c.Series))
	for ci, cat := range c.Categories {
		gx := left + groupW*float64(ci) + groupW*0.1
		for si := range c.Series {
			v := c.Values[si][ci]
			if math.IsNaN(v) {
				continue
			}
			x := gx + barW*float64(si)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %s</title></rect>`+"\n",
				x, y(v), barW*0.92, top+plotH-y(v), Palette[si%len(Palette)], esc(c.Series[si]), esc(cat), fmtNum(v))
			fmt.Fprintf(&b, `<text transform="translate(%.1f,%.1f) rotate(-90)" font-size="10" fill="#333">%s</text>`+"\n",
				x+barW*0.46+3.5, y(v)-3, fmtNum(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", left+groupW*(float64(ci)+0.5), top+plotH+22, esc(cat))
	}
	legend(&b, left+plotW+20, top, c.Series, nil)
	b.WriteString("</svg>\n")
	return b.String()
}

// LineChart plots series of (x, y) points on shared axes, with optional
// horizontal reference lines.
type LineChart struct {
	Title, Note    string
	XLabel, YLabel string
	Series         []Series
	Refs           []Ref
	Bands          []Band // shaded x ranges, e.g. phases of a workload
	YMax           float64
}

// Series is one line of a LineChart.
type Series struct {
	Name  string
	X, Y  []float64
	Dash  string // stroke-dasharray, "" for solid
	Color string // "" for the palette's
}

// Ref is a horizontal reference line.
type Ref struct {
	Name  string
	Y     float64
	Color string
}

// Band is a labelled range of x, shaded or not.
type Band struct {
	From, To float64
	Label    string
	Shade    bool
}

// SVG renders the chart as a standalone SVG document.
func (c *LineChart) SVG() string {
	const (
		width, height        = 960.0, 540.0
		left, right, top, bt = 80.0, 230.0, 70.0, 60.0
	)
	plotW, plotH := width-left-right, height-top-bt
	maxX, maxY := 0.0, c.YMax
	for _, s := range c.Series {
		for i := range s.X {
			maxX = math.Max(maxX, s.X[i])
			maxY = math.Max(maxY, s.Y[i])
		}
	}
	for _, r := range c.Refs {
		maxY = math.Max(maxY, r.Y)
	}
	ystep, ytop := niceScale(maxY*1.05, 6)
	xstep, xtop := niceScale(maxX, 10)
	x := func(v float64) float64 { return left + v/xtop*plotW }
	y := func(v float64) float64 { return top + plotH - v/ytop*plotH }
	var b strings.Builder
	header(&b, width, height, c.Title, c.Note)
	for _, band := range c.Bands {
		if band.Shade {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f3f3f3"/>`+"\n", x(band.From), top, x(band.To)-x(band.From), plotH)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#666">%s</text>`+"\n", (x(band.From)+x(band.To))/2, top+14, esc(band.Label))
	}
	for v := 0.0; v <= ytop+ystep/2; v += ystep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y(v), left+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="12">%s</text>`+"\n", left-6, y(v)+4, fmtNum(v))
	}
	for v := 0.0; v <= xtop+xstep/2; v += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x(v), top+plotH, x(v), top+plotH+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="12">%s</text>`+"\n", x(v), top+plotH+19, fmtNum(v))
	}
	axes(&b, left, top, plotW, plotH)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`+"\n", left+plotW/2, height-14, esc(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(18,%.1f) rotate(-90)" text-anchor="middle" font-size="13">%s</text>`+"\n", top+plotH/2, esc(c.YLabel))
	names := []string{}
	styles := []string{}
	for _, r := range c.Refs {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", left, y(r.Y), left+plotW, y(r.Y), r.Color)
	}
	for i, s := range c.Series {
		var pts strings.Builder
		for j := range s.X {
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(s.X[j]), y(s.Y[j]))
		}
		dash := ""
		if s.Dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.Dash)
		}
		color := s.Color
		if color == "" {
			color = Palette[i%len(Palette)]
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, dash, strings.TrimSpace(pts.String()))
		names = append(names, s.Name)
		styles = append(styles, color+"|"+s.Dash)
	}
	for _, r := range c.Refs {
		names = append(names, r.Name)
		styles = append(styles, r.Color+"|6 4")
	}
	legend(&b, left+plotW+20, top, names, styles)
	b.WriteString("</svg>\n")
	return b.String()
}

func header(b *strings.Builder, w, h float64, title, note string) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="Helvetica, Arial, sans-serif">`+"\n", w, h, w, h)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%.1f" y="28" text-anchor="middle" font-size="18" font-weight="bold">%s</text>`+"\n", w/2, esc(title))
	if note != "" {
		fmt.Fprintf(b, `<text x="%.1f" y="48" text-anchor="middle" font-size="12" fill="#555">%s</text>`+"\n", w/2, esc(note))
	}
}

func axes(b *strings.Builder, left, top, w, h float64) {
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top, left, top+h)
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, top+h, left+w, top+h)
}

// legend draws names with colour swatches; styles are "colour|dash" (nil:
// palette order, solid squares).
func legend(b *strings.Builder, x, y float64, names, styles []string) {
	for i, n := range names {
		yy := y + float64(i)*22
		if styles == nil {
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="14" height="14" fill="%s"/>`+"\n", x, yy, Palette[i%len(Palette)])
		} else {
			color, dash, _ := strings.Cut(styles[i], "|")
			d := ""
			if dash != "" {
				d = fmt.Sprintf(` stroke-dasharray="%s"`, dash)
			}
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2.5"%s/>`+"\n", x, yy+7, x+26, yy+7, color, d)
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" font-size="13">%s</text>`+"\n", x+32, yy+12, esc(n))
	}
}

// niceScale returns a round tick step and the axis top for values up to max.
func niceScale(max float64, ticks int) (step, top float64) {
	if max <= 0 {
		return 1, 1
	}
	raw := max / float64(ticks)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		step = m * mag
		if step >= raw {
			break
		}
	}
	return step, math.Ceil(max/step) * step
}

func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return commas(int64(v))
	case math.Abs(v) >= 100:
		return commas(int64(math.Round(v)))
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func commas(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func esc(s string) string { return html.EscapeString(s) }
