//go:build amd64 || arm64

package prefetch

// lines prefetches n addresses from p; n > 0.
//
//go:noescape
func lines(p *uintptr, n int)
