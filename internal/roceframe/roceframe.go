// Package roceframe builds classified RoCEv2 frames for the tests of the
// packages that count and change them (qpstats, impair): pure Go, no EAL.
package roceframe

import (
	"testing"

	"roce-fwd/roce"
)

// Build encodes spec and classifies it with the default TC map, failing
// tb unless the result is a well-formed RoCEv2 frame.
func Build(tb testing.TB, spec roce.FrameSpec) ([]byte, roce.Result) {
	tb.Helper()
	f, err := spec.Append(nil)
	if err != nil {
		tb.Fatal(err)
	}
	var r roce.Result
	m := roce.DefaultTCMap()
	roce.Classify(f, &m, true, &r)
	if !r.RoCE || r.Err != roce.ReasonNone {
		tb.Fatalf("test frame not RoCE: %+v", r)
	}
	return f, r
}
