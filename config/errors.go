package config

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a config file, reported as "FILE:LINE: key: problem"
// so editors and terminals can jump to it.
type Error struct {
	File string
	Line int    // 1-based; 0 only when the file itself could not be read
	Key  string // dotted path with array indices, e.g. "port[1].rx_queues"
	Msg  string

	err error // underlying cause, for errors.Is (e.g. fs.ErrNotExist)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.err }

// Errors is every problem found in one file, sorted by line. Load and Parse
// always return this type on failure, even for a single problem.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func (es Errors) sort() {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Key < es[j].Key
	})
}

// checker collects errors while a config is decoded and validated.
type checker struct {
	file string
	loc  *locator
	errs Errors
	// bad holds keys that already have an error, so a value that failed to
	// decode is not reported again by the semantic checks.
	bad map[string]bool
}

func newChecker(file string, loc *locator) *checker {
	return &checker{file: file, loc: loc, bad: map[string]bool{}}
}

// errorf reports a problem with key p at the line p is defined on (or the
// nearest enclosing table when p is missing from the file).
func (c *checker) errorf(p path, format string, args ...any) {
	c.errorAt(c.loc.line(p), p, format, args...)
}

func (c *checker) errorAt(line int, p path, format string, args ...any) {
	k := p.String()
	if c.bad[k] {
		return
	}
	c.bad[k] = true
	if line < 1 {
		line = 1
	}
	c.errs = append(c.errs, &Error{File: c.file, Line: line, Key: k, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) failed(p path) bool { return c.bad[p.String()] }

func (c *checker) result() error {
	if len(c.errs) == 0 {
		return nil
	}
	c.errs.sort()
	return c.errs
}
