package report

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// Palette colours series that do not name their own: Tableau 10 without
// its grey, which OtherColor keeps for "the rest".
var Palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}

// OtherColor is the colour of a series that lumps the rest together.
const OtherColor = "#9a9a9a"

// Series is one line of a LineChart: a value per bin.
type Series struct {
	Name   string
	Color  string // "" picks from Palette by position
	Values []float64
}

// LineChart plots series over the bins of a capture.
type LineChart struct {
	ID      string // unique on the page; tests and links find the chart by it
	Title   string
	YName   string // the quantity and unit of the y axis: "throughput (bit/s)"
	Unit    string // appended to values in tooltips: "bit/s"
	Integer bool   // values are counts: whole-number ticks
	Note    string // a line under the chart
	Empty   string // shown over the plot when there is nothing to plot
	Wide    bool   // spans the page's width
	Stacked bool   // series are bands stacked in order, the first at the bottom
	Bins    Bins
	Series  []Series
}

// BarChart is horizontal bars, one per label.
type BarChart struct {
	ID    string
	Title string
	XName string // the quantity and unit of the value axis
	Unit  string // appended to values in tooltips
	Note  string
	Empty string
	Bars  []Bar
}

// Bar is one bar; Tip, when set, replaces the tooltip's default text.
type Bar struct {
	Label string
	Value float64
	Tip   string
}

// Table is an HTML table.
type Table struct {
	ID      string
	Title   string
	Note    string
	Columns []Column
	Rows    []Row
}

// Column is a table column; numeric ones align right.
type Column struct {
	Name    string
	Numeric bool
}

// Row is a table row; Color, when set, puts a swatch in its first cell
// to tie it to a chart's series.
type Row struct {
	Color string
	Cells []string
}

// Geometry of charts, in SVG user units (pixels at 100%).
const (
	chartW        = 720
	wideW         = 1440 // a wide chart spans two columns at the same text size
	marginL       = 70
	marginR       = 18
	titleY        = 20
	legendY       = 34 // first legend row's baseline area
	legendRow     = 17
	plotH         = 210
	charW         = 6.4 // rough width of a character at 11px, for layout
	barRow        = 22
	barH          = 14
	barValueW     = 90 // room right of the longest bar for its value
	maxLabelChars = 40 // longer bar labels are cut, whole in the tooltip
)

