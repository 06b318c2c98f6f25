//go:build !notap

package pipeline

// tapBuilt says the packet taps (trace and capture) are compiled in.
// `make bench` builds roce-fwd once more with -tags notap, which leaves
// out the per-burst check for an armed tap, to show what that check
// costs when nothing is traced or captured.
const tapBuilt = true
