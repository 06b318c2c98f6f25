package config

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// The TOML library does not export key positions, and its internal ones
// ignore array-of-tables indices, so this file has a small scanner that maps
// every key path ("port[1].rx_queues", "pipeline.lcores[2]") to its line.
// It is run only for error reporting and must never panic, even on input
// the TOML parser rejects (it is used to name the key of a syntax error).

// path is a key path; each element is a formatted key ("rx_queues",
// `"odd key"`) or an index ("[1]").
type path []string

func (p path) key(k string) path {
	return append(p[:len(p):len(p)], formatKey(k))
}

func (p path) index(i int) path {
	return append(p[:len(p):len(p)], "["+strconv.Itoa(i)+"]")
}

func (p path) String() string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// formatKey spells a key the way a user would write it: bare when possible.
func formatKey(k string) string {
	if k == "" {
		return `""`
	}
	for i := 0; i < len(k); i++ {
		if !isBare(k[i]) {
			return strconv.Quote(k)
		}
	}
	return k
}

func isBare(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

type locator struct {
	src  []byte
	pos  int
	ln   int
	defs map[string]int  // path → line of its definition
	impl map[string]bool // paths only implied by a longer key or header
	aot  map[string]int  // array-of-tables path → elements seen so far
	tbl  path            // table opened by the last header
	open path            // value still unterminated when the input ended
}

func locate(src []byte) *locator {
	l := &locator{src: src, ln: 1, defs: map[string]int{}, impl: map[string]bool{}, aot: map[string]int{}}
	// Skip a byte order mark as the TOML parser does, UTF-16 ones included.
	switch s := string(src[:min(3, len(src))]); {
	case s == "\xef\xbb\xbf":
		l.pos = 3
	case strings.HasPrefix(s, "\xff\xfe"), strings.HasPrefix(s, "\xfe\xff"):
		l.pos = 2
	}
	l.document()
	return l
}

// line returns the line p is defined on, else that of its nearest defined
// ancestor, else 1 (the key is missing and so is every enclosing table).
func (l *locator) line(p path) int {
	for n := len(p); n > 0; n-- {
		if ln, ok := l.defs[p[:n].String()]; ok {
			return ln
		}
	}
	return 1
}

// lookup returns the line p itself is defined on.
func (l *locator) lookup(p path) (int, bool) {
	ln, ok := l.defs[p.String()]
	return ln, ok
}

func (l *locator) def(p path, ln int, implied bool) {
	k := p.String()
	if _, ok := l.defs[k]; ok && (implied || !l.impl[k]) {
		return
	}
	l.defs[k] = ln
	if implied {
		l.impl[k] = true
	} else {
		delete(l.impl, k)
	}
}

func (l *locator) eof() bool { return l.pos >= len(l.src) }

func (l *locator) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

func (l *locator) next() byte {
	c := l.src[l.pos]
	l.pos++
	if c == '\n' {
		l.ln++
	}
	return c
}

func (l *locator) hasPrefix(s string) bool {
	return strings.HasPrefix(string(l.src[l.pos:min(len(l.src), l.pos+len(s))]), s)
}

func (l *locator) skipSpace() {
	for !l.eof() && (l.src[l.pos] == ' ' || l.src[l.pos] == '\t') {
		l.pos++
	}
}

// skipBlank skips whitespace, newlines and comments (inside arrays and
// inline tables).
func (l *locator) skipBlank() {
	for !l.eof() {
		switch l.src[l.pos] {
		case ' ', '\t', '\r', '\n':
			l.next()
		case '#':
			l.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the start of the next line's newline (not past it).
func (l *locator) skipLine() {
	for !l.eof() && l.src[l.pos] != '\n' {
		l.pos++
	}
}

func (l *locator) document() {
	for !l.eof() {
		l.skipSpace()
		if l.eof() {
			return
		}
		switch l.src[l.pos] {
		case '\n':
			l.next()
			continue
		case '\r', '#':
			l.skipLine()
			continue
		case '[':
			l.header()
		default:
			l.keyval(l.tbl)
		}
		// Whatever is left on the line is a comment or an error the
		// parser reports; either way it defines no key.
		l.skipLine()
	}
}

func (l *locator) header() bool {
	ln := l.ln
	l.pos++ // '['
	aot := l.peek(0) == '['
	if aot {
		l.pos++
	}
	segs, ok := l.key()
	if !ok {
		return false
	}
	var p path
	for i, s := range segs {
		p = p.key(s)
		k := p.String()
		if i == len(segs)-1 && aot {
			n := l.aot[k]
			l.aot[k] = n + 1
			l.def(p, ln, false)
			p = p.index(n)
		} else if n := l.aot[k]; n > 0 {
			p = p.index(n - 1)
		}
		l.def(p, ln, i < len(segs)-1)
	}
	l.tbl = p
	return true
}

// keyval scans "key = value" relative to table base.
func (l *locator) keyval(base path) {
	ln := l.ln
	segs, ok := l.key()
	if !ok {
		return
	}
	p := base
	for i, s := range segs {
		p = p.key(s)
		l.def(p, ln, i < len(segs)-1)
	}
	l.skipSpace()
	if l.peek(0) != '=' {
		return
	}
	l.pos++
	l.skipSpace()
	l.value(p)
}

// key scans a possibly dotted key and returns its unquoted parts.
func (l *locator) key() ([]string, bool) {
	var segs []string
	for {
		l.skipSpace()
		s, ok := l.simpleKey()
		if !ok {
			return segs, len(segs) > 0
		}
		segs = append(segs, s)
		l.skipSpace()
		if l.peek(0) != '.' {
			return segs, true
		}
		l.pos++
	}
}

func (l *locator) simpleKey() (string, bool) {
	switch c := l.peek(0); {
	case c == '"':
		s, ok := l.lineString('"')
		return unescape(s), ok
	case c == '\'':
		return l.lineString('\'')
	case isBare(c):
		start := l.pos
		for !l.eof() && isBare(l.src[l.pos]) {
			l.pos++
		}
		return string(l.src[start:l.pos]), true
	}
	return "", false
}

// lineString scans a single-line string opened by q and returns its raw
// contents; ok is false when it is not closed on this line.
func (l *locator) lineString(q byte) (string, bool) {
	l.pos++
	start := l.pos
	for !l.eof() {
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			return string(l.src[start : l.pos-1]), true
		case c == '\n':
			return "", false
		case c == '\\' && q == '"' && l.peek(1) != '\n':
			l.pos += 2
		default:
			l.pos++
		}
	}
	l.pos = len(l.src)
	return "", false
}

// value scans one value of key p, recording array elements and inline-table
// keys beneath it.
func (l *locator) value(p path) {
	switch {
	case l.eof():
		l.unterminated(p)
	case l.hasPrefix(`"""`), l.hasPrefix(`'''`):
		l.multiString(p)
	case l.peek(0) == '"' || l.peek(0) == '\'':
		if _, ok := l.lineString(l.peek(0)); !ok && l.eof() {
			l.unterminated(p)
		}
	case l.peek(0) == '[':
		l.array(p)
	case l.peek(0) == '{':
		l.inlineTable(p)
	default:
		for !l.eof() && !strings.ContainsRune(",]}#\r\n", rune(l.src[l.pos])) {
			l.pos++
		}
	}
}

func (l *locator) unterminated(p path) {
	if l.open == nil {
		l.open = p
	}
}

func (l *locator) multiString(p path) {
	q := l.src[l.pos]
	l.pos += 3
	for !l.eof() {
		c := l.src[l.pos]
		switch {
		case c == q && l.peek(1) == q && l.peek(2) == q:
			l.pos += 3
			// Up to two more quotes belong to the content.
			for i := 0; i < 2 && l.peek(0) == q; i++ {
				l.pos++
			}
			return
		case c == '\\' && q == '"':
			l.pos++
			if !l.eof() {
				l.next()
			}
		default:
			l.next()
		}
	}
	l.unterminated(p)
}

func (l *locator) array(p path) {
	l.pos++ // '['
	for i := 0; ; {
		l.skipBlank()
		switch {
		case l.eof():
			l.unterminated(p)
			return
		case l.src[l.pos] == ']':
			l.pos++
			return
		case l.src[l.pos] == ',', l.src[l.pos] == '}':
			l.pos++
			continue
		}
		e := p.index(i)
		l.def(e, l.ln, false)
		start := l.pos
		l.value(e)
		if l.pos == start {
			l.pos++ // cannot happen for valid TOML; never loop forever
		}
		i++
	}
}

func (l *locator) inlineTable(p path) {
	l.pos++ // '{'
	for {
		l.skipBlank()
		switch {
		case l.eof():
			l.unterminated(p)
			return
		case l.src[l.pos] == '}':
			l.pos++
			return
		case l.src[l.pos] == ',', l.src[l.pos] == ']':
			l.pos++
			continue
		}
		start := l.pos
		l.keyval(p)
		if l.pos == start {
			l.pos++
		}
	}
}

// syntaxKey names the key a syntax error on line ln (1-based) is about: the
// value that was still open at the start of that line, else the key or
// table header the line starts with. It returns "" when neither is known.
func syntaxKey(src []byte, ln int) string {
	start := 0
	for n := 1; n < ln && start < len(src); n++ {
		i := strings.IndexByte(string(src[start:]), '\n')
		if i < 0 {
			start = len(src)
			break
		}
		start += i + 1
	}
	l := locate(src[:start])
	if l.open != nil {
		return l.open.String()
	}
	// Scan the error line alone, in the context of the tables before it.
	end := start + strings.IndexByte(string(src[start:]), '\n')
	if end < start {
		end = len(src)
	}
	l.src, l.pos, l.open = src[:end], start, nil
	l.skipSpace()
	if l.eof() {
		return ""
	}
	if l.peek(0) == '[' {
		if !l.header() {
			return ""
		}
		return l.tbl.String()
	}
	segs, ok := l.key()
	if !ok {
		return ""
	}
	p := l.tbl
	for _, s := range segs {
		p = p.key(s)
	}
	return p.String()
}

// unescape decodes a TOML basic string body; invalid escapes are kept as
// written since the result is only used to name keys.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"', '\\':
			b.WriteByte(c)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+n < len(s) {
				if r, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32); err == nil && utf8.ValidRune(rune(r)) {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Limits on a config file's shape, checked before it is parsed: TOML
// itself has none, and a small file of deeply nested arrays would cost
// the locator (and the decoder) time and memory quadratic in the depth.
const (
	maxFileSize = 64 << 20 // bytes: 1M [[route]] tables are ~75 MB: use route load for those
	maxNesting  = 32       // arrays and inline tables inside each other
)

// checkShape reports the line where data goes beyond the limits, with
// why, or 0. It skips strings and comments the way TOML reads them.
func checkShape(data []byte) (int, string) {
	if len(data) > maxFileSize {
		return 1, "the file is " + strconv.Itoa(len(data)) + " bytes, more than the " + strconv.Itoa(maxFileSize) + " a config may have"
	}
	line, depth := 1, 0
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(data) && data[i] != '\n' {
				i++
			}
			i--
		case '"', '\'':
			// A string: basic or literal, single- or multi-line.
			q := string(c)
			if i+2 < len(data) && data[i+1] == c && data[i+2] == c {
				q = strings.Repeat(q, 3)
			}
			i += len(q)
			for i < len(data) && !strings.HasPrefix(string(data[i:min(i+len(q), len(data))]), q) {
				if data[i] == '\n' {
					line++
				}
				if data[i] == '\\' && c == '"' {
					i++
				}
				i++
			}
			i += len(q) - 1
		case '[', '{':
			if depth++; depth > maxNesting {
				return line, "arrays or inline tables nested more than " + strconv.Itoa(maxNesting) + " deep"
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return 0, ""
}
