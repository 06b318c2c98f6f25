package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestLocate(t *testing.T) {
	cases := []struct {
		src  string
		key  string
		line int
	}{
		{"a = 1\nb = 2\n", "b", 2},
		{"\xef\xbb\xbfa = 1\r\nb = 2\r\n", "b", 2},
		{"\xff\xfea = 1\nb = 2\n", "a", 1},
		{"[[a]]\n[[a.b]]\nx = 1\n[[a]]\n[[a.b]]\n[[a.b]]\ny = 1\n", "a[1].b[1].y", 7},
		{"[[a]]\n[[a.b]]\nx = 1\n[[a]]\n[[a.b]]\n[[a.b]]\ny = 1\n", "a[1]", 4},
		{"[[a]]\n[[a.b]]\nx = 1\n[[a]]\n[[a.b]]\n[[a.b]]\ny = 1\n", "a[0].b[0].x", 3},
		{"[[p]]\nn = 1\n[[p]]\n[p.sub]\nk = 2\n", "p[1].sub.k", 5},
		{"[x.y]\nk = 1\n[x]\nj = 1\n", "x", 3},
		{"[x.y]\nk = 1\n", "x", 1},
		{"k = \"a\\\"#[b\"\n[t]\nm = 1\n", "t.m", 3},
		{"s = '''\n[fake]\nq = 1\n'''\nr = 1\n", "r", 5},
		{"s = \"\"\"\\\"\"\"\n\"\"\"\"\"\nr = 1\n", "r", 3},
		{"k = [[1, 2],\n  [3]]\n", "k[1][0]", 2},
		{"k = [ # c ]\n 1, # c\n 2 ]\n", "k[1]", 3},
		{"t = { a = 1, b = { c = [\n1, 2] } }\n", "t.b.c[1]", 2},
		{"\"a.b\".c = 1\n", `"a.b".c`, 1},
		{"a.'b c' = 1\n", `a."b c"`, 1},
		{"\"\\u0041\" = 1\n", "A", 1},
		{"[ a . b ]\nc=1\n", "a.b.c", 2},
		{"d = 1979-05-27 07:32:00Z\ne = 1\n", "e", 2},
		{"missing = 1\n", "other", 1},
	}
	for _, tc := range cases {
		l := locate([]byte(tc.src))
		if got := l.lineOf(tc.key); got != tc.line {
			t.Errorf("%q: line of %s = %d, want %d (defs %v)", tc.src, tc.key, got, tc.line, l.defs)
		}
	}
}

func TestLocateFallback(t *testing.T) {
	l := locate([]byte("a = 1\n[[t]]\n[[t]]\nb = 2\n"))
	for _, tc := range []struct {
		p    path
		line int
	}{
		{root.key("t").index(1).key("missing"), 3},
		{root.key("t").index(1).key("b"), 4},
		{root.key("t").index(0).key("b"), 2},
		{root.key("u").key("v"), 1},
	} {
		if got := l.line(tc.p); got != tc.line {
			t.Errorf("line(%s) = %d, want %d", tc.p, got, tc.line)
		}
	}
}

// lineOf is line for a path given as a string, for tests.
func (l *locator) lineOf(k string) int {
	if ln, ok := l.defs[k]; ok {
		return ln
	}
	return l.line(nil)
}

// FuzzParse checks that Parse never panics, that every error carries a
// position, and that whatever Parse accepts survives Encode unchanged.
func FuzzParse(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.src)
	}
	f.Add(full)
	f.Add([]byte(defaultTOML))
	f.Add([]byte("port = [{name = 'a', vdev = 'net_null0'}]\nforward = [{from = 'a', to = 'a'}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("f.toml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not a non-empty Errors: %v", err, err)
			}
			l := locate(data)
			for _, e := range es {
				if e.File != "f.toml" || e.Line < 1 || e.Key == "" {
					t.Fatalf("error without position: %+v", e)
				}
				// These keys are in the file, so the locator must know
				// them exactly: a cross-check against the TOML parser.
				if e.err == nil && (strings.HasPrefix(e.Msg, "unknown key") || strings.HasPrefix(e.Msg, "expected ")) {
					if ln, ok := l.defs[e.Key]; !ok || ln != e.Line {
						t.Fatalf("%v: locator has line %d, %v for this key", e, ln, ok)
					}
				}
			}
			return
		}
		var buf bytes.Buffer
		if err := cfg.Encode(&buf); err != nil {
			t.Fatalf("Encode: %v", err)
		}
		again, err := Parse("f2.toml", buf.Bytes())
		if err != nil {
			t.Fatalf("encoded config does not parse: %v\n%s", err, buf.String())
		}
		if !equalIgnoringSource(cfg, again) {
			t.Fatalf("round trip changed the config:\n%s", buf.String())
		}
	})
}

// A small file of deeply nested arrays is refused at once, at the line
// where it goes too deep, instead of costing time and memory quadratic in
// the depth; ordinary nesting and brackets inside strings and comments
// are fine.
func TestDeepNestingRefused(t *testing.T) {
	deep := "x = " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n"
	_, err := Parse("t.toml", src(append(append([]string{}, valid...), deep)...))
	if err == nil || !strings.Contains(err.Error(), "t.toml:10: syntax: arrays or inline tables nested more than 32 deep") {
		t.Errorf("got %v", err)
	}
	ok := append(append([]string{}, valid...),
		`# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ in a comment`,
		`[console]`,
		`socket = "/run/[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[/console.sock" # ]]]]`,
		"history = '''[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[['''",
	)
	if _, err := Parse("t.toml", src(ok...)); err != nil {
		t.Errorf("brackets in strings and comments: %v", err)
	}
}
