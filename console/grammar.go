package console

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The command grammar, in testpmd's notation: words separated by
// spaces, "a|b" for alternatives, "<name>" for an argument and "[...]"
// for an optional group:
//
//	show port info|stats|xstats|summary <port>|all
//	show roce qp [top <n>] [by bytes|packets|naks|cnp|gaps|marked|held|qos_drops]
//
// A word may be abbreviated to any prefix that no other alternative at
// that place shares ("sh po st all"). Arguments are checked by kind:
// <port> is a port id or name, <n>/<id> a count, <tc> 0..7, <dscp>
// 0..63, <size> a byte size, <p> a probability, <rest> takes every
// remaining word (for grammars of their own, like flow).

// node is one place in a syntax: a set of alternatives (words and at most
// one argument), or an optional group.
type node struct {
	words []string
	arg   string // "" or an argument kind such as "port"
	opt   []node // an optional group when non-nil
}

// parseSyntax turns a syntax string into nodes.
func parseSyntax(s string) ([]node, error) {
	toks := strings.Fields(strings.NewReplacer("[", " [ ", "]", " ] ").Replace(s))
	seq, rest, err := parseSeq(toks)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("syntax %q: unbalanced ]", s)
	}
	return seq, nil
}

func parseSeq(toks []string) ([]node, []string, error) {
	var seq []node
	for len(toks) > 0 {
		t := toks[0]
		switch t {
		case "]":
			return seq, toks, nil
		case "[":
			inner, rest, err := parseSeq(toks[1:])
			if err != nil {
				return nil, nil, err
			}
			if len(rest) == 0 || rest[0] != "]" {
				return nil, nil, errors.New("unbalanced [")
			}
			if inner == nil {
				inner = []node{}
			}
			seq = append(seq, node{opt: inner})
			toks = rest[1:]
			continue
		}
		var n node
		for _, alt := range strings.Split(t, "|") {
			if strings.HasPrefix(alt, "<") && strings.HasSuffix(alt, ">") {
				n.arg = alt[1 : len(alt)-1]
			} else {
				n.words = append(n.words, alt)
			}
		}
		seq = append(seq, n)
		toks = toks[1:]
	}
	return seq, nil, nil
}

// argChecker validates an argument of a kind; the console supplies the
// ports.
type argChecker func(kind, tok string) (string, error)

// failure is why tokens did not match, at the furthest token reached.
type failure struct {
	at   int    // index of the offending token; len(toks) when more were needed
	msg  string // what was wrong
	kind failKind
}

type failKind uint8

const (
	failMismatch  failKind = iota // the token is not what the place accepts
	failMissing                   // the line ended early
	failExtra                     // words after a complete command
	failAmbiguous                 // an abbreviation of several words
	failUser                      // msg is a complete sentence for the user (Invalid port ...)
)

// matcher matches the tokens of one line against one syntax.
type matcher struct {
	toks  []string
	check argChecker
	fail  failure
	words []string // normalised words of the first full match
	ok    bool
	next  []string // when completing: what may follow the tokens
	// restAt is, when completing, where a <rest> argument starts in toks:
	// its own grammar completes from there.
	restAt []int
	// complete collects candidates at the end of toks instead of failing.
	complete bool
}

func (m *matcher) failAt(at int, kind failKind, format string, a ...any) {
	if at >= m.fail.at || m.fail.msg == "" {
		m.fail = failure{at: at, msg: fmt.Sprintf(format, a...), kind: kind}
	}
}

// walk matches toks[i:] against seq followed by the continuation k.
func (m *matcher) walk(seq []node, i int, words []string, k func(i int, words []string)) {
	if m.ok {
		return
	}
	if len(seq) == 0 {
		k(i, words)
		return
	}
	n, rest := seq[0], seq[1:]
	if n.opt != nil {
		// With the group, then without it.
		m.walk(n.opt, i, words, func(j int, w []string) { m.walk(rest, j, w, k) })
		m.walk(rest, i, words, k)
		return
	}
	if n.arg == "rest" && m.complete && !slices.Contains(m.restAt, i) {
		m.restAt = append(m.restAt, i)
	}
	if i >= len(m.toks) {
		if m.complete {
			m.next = append(m.next, n.words...)
			if n.arg != "" {
				m.next = append(m.next, "<"+n.arg+">")
			}
			return
		}
		m.failAt(i, failMissing, "missing %s", describe(n))
		return
	}
	tok := m.toks[i]
	if n.arg == "rest" {
		k(len(m.toks), append(slices.Clone(words), m.toks[i:]...))
		return
	}
	var hits []string
	for _, w := range n.words {
		if w == tok {
			hits = []string{w}
			break
		}
		if strings.HasPrefix(w, tok) {
			hits = append(hits, w)
		}
	}
	switch {
	case len(hits) == 1:
		m.walk(rest, i+1, append(slices.Clone(words), hits[0]), k)
		return
	case len(hits) > 1:
		m.failAt(i, failAmbiguous, "%q is ambiguous: %s", tok, strings.Join(hits, ", "))
		return
	}
	if n.arg != "" {
		v, err := m.check(n.arg, tok)
		if err == nil {
			m.walk(rest, i+1, append(slices.Clone(words), v), k)
			return
		}
		kind := failMismatch
		var ue userError
		if errors.As(err, &ue) {
			kind = failUser
		}
		m.failAt(i, kind, "%v", err)
		return
	}
	m.failAt(i, failMismatch, "%q is not %s", tok, describe(n))
}

// describe names what a node accepts.
func describe(n node) string {
	alts := slices.Clone(n.words)
	if n.arg != "" {
		alts = append(alts, "<"+n.arg+">")
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "one of " + strings.Join(alts, ", ")
}

// match runs the matcher over the whole syntax.
func (m *matcher) match(seq []node) {
	m.walk(seq, 0, nil, func(i int, words []string) {
		if m.ok {
			return
		}
		if i < len(m.toks) {
			if m.complete {
				return
			}
			m.failAt(i, failExtra, "unexpected %q", m.toks[i])
			return
		}
		m.ok, m.words = true, words
	})
}

// userError is an error whose text is shown as is, not as "Bad
// arguments: ...".
type userError struct{ msg string }

func (e userError) Error() string { return e.msg }
