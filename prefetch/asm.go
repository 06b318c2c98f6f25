//go:build amd64 || arm64

package prefetch

// lines prefetches n addresses from p; n > 0.
//
//go:noescape
func lines(p *uintptr, n int)

// forWrite prefetches for writing the lines of the n bytes from p; n > 0.
//
//go:noescape
func forWrite(p *byte, n int)
