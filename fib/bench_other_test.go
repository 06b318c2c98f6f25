//go:build !linux

package fib

import "testing"

func newBenchTable(tb testing.TB, c Config, family Family, huge bool) *Table {
	if huge {
		tb.Skip("huge pages are only set up on Linux")
	}
	return New(c, family)
}
