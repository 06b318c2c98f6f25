// Package roce holds zero-copy views and builders for the wire formats a
// RoCEv2 forwarder touches: Ethernet, 802.1Q/802.1ad tags, IPv4, IPv6, UDP,
// the InfiniBand Base Transport Header and its extension headers, 802.3x
// PAUSE and 802.1Qbb PFC frames, and the RoCEv2 invariant CRC (ICRC).
//
// Views are typed byte slices with accessor methods (as in gVisor's
// pkg/tcpip/header): they never copy and never allocate, and callers check
// the length before using one. Classify is the per-packet entry point; it
// validates every length it relies on, so malformed input yields an error
// reason, never a panic.
package roce
