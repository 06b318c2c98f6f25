package report

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// MinBinWidth is the narrowest bin: pcap timestamps are microseconds, and
// a narrower bin holds a fraction of a frame's wire time.
const MinBinWidth = int64(time.Microsecond)

// Bins cut a capture's time into N bins of Width nanoseconds, the first
// starting at the first frame.
type Bins struct {
	Start int64 // unix ns
	Width int64 // ns
	N     int
}

// NewBins picks the narrowest round width (1, 2 or 5 times a power of ten
// nanoseconds, at least MinBinWidth) that covers first to last, both unix
// ns, in at most maxBins bins: round widths make round bin edges, and
// rates per bin compare across captures.
func NewBins(first, last int64, maxBins int) Bins {
	maxBins = max(maxBins, 1)
	span := max(last-first, 0)
	var w int64
	for p := MinBinWidth; ; p *= 10 {
		for _, m := range [...]int64{1, 2, 5} {
			if w = p * m; span/w < int64(maxBins) {
				return Bins{Start: first, Width: w, N: int(span/w) + 1}
			}
		}
		if p > math.MaxInt64/100 { // no wider round width fits: one bin
			return Bins{Start: first, Width: max(span, 1), N: 1}
		}
	}
}

// Index is the bin of t (unix ns), clamped to the first and last bin.
func (b Bins) Index(t int64) int {
	if t <= b.Start || b.Width <= 0 {
		return 0
	}
	return int(min((t-b.Start)/b.Width, int64(b.N-1)))
}

// Span is the time the bins cover, in ns.
func (b Bins) Span() int64 { return int64(b.N) * b.Width }

// niceStep is the smallest 1, 2 or 5 times a power of ten at or above x.
func niceStep(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range [...]float64{1, 2, 5} {
		if m*p >= x*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

// Ticks returns round values (a 1, 2 or 5 times a power of ten step
// apart) from lo to hi, at most n+1 of them and at least two when lo <
// hi, with the step.
func Ticks(lo, hi float64, n int) ([]float64, float64) {
	n = max(n, 1)
	if !(hi > lo) {
		return []float64{lo}, 1
	}
	step := niceStep((hi - lo) / float64(n))
	first := math.Ceil(lo/step - 1e-9)
	var out []float64
	for i := 0; ; i++ {
		v := (first + float64(i)) * step // multiplied, not summed: no drift
		if v > hi+step*1e-9 {
			break
		}
		out = append(out, v)
	}
	return out, step
}

// valueAxis is a value axis from 0 to a round top with ticks step apart;
// counts get whole-number steps.
type valueAxis struct {
	top, step float64
	ticks     []float64
	div       float64 // ticks are labelled in units of div, with prefix
	prefix    string
}

func newValueAxis(maxV float64, integer bool) valueAxis {
	if !(maxV > 0) || math.IsInf(maxV, 0) {
		maxV = 1
	}
	step := niceStep(maxV / 5)
	if integer {
		step = max(step, 1)
	}
	top := math.Ceil(maxV/step-1e-9) * step
	ticks, _ := Ticks(0, top, int(math.Round(top/step)))
	a := valueAxis{top: top, step: step, ticks: ticks}
	a.div, a.prefix = siPrefix(top)
	if top < 1e4 { // 200, 400, … read better than 0.2k, 0.4k, …
		a.div, a.prefix = 1, ""
	}
	return a
}

func (a *valueAxis) label(v float64) string { return formatTick(v, a.step, a.div, a.prefix) }

// siPrefix is the SI multiple an axis whose largest value is top is
// labelled in: every tick of an axis carries the same one.
func siPrefix(top float64) (float64, string) {
	prefixes := [...]string{"", "k", "M", "G", "T", "P"}
	div, i := 1.0, 0
	for i < len(prefixes)-1 && top >= 1000*div {
		div *= 1000
		i++
	}
	return div, prefixes[i]
}

// decimals is how many fractional digits tell ticks step apart.
func decimals(step float64) int {
	if !(step > 0) {
		return 0
	}
	return min(max(int(math.Ceil(-math.Log10(step)-1e-9)), 0), 9)
}

// formatTick labels v on an axis with ticks step apart, in units of div
// named by prefix.
func formatTick(v, step, div float64, prefix string) string {
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v/div, 'f', decimals(step/div), 64) + prefix
}

// timeAxis is the x axis of a time chart: seconds, milliseconds or
// microseconds since the first frame, whichever the span reads best in.
type timeAxis struct {
	unit  string
	div   float64 // ns per unit
	span  float64 // in units
	ticks []float64
	step  float64
}

func newTimeAxis(b Bins) timeAxis {
	span := float64(b.Span())
	a := timeAxis{unit: "µs", div: 1e3}
	switch {
	case span >= 1e9:
		a.unit, a.div = "s", 1e9
	case span >= 1e6:
		a.unit, a.div = "ms", 1e6
	}
	a.span = span / a.div
	a.ticks, a.step = Ticks(0, a.span, 6)
	return a
}

func (a *timeAxis) label(v float64) string { return formatTick(v, a.step, 1, "") }

// FormatCount writes n with thousands separated by commas.
func FormatCount(n uint64) string {
	s := strconv.FormatUint(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	lead := len(s) % 3
	if lead > 0 {
		b.WriteString(s[:lead])
	}
	for i := lead; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// FormatSI writes v with three significant digits and an SI prefix, then
// unit: 2.50 Gbit/s.
func FormatSI(v float64, unit string) string {
	div, p := siPrefix(math.Abs(v))
	x := v / div
	dec := 2
	switch ax := math.Abs(x); {
	case ax >= 100:
		dec = 0
	case ax >= 10:
		dec = 1
	case x == 0:
		dec = 0
	}
	return strconv.FormatFloat(x, 'f', dec, 64) + " " + p + unit
}

// FormatDuration writes ns as a short duration: 1.5ms, 20µs, 2s.
func FormatDuration(ns int64) string { return time.Duration(ns).String() }
