package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
)

// mantissa is w without its trailing zeros.
func mantissa(w int64) int64 {
	for w%10 == 0 {
		w /= 10
	}
	return w
}

func isNice(w int64) bool { m := mantissa(w); return m == 1 || m == 2 || m == 5 }

func TestNewBins(t *testing.T) {
	const s = int64(time.Second)
	for _, tc := range []struct {
		span  int64
		max   int
		width int64
		n     int
	}{
		{0, 200, MinBinWidth, 1},
		{-5, 200, MinBinWidth, 1}, // last before first: one bin
		{199 * MinBinWidth, 200, MinBinWidth, 200},
		{200 * MinBinWidth, 200, 2 * MinBinWidth, 101},
		{s, 200, 10 * int64(time.Millisecond), 101},
		{s - 1, 200, 5 * int64(time.Millisecond), 200},
		{3600 * s, 120, 50 * s, 73},
		{1 << 62, 1, 1 << 62, 1}, // no round width fits: one bin of the span
	} {
		b := NewBins(1e18, 1e18+tc.span, tc.max)
		if b.Width != tc.width || b.N != tc.n || b.Start != 1e18 {
			t.Errorf("span %d max %d: %+v, want width %d n %d", tc.span, tc.max, b, tc.width, tc.n)
		}
	}
	// Any span: at most max bins, round, and the next narrower round width
	// would need more.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		span := rng.Int64N(int64(100 * time.Hour))
		mx := 1 + rng.IntN(500)
		b := NewBins(0, span, mx)
		if b.N > mx || b.N < 1 || !isNice(b.Width) || b.Width < MinBinWidth || b.Span() <= span {
			t.Fatalf("span %d max %d: %+v", span, mx, b)
		}
		if b.Width > MinBinWidth {
			prev := b.Width / 2 // 10→5, 2→1
			if mantissa(b.Width) == 5 {
				prev = b.Width / 5 * 2
			}
			if span/prev+1 <= int64(mx) {
				t.Fatalf("span %d max %d: width %d, but %d fits", span, mx, b.Width, prev)
			}
		}
	}
}

