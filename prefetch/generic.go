//go:build !amd64 && !arm64

package prefetch

func lines(p *uintptr, n int) {}

func forWrite(p *byte, n int) {}