// f formats a coordinate.
func f(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func itoa(i int) string { return strconv.Itoa(i) }

func (s *Series) color(i int) string {
	if s.Color != "" {
		return s.Color
	}
	return Palette[i%len(Palette)]
}

// legendLayout places legend entries left to right, wrapping rows, and
// returns their positions and the rows used.
func legendLayout(names []string, width int) (xs, ys []float64, rows int) {
	x, row := float64(marginL), 0
	for _, n := range names {
		w := 16 + charW*float64(utf8Len(n)) + 16
		if x+w > float64(width-marginR) && x > marginL {
			x, row = marginL, row+1
		}
		xs = append(xs, x)
		ys = append(ys, float64(legendY+row*legendRow))
		x += w
	}
	if len(names) > 0 {
		rows = row + 1
	}
	return xs, ys, rows
}

func utf8Len(s string) int { return len([]rune(s)) }

// svgOpen starts a chart's svg element with its accessible title and its
// visible one.
func svgOpen(b *bytes.Buffer, id, class, title string, w int, h float64, attrs string) {
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" class="chart ` + class + `" id="` + esc(id) + `" viewBox="0 0 ` +
		itoa(w) + " " + f(h) + `" role="img" aria-labelledby="` + esc(id) + `-t"` + attrs + ">\n")
	b.WriteString(`<title id="` + esc(id) + `-t">` + esc(title) + "</title>\n")
	b.WriteString(`<text class="title" x="8" y="` + itoa(titleY) + `">` + esc(title) + "</text>\n")
}

func figureOpen(b *bytes.Buffer, wide bool) {
	if wide {
		b.WriteString("<figure class=\"wide\">\n")
	} else {
		b.WriteString("<figure>\n")
	}
}

func figureClose(b *bytes.Buffer, note string) {
	if note != "" {
		b.WriteString("<figcaption>" + esc(note) + "</figcaption>\n")
	}
	b.WriteString("</figure>\n")
}

// figure writes a chart's svg element, by write, inside its figure.
func figure(b *bytes.Buffer, wide bool, note string, write func(*bytes.Buffer)) {
	figureOpen(b, wide)
	write(b)
	figureClose(b, note)
}

// svgOf is what write writes: a chart's svg element alone.
func svgOf(write func(*bytes.Buffer)) string {
	var b bytes.Buffer
	write(&b)
	return b.String()
}

func (c *LineChart) render(b *bytes.Buffer) { figure(b, c.Wide, c.Note, c.writeSVG) }

// SVG returns the chart's svg element alone.
func (c *LineChart) SVG() string { return svgOf(c.writeSVG) }

func (c *LineChart) writeSVG(b *bytes.Buffer) {
	n := max(c.Bins.N, 1)
	var names []string
	if len(c.Series) > 1 {
		for _, s := range c.Series {
			names = append(names, s.Name)
		}
	}
	width := chartW
	if c.Wide {
		width = wideW
	}
	lx, ly, rows := legendLayout(names, width)
	top := float64(legendY + rows*legendRow + 6)
	if rows == 0 {
		top = legendY
	}
	bottom := top + plotH
	h := bottom + 42
	left, right := float64(marginL), float64(width-marginR)
	plotW := right - left

	maxV := 0.0
	sum := make([]float64, n) // stacked: the top of the stack per bin
	for _, s := range c.Series {
		for k := range n {
			v := at(s.Values, k)
			if math.IsInf(v, 0) || math.IsNaN(v) {
				continue
			}
			if c.Stacked {
				sum[k] += v
				v = sum[k]
			}
			maxV = max(maxV, v)
		}
	}
	ya := newValueAxis(maxV, c.Integer)
	xa := newTimeAxis(c.Bins)
	y := func(v float64) float64 { return bottom - plotH*min(max(v, 0), ya.top)/ya.top }
	x := func(t float64) float64 { return left + plotW*t/xa.span } // t in axis units

	class := "line"
	if c.Stacked {
		class = "line stacked"
	}
	svgOpen(b, c.ID, class, c.Title, width, h, ` data-series="`+itoa(len(c.Series))+`" data-bins="`+itoa(n)+`"`)

	// Legend: a swatch and the name, with the series' total as a tooltip.
	if len(names) > 0 {
		b.WriteString(`<g class="legend">` + "\n")
		for i := range c.Series {
			s := &c.Series[i]
			total := 0.0
			for _, v := range s.Values {
				total += v
			}
			b.WriteString(`<g class="legend-item" data-series="` + itoa(i) + `"><rect x="` + f(lx[i]) + `" y="` + f(ly[i]-9) +
				`" width="11" height="11" rx="2" fill="` + esc(s.color(i)) + `"/><text x="` + f(lx[i]+16) + `" y="` + f(ly[i]) + `">` +
				esc(s.Name) + "</text><title>" + esc(s.Name) + ": peak " + esc(c.value(peak(s.Values))) + "</title></g>\n")
		}
		b.WriteString("</g>\n")
	}

	// Grid and axes.
	b.WriteString(`<g class="grid">`)
	for _, t := range ya.ticks {
		b.WriteString(`<line x1="` + f(left) + `" x2="` + f(right) + `" y1="` + f(y(t)) + `" y2="` + f(y(t)) + `"/>`)
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axis y">`)
	for _, t := range ya.ticks {
		b.WriteString(`<text x="` + f(left-6) + `" y="` + f(y(t)+4) + `" text-anchor="end">` + esc(ya.label(t)) + "</text>")
	}
	b.WriteString(`<text class="name" transform="translate(14 ` + f((top+bottom)/2) + `) rotate(-90)" text-anchor="middle">` + esc(c.YName) + "</text>")
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axis x"><line x1="` + f(left) + `" x2="` + f(right) + `" y1="` + f(bottom) + `" y2="` + f(bottom) + `"/>`)
	for _, t := range xa.ticks {
		b.WriteString(`<line x1="` + f(x(t)) + `" x2="` + f(x(t)) + `" y1="` + f(bottom) + `" y2="` + f(bottom+4) + `"/>`)
		b.WriteString(`<text x="` + f(x(t)) + `" y="` + f(bottom+16) + `" text-anchor="middle">` + esc(xa.label(t)) + "</text>")
	}
	b.WriteString(`<text class="name" x="` + f((left+right)/2) + `" y="` + f(bottom+34) + `" text-anchor="middle">time since first frame (` +
		xa.unit + `), bins of ` + esc(FormatDuration(c.Bins.Width)) + "</text>")
	b.WriteString("</g>\n")

	// Series: a point per bin at the bin's middle; small dots when bins
	// are few enough to tell apart, so a lone bin still shows.
	bw := plotW / float64(n)
	cx := func(k int) float64 { return left + bw*(float64(k)+0.5) }
	base := make([]float64, n) // stacked: the top of the series below
	for i := range c.Series {
		s := &c.Series[i]
		col := esc(s.color(i))
		b.WriteString(`<g class="series" data-series="` + itoa(i) + `" data-name="` + esc(s.Name) + `" stroke="` + col + `" fill="` + col + `">`)
		tops := make([]float64, n)
		var pts strings.Builder
		for k := range n {
			tops[k] = y(base[k] + at(s.Values, k))
			if k > 0 {
				pts.WriteByte(' ')
			}
			pts.WriteString(f(cx(k)) + "," + f(tops[k]))
		}
		if c.Stacked {
			// A band: this series' top edge, then back along the one below.
			for k := n - 1; k >= 0; k-- {
				pts.WriteString(" " + f(cx(k)) + "," + f(y(base[k])))
				base[k] += at(s.Values, k)
			}
			b.WriteString(`<polygon points="` + pts.String() + `"/>`)
		} else {
			b.WriteString(`<polyline points="` + pts.String() + `"/>`)
		}
		if n <= 60 {
			for k := range n {
				b.WriteString(`<circle cx="` + f(cx(k)) + `" cy="` + f(tops[k]) + `" r="2.2"/>`)
			}
		}
		b.WriteString("</g>\n")
	}
	if c.Empty != "" && maxV == 0 {
		b.WriteString(`<text class="empty" x="` + f((left+right)/2) + `" y="` + f((top+bottom)/2) + `" text-anchor="middle">` + esc(c.Empty) + "</text>\n")
	}

	// A transparent column per bin whose tooltip gives every series'
	// value there: one hover shows the whole bin.
	if len(c.Series) > 0 {
		bwUnit := float64(c.Bins.Width) / xa.div
		b.WriteString(`<g class="hits">`)
		for k := 0; k < n; k++ {
			t0 := float64(k) * float64(c.Bins.Width) / xa.div
			t1 := float64(k+1) * float64(c.Bins.Width) / xa.div
			var tip strings.Builder
			tip.WriteString(formatTick(t0, bwUnit, 1, "") + "–" + formatTick(t1, bwUnit, 1, "") + " " + xa.unit)
			for i := range c.Series {
				tip.WriteString("\n" + c.Series[i].Name + ": " + c.value(at(c.Series[i].Values, k)))
			}
			b.WriteString(`<rect class="hit" x="` + f(left+bw*float64(k)) + `" y="` + f(top) + `" width="` + f(bw) + `" height="` + f(plotH) +
				`"><title>` + esc(tip.String()) + "</title></rect>")
		}
		b.WriteString("</g>\n")
	}
	b.WriteString("</svg>\n")
}

// value formats a value of the chart for a tooltip.
func (c *LineChart) value(v float64) string {
	if c.Integer {
		return FormatCount(uint64(max(v, 0))) + unitSuffix(c.Unit)
	}
	return FormatSI(v, c.Unit)
}

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

func at(v []float64, k int) float64 {
	if k < len(v) {
		return v[k]
	}
	return 0
}

func peak(v []float64) float64 {
	m := 0.0
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

func (c *BarChart) render(b *bytes.Buffer) { figure(b, false, c.Note, c.writeSVG) }

// SVG returns the chart's svg element alone.
func (c *BarChart) SVG() string { return svgOf(c.writeSVG) }

func (c *BarChart) writeSVG(b *bytes.Buffer) {
	labelW := 40.0
	total, maxV := 0.0, 0.0
	for _, bar := range c.Bars {
		labelW = max(labelW, charW*float64(min(utf8Len(bar.Label), maxLabelChars)))
		total += bar.Value
		maxV = max(maxV, bar.Value)
	}
	left := 8 + labelW + 8
	right := float64(chartW - barValueW)
	top := float64(legendY)
	rows := max(len(c.Bars), 1)
	bottom := top + float64(rows*barRow)
	h := bottom + 42
	xa := newValueAxis(maxV, true)
	x := func(v float64) float64 { return left + (right-left)*min(max(v, 0), xa.top)/xa.top }

	svgOpen(b, c.ID, "bars", c.Title, chartW, h, ` data-bars="`+itoa(len(c.Bars))+`"`)
	b.WriteString(`<g class="grid">`)
	for _, t := range xa.ticks {
		b.WriteString(`<line x1="` + f(x(t)) + `" x2="` + f(x(t)) + `" y1="` + f(top) + `" y2="` + f(bottom) + `"/>`)
	}
	b.WriteString("</g>\n")
	b.WriteString(`<g class="axis x"><line x1="` + f(left) + `" x2="` + f(left) + `" y1="` + f(top) + `" y2="` + f(bottom) + `"/>`)
	for _, t := range xa.ticks {
		b.WriteString(`<text x="` + f(x(t)) + `" y="` + f(bottom+16) + `" text-anchor="middle">` + esc(xa.label(t)) + "</text>")
	}
	b.WriteString(`<text class="name" x="` + f((left+right)/2) + `" y="` + f(bottom+34) + `" text-anchor="middle">` + esc(c.XName) + "</text></g>\n")
	b.WriteString(`<g class="bars">` + "\n")
	for i, bar := range c.Bars {
		yy := top + float64(i*barRow) + (barRow-barH)/2
		tip := bar.Tip
		if tip == "" {
			tip = bar.Label + ": " + FormatCount(uint64(max(bar.Value, 0))) + unitSuffix(c.Unit)
			if total > 0 {
				tip += " (" + strconv.FormatFloat(100*bar.Value/total, 'f', 1, 64) + "%)"
			}
		}
		label := bar.Label
		if r := []rune(label); len(r) > maxLabelChars {
			label = string(r[:maxLabelChars-1]) + "…"
		}
		b.WriteString(`<g class="bar" data-label="` + esc(bar.Label) + `"><title>` + esc(tip) + `</title>` +
			`<text class="label" x="` + f(left-8) + `" y="` + f(yy+barH-3) + `" text-anchor="end">` + esc(label) + `</text>` +
			`<rect x="` + f(left) + `" y="` + f(yy) + `" width="` + f(x(bar.Value)-left) + `" height="` + itoa(barH) + `"/>` +
			`<text class="value" x="` + f(x(bar.Value)+5) + `" y="` + f(yy+barH-3) + `">` + esc(FormatCount(uint64(max(bar.Value, 0)))) + "</text></g>\n")
	}
	b.WriteString("</g>\n")
	if len(c.Bars) == 0 && c.Empty != "" {
		b.WriteString(`<text class="empty" x="` + f((left+right)/2) + `" y="` + f(top+barRow*0.7) + `" text-anchor="middle">` + esc(c.Empty) + "</text>\n")
	}
	b.WriteString("</svg>\n")
}

func (t *Table) render(b *bytes.Buffer) {
	b.WriteString("<figure class=\"wide\">\n<table id=\"" + esc(t.ID) + "\">")
	if t.Title != "" {
		b.WriteString("<caption>" + esc(t.Title) + "</caption>")
	}
	b.WriteString("<thead><tr>")
	for _, c := range t.Columns {
		b.WriteString(cell("th", c.Numeric, c.Name))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for i, v := range r.Cells {
			num := i < len(t.Columns) && t.Columns[i].Numeric
			if i == 0 && r.Color != "" {
				b.WriteString(`<td><span class="swatch" style="background:` + esc(r.Color) + `"></span>` + esc(v) + "</td>")
				continue
			}
			b.WriteString(cell("td", num, v))
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody></table>\n")
	figureClose(b, t.Note)
}

func cell(tag string, num bool, v string) string {
	if num {
		return "<" + tag + ` class="num">` + esc(v) + "</" + tag + ">"
	}
	return "<" + tag + ">" + esc(v) + "</" + tag + ">"
}
