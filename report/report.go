// Package report renders a capture's aggregated statistics as one
// self-contained HTML page: charts are inline SVG drawn here, styles and
// the one small script are inline, and nothing is fetched, so the file
// opens offline and can be attached to a ticket as it is.
//
// It knows nothing of RoCE: callers hand it time series already cut into
// Bins, bar values and table rows. The page is also well-formed XML
// (polyglot markup), which lets tests check it with encoding/xml.
package report

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// Page is the whole report.
type Page struct {
	Title    string
	Subtitle string
	Sections []Section
}

// Section is one capture: facts at the top, then its charts and tables.
type Section struct {
	Title  string
	Facts  []Fact
	Blocks []Block
}

// Fact is one figure of a section's header.
type Fact struct{ Name, Value string }

// Block is a chart or a table.
type Block interface {
	render(w *bytes.Buffer)
}

// WriteHTML writes the page.
func (p *Page) WriteHTML(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	b.WriteString("<title>" + esc(p.Title) + "</title>\n<style>" + css + "</style>\n</head>\n<body>\n<header>\n<h1>" + esc(p.Title) + "</h1>\n")
	if p.Subtitle != "" {
		b.WriteString("<p class=\"sub\">" + esc(p.Subtitle) + "</p>\n")
	}
	b.WriteString("<p class=\"sub jshint\">Hover a chart for the values of a bin; click a legend entry to hide or show its series.</p>\n")
	if len(p.Sections) > 1 {
		b.WriteString("<nav><ol>")
		for i := range p.Sections {
			b.WriteString("<li><a href=\"#s" + itoa(i) + "\">" + esc(p.Sections[i].Title) + "</a></li>")
		}
		b.WriteString("</ol></nav>\n")
	}
	b.WriteString("</header>\n")
	for i := range p.Sections {
		s := &p.Sections[i]
		b.WriteString("<section id=\"s" + itoa(i) + "\">\n<h2>" + esc(s.Title) + "</h2>\n")
		if len(s.Facts) > 0 {
			b.WriteString("<dl class=\"facts\">")
			for _, f := range s.Facts {
				b.WriteString("<div><dt>" + esc(f.Name) + "</dt><dd>" + esc(f.Value) + "</dd></div>")
			}
			b.WriteString("</dl>\n")
		}
		b.WriteString("<div class=\"blocks\">\n")
		for _, blk := range s.Blocks {
			blk.render(&b)
		}
		b.WriteString("</div>\n</section>\n")
	}
	// CDATA keeps the script well-formed XML; to an HTML parser the
	// markers are JavaScript comments.
	b.WriteString("<script>//<![CDATA[\n" + script + "//]]></script>\n</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// esc makes s safe as XML text or a quoted attribute value: markup
// characters become entities, and invalid UTF-8 and characters XML does
// not allow (NUL and most controls) become U+FFFD, since a capture's
// file name can hold any bytes.
func esc(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&#39;")
		default:
			if !xmlChar(r) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// xmlChar reports whether XML 1.0 allows r (its Char production).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0a || r == 0x0d || r >= 0x20 && r <= 0xd7ff ||
		r >= 0xe000 && r <= 0xfffd || r >= 0x10000 && r <= 0x10ffff
}

const css = `
:root{--fg:#1d2329;--muted:#5b6670;--line:#d7dde3;--card:#fff;--bg:#f3f5f7}
*{box-sizing:border-box}
body{margin:0;padding:16px 24px 40px;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:18px;margin:28px 0 8px;word-break:break-all}
.sub{color:var(--muted);margin:0 0 8px}
.jshint{display:none}
html[data-js] .jshint{display:block}
nav ol{margin:4px 0;padding-left:20px}
.facts{display:flex;flex-wrap:wrap;gap:6px 10px;margin:0 0 12px}
.facts div{background:var(--card);border:1px solid var(--line);border-radius:6px;padding:4px 10px}
.facts dt{font-size:11px;color:var(--muted);text-transform:uppercase;letter-spacing:.03em}
.facts dd{margin:0;font-weight:600;font-variant-numeric:tabular-nums}
.blocks{display:grid;grid-template-columns:repeat(auto-fill,minmax(600px,1fr));gap:14px}
figure{margin:0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px}
figure.wide{grid-column:1/-1}
figcaption{font-size:12px;color:var(--muted);padding:2px 6px}
svg.chart{width:100%;height:auto;display:block;font-size:11px;font-family:inherit}
svg .title{font-size:15px;font-weight:600;fill:var(--fg)}
svg .axis text{fill:var(--muted)}
svg .axis .name{fill:var(--fg);font-size:12px}
svg .axis line,svg .axis path{stroke:#8a949e}
svg .grid line{stroke:#e6eaee}
svg .series polyline{fill:none;stroke-width:1.8;stroke-linejoin:round}
svg .series polygon{fill-opacity:.78;stroke-width:.8}
svg .series circle{stroke:none}
svg .series.off,svg .legend-item.off text{opacity:.25}
svg .series.off{display:none}
svg .legend-item{cursor:pointer}
svg .legend-item text{fill:var(--fg)}
svg .hit{fill:#000;fill-opacity:0}
svg .hit:hover{fill-opacity:.07}
svg .bar rect{fill:#4e79a7}
svg .bar:hover rect{fill:#2d5a8a}
svg .bar .value{fill:var(--muted)}
svg .empty{fill:var(--muted);font-size:13px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
caption{text-align:left;font-size:15px;font-weight:600;padding:4px 6px 8px}
th,td{padding:4px 8px;border-bottom:1px solid var(--line);text-align:left;white-space:nowrap}
th{font-size:12px;color:var(--muted);font-weight:600}
td.num,th.num{text-align:right}
tbody tr:hover{background:#f0f4f8}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:baseline}
`

// script lets a legend entry hide and show its series. It must hold no
// "<" or "&": the page stays well-formed XML.
const script = `document.documentElement.setAttribute("data-js", "1");
document.querySelectorAll("svg.chart").forEach(function (svg) {
  svg.querySelectorAll(".legend-item").forEach(function (item) {
    item.addEventListener("click", function () {
      var s = svg.querySelector('.series[data-series="' + item.getAttribute("data-series") + '"]');
      if (s) {
        s.classList.toggle("off");
        item.classList.toggle("off");
      }
    });
  });
});
`