func TestBinsIndex(t *testing.T) {
	b := Bins{Start: 1000, Width: 10, N: 5}
	for _, tc := range []struct {
		t    int64
		want int
	}{{0, 0}, {1000, 0}, {1009, 0}, {1010, 1}, {1049, 4}, {1050, 4}, {1 << 62, 4}} {
		if got := b.Index(tc.t); got != tc.want {
			t.Errorf("Index(%d) = %d, want %d", tc.t, got, tc.want)
		}
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		n      int
		want   []float64
	}{
		{0, 10, 5, []float64{0, 2, 4, 6, 8, 10}},
		{0, 7.3, 6, []float64{0, 2, 4, 6}},
		{0.1, 0.9, 4, []float64{0.2, 0.4, 0.6, 0.8}},
		{0, 0.3, 3, []float64{0, 0.1, 0.2, 0.3}}, // 3*0.1 is 0.30000000000000004
		{0, 1e9, 4, []float64{0, 5e8, 1e9}},
		{5, 5, 4, []float64{5}},
	} {
		got, _ := Ticks(tc.lo, tc.hi, tc.n)
		if len(got) != len(tc.want) {
			t.Errorf("Ticks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
			continue
		}
		for i := range got {
			if math.Abs(got[i]-tc.want[i]) > 1e-12*max(1, math.Abs(tc.want[i])) {
				t.Errorf("Ticks(%v, %v, %d) = %v, want %v", tc.lo, tc.hi, tc.n, got, tc.want)
				break
			}
		}
	}
}

func TestValueAxis(t *testing.T) {
	labels := func(a valueAxis) string {
		var s []string
		for _, v := range a.ticks {
			s = append(s, a.label(v))
		}
		return strings.Join(s, " ")
	}
	for _, tc := range []struct {
		max     float64
		integer bool
		want    string
	}{
		{7, true, "0 2 4 6 8"},
		{0.3, true, "0 1"}, // counts: no fractional ticks
		{0, true, "0 1"},   // nothing: still an axis
		{0.3, false, "0 0.1 0.2 0.3"},
		{2.5e9, false, "0 0.5G 1.0G 1.5G 2.0G 2.5G"},
		{12345, true, "0 5k 10k 15k"},
		{999, true, "0 200 400 600 800 1000"},
	} {
		if got := labels(newValueAxis(tc.max, tc.integer)); got != tc.want {
			t.Errorf("axis to %v (integer %v): %q, want %q", tc.max, tc.integer, got, tc.want)
		}
	}
}

func TestTimeAxis(t *testing.T) {
	for _, tc := range []struct {
		b    Bins
		unit string
		want string
	}{
		{Bins{Width: 1000, N: 1}, "µs", "0 0.2 0.4 0.6 0.8 1.0"},
		{Bins{Width: 10e6, N: 101}, "s", "0 0.2 0.4 0.6 0.8 1.0"},
		{Bins{Width: 20e3, N: 150}, "ms", "0 0.5 1.0 1.5 2.0 2.5 3.0"},
	} {
		a := newTimeAxis(tc.b)
		var s []string
		for _, v := range a.ticks {
			s = append(s, a.label(v))
		}
		if a.unit != tc.unit || strings.Join(s, " ") != tc.want {
			t.Errorf("%+v: %s %q, want %s %q", tc.b, a.unit, strings.Join(s, " "), tc.unit, tc.want)
		}
	}
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{FormatCount(0), "0"},
		{FormatCount(999), "999"},
		{FormatCount(1000), "1,000"},
		{FormatCount(1234567), "1,234,567"},
		{FormatSI(0, "bit/s"), "0 bit/s"},
		{FormatSI(2.5e9, "bit/s"), "2.50 Gbit/s"},
		{FormatSI(12.5e6, "bit/s"), "12.5 Mbit/s"},
		{FormatSI(999, "B"), "999 B"},
		{FormatDuration(5e6), "5ms"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// Text from captures (file names, labels) is escaped, and what XML cannot
// hold at all becomes U+FFFD, in text and in attributes alike.
func TestEscape(t *testing.T) {
	in := "a<b>&\"c\"'d'\x00\x1b\xff\tok é"
	want := "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;\ufffd\ufffd\ufffd\tok é"
	if got := esc(in); got != want {
		t.Fatalf("esc(%q) = %q, want %q", in, got, want)
	}
	doc := `<r a="` + esc(in) + `">` + esc(in) + `</r>`
	var v struct {
		A    string `xml:"a,attr"`
		Text string `xml:",chardata"`
	}
	if err := xml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	back := "a<b>&\"c\"'d'\ufffd\ufffd\ufffd\tok é"
	if v.Text != back || v.A != back {
		t.Errorf("round trip: text %q attr %q", v.Text, v.A)
	}
}

// node is a parsed XML element, enough to count and look inside.
type node struct {
	name  string
	attrs map[string]string
	kids  []*node
	text  string
}

func parseXML(t *testing.T, doc string) *node {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	root := &node{name: "#doc"}
	stack := []*node{root}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			line := strings.Split(doc, "\n")
			n, _ := d.InputPos()
			t.Fatalf("not well-formed XML: %v (line %d: %.200s)", err, n, line[min(n-1, len(line)-1)])
		}
		top := stack[len(stack)-1]
		switch tok := tok.(type) {
		case xml.StartElement:
			n := &node{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				n.attrs[a.Name.Local] = a.Value
			}
			top.kids = append(top.kids, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			top.text += string(tok)
		}
	}
	if len(stack) != 1 {
		t.Fatalf("%d elements left open", len(stack)-1)
	}
	return root
}

// all returns the elements below n (n included) that match.
func (n *node) all(match func(*node) bool) []*node {
	var out []*node
	if match(n) {
		out = append(out, n)
	}
	for _, k := range n.kids {
		out = append(out, k.all(match)...)
	}
	return out
}

func named(name string) func(*node) bool { return func(n *node) bool { return n.name == name } }

func classed(class string) func(*node) bool {
	return func(n *node) bool { return strings.Contains(" "+n.attrs["class"]+" ", " "+class+" ") }
}

func (n *node) child(name string) *node {
	for _, k := range n.kids {
		if k.name == name {
			return k
		}
	}
	return nil
}

func sampleLine(n int, series ...string) *LineChart {
	c := &LineChart{ID: "tput", Title: "Throughput <per QP> & more", YName: "throughput (bit/s)", Unit: "bit/s",
		Bins: Bins{Start: 1e18, Width: 1e6, N: n}}
	for i, name := range series {
		v := make([]float64, n)
		for k := range v {
			v[k] = float64((k+1)*(i+1)) * 1e8
		}
		c.Series = append(c.Series, Series{Name: name, Values: v})
	}
	return c
}

func TestLineChartSVG(t *testing.T) {
	names := []string{"qp 0x000100 <a>", "qp \"0x2\" & co", "other\x00"}
	c := sampleLine(120, names...)
	root := parseXML(t, c.SVG())
	svg := root.kids[0]
	if svg.name != "svg" || svg.attrs["viewBox"] == "" || svg.attrs["data-series"] != "3" || svg.attrs["data-bins"] != "120" {
		t.Fatalf("root %s %v", svg.name, svg.attrs)
	}
	if tt := svg.child("title"); tt == nil || tt.text != c.Title {
		t.Errorf("accessible title %v", tt)
	}
	if tt := svg.all(classed("title")); len(tt) != 1 || tt[0].text != c.Title {
		t.Errorf("visible title %v", tt)
	}
	series := svg.all(classed("series"))
	if len(series) != 3 {
		t.Fatalf("%d series, want 3", len(series))
	}
	for i, s := range series {
		if s.attrs["data-name"] != strings.ReplaceAll(names[i], "\x00", "\ufffd") {
			t.Errorf("series %d named %q", i, s.attrs["data-name"])
		}
		pl := s.child("polyline")
		if pl == nil || len(strings.Fields(pl.attrs["points"])) != 120 {
			t.Errorf("series %d: want a polyline of 120 points", i)
		}
		if len(s.all(named("circle"))) != 0 {
			t.Errorf("series %d: dots on 120 bins", i)
		}
	}
	if items := svg.all(classed("legend-item")); len(items) != 3 || items[1].child("text").text != names[1] {
		t.Errorf("legend: %d items", len(items))
	}
	hits := svg.all(classed("hit"))
	if len(hits) != 120 {
		t.Fatalf("%d hover columns, want 120", len(hits))
	}
	tip := hits[1].child("title").text
	if !strings.HasPrefix(tip, "1–2 ms\n") || !strings.Contains(tip, names[0]+": 200 Mbit/s") || !strings.Contains(tip, "other\ufffd: 600 Mbit/s") {
		t.Errorf("tooltip of bin 1: %q", tip)
	}
	// Axes: tick labels on both, and their names with units.
	var texts []string
	for _, n := range svg.all(named("text")) {
		texts = append(texts, n.text)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"|0|", "|10G|", "|40G|", "throughput (bit/s)", "time since first frame (ms), bins of 1ms", "|60|", "|120|"} {
		if !strings.Contains("|"+all+"|", want) {
			t.Errorf("axis text %q missing from %q", want, all)
		}
	}
}

// One series: no legend; few bins: dots, so a single bin still shows.
func TestLineChartOneSeriesFewBins(t *testing.T) {
	c := sampleLine(1, "only")
	c.Integer, c.Empty = true, "nothing"
	svg := parseXML(t, c.SVG()).kids[0]
	if n := len(svg.all(classed("legend-item"))); n != 0 {
		t.Errorf("%d legend items for one series", n)
	}
	if n := len(svg.all(named("circle"))); n != 1 {
		t.Errorf("%d dots for one bin", n)
	}
	if n := len(svg.all(classed("empty"))); n != 0 {
		t.Errorf("empty note shown over data")
	}
	c.Series[0].Values[0] = 0
	if n := len(parseXML(t, c.SVG()).kids[0].all(classed("empty"))); n != 1 {
		t.Errorf("no empty note over zeros")
	}
	c.Series = nil
	svg = parseXML(t, c.SVG()).kids[0]
	if len(svg.all(classed("hit"))) != 0 || len(svg.all(classed("empty"))) != 1 {
		t.Errorf("a chart without series")
	}
}

func TestBarChartSVG(t *testing.T) {
	c := &BarChart{ID: "ops", Title: "Opcodes", XName: "frames", Unit: "frames", Bars: []Bar{
		{Label: "RC RDMA WRITE Only (0x0a)", Value: 750},
		{Label: "RC Acknowledge <17>", Value: 250},
		{Label: strings.Repeat("x", 100), Value: 0, Tip: "custom & tip"},
	}}
	svg := parseXML(t, c.SVG()).kids[0]
	bars := svg.all(classed("bar"))
	if len(bars) != 3 || svg.attrs["data-bars"] != "3" {
		t.Fatalf("%d bars", len(bars))
	}
	for i, want := range []string{"RC RDMA WRITE Only (0x0a): 750 frames (75.0%)", "RC Acknowledge <17>: 250 frames (25.0%)", "custom & tip"} {
		if got := bars[i].child("title").text; got != want {
			t.Errorf("bar %d tooltip %q, want %q", i, got, want)
		}
	}
	if got := bars[2].all(classed("label"))[0].text; len([]rune(got)) != maxLabelChars || !strings.HasSuffix(got, "…") {
		t.Errorf("long label not cut: %q", got)
	}
	w0, w1 := bars[0].child("rect").attrs["width"], bars[1].child("rect").attrs["width"]
	if w0 <= w1 && len(w0) <= len(w1) {
		t.Errorf("bar widths %s, %s", w0, w1)
	}
	empty := parseXML(t, (&BarChart{ID: "e", Title: "none", Empty: "no frames"}).SVG()).kids[0]
	if len(empty.all(classed("bar"))) != 0 || len(empty.all(classed("empty"))) != 1 {
		t.Errorf("empty bar chart")
	}
}

// The whole page is well-formed XML, fetches nothing, and holds every
// block of every section.
func TestPage(t *testing.T) {
	p := &Page{Title: "report <x>", Subtitle: "two & more", Sections: []Section{
		{Title: "a.pcap", Facts: []Fact{{"frames", "10"}}, Blocks: []Block{sampleLine(10, "s1", "s2"),
			&BarChart{ID: "b", Title: "bars", Bars: []Bar{{Label: "x", Value: 1}}},
			&Table{ID: "t", Title: "QPs", Columns: []Column{{"QP", false}, {"bytes", true}},
				Rows: []Row{{Color: "#4e79a7", Cells: []string{"0x000100", "1,000"}}, {Cells: []string{"<b>", "2"}}}}}},
		{Title: "b\xff.pcap"},
	}}
	var buf bytes.Buffer
	if err := p.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	root := parseXML(t, page)
	if n := len(root.all(named("section"))); n != 2 {
		t.Errorf("%d sections", n)
	}
	if n := len(root.all(named("svg"))); n != 2 {
		t.Errorf("%d charts", n)
	}
	if links := root.all(named("a")); len(links) != 2 || links[1].attrs["href"] != "#s1" || links[1].text != "b\ufffd.pcap" {
		t.Errorf("section links %v", links)
	}
	rows := root.all(named("tr"))
	if len(rows) != 3 || rows[2].kids[0].text != "<b>" || rows[1].kids[0].child("span") == nil {
		t.Errorf("table rows")
	}
	if s := root.all(named("script")); len(s) != 1 || !strings.Contains(s[0].text, "legend-item") {
		t.Errorf("script")
	}
	// Nothing to fetch: no src attributes, no links off the page, no
	// url() or @import in the styles; the only URLs are XML namespaces.
	for _, n := range root.all(func(*node) bool { return true }) {
		if _, ok := n.attrs["src"]; ok {
			t.Errorf("<%s src=%q>", n.name, n.attrs["src"])
		}
		if h, ok := n.attrs["href"]; ok && !strings.HasPrefix(h, "#") {
			t.Errorf("<%s href=%q>", n.name, h)
		}
	}
	if regexp.MustCompile(`url\(|@import`).MatchString(css) {
		t.Error("the styles load something")
	}
	if urls := regexp.MustCompile(`https?://[^"]*`).FindAllString(page, -1); len(urls) != 3 { // xhtml + 2 svg
		t.Errorf("URLs in the page: %v", urls)
	}
	if strings.ContainsAny(script, "<&") {
		t.Error("the script holds < or &")
	}
}

// Stacked series are bands: each one's lower edge is the upper edge of
// the one below, the first sits on zero, and the axis reaches the sum.
func TestLineChartStacked(t *testing.T) {
	c := &LineChart{ID: "s", Title: "stacked", Stacked: true, Integer: true, Bins: Bins{Width: 1e6, N: 3},
		Series: []Series{{Name: "a", Values: []float64{1, 2, 3}}, {Name: "b", Values: []float64{4, 4, 4}}}}
	svg := parseXML(t, c.SVG()).kids[0]
	var edges [][]string
	for _, s := range svg.all(classed("series")) {
		p := s.child("polygon")
		if p == nil {
			t.Fatal("a stacked series without a polygon")
		}
		pts := strings.Fields(p.attrs["points"])
		if len(pts) != 6 {
			t.Fatalf("%d points, want 6", len(pts))
		}
		edges = append(edges, pts)
	}
	for k := range 3 {
		if edges[1][5-k] != edges[0][k] {
			t.Errorf("bin %d: b's lower edge %s, a's upper edge %s", k, edges[1][5-k], edges[0][k])
		}
		if y := strings.Split(edges[0][3+k], ",")[1]; y != strings.Split(edges[0][3], ",")[1] {
			t.Errorf("a's lower edge not flat: %v", edges[0])
		}
	}
	var labels []string
	for _, n := range svg.all(named("g")) {
		if n.attrs["class"] == "axis y" {
			for _, k := range n.kids {
				labels = append(labels, k.text)
			}
		}
	}
	if got := strings.Join(labels[:len(labels)-1], " "); got != "0 2 4 6 8" { // the sum peaks at 7
		t.Errorf("y ticks %q", got)
	}
}
