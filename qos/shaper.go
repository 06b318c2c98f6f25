package qos

import (
	"errors"
	"math"
)

// WireOverhead is what a frame costs on the wire beyond the bytes the
// dataplane sees (an mbuf's data length excludes the FCS): 7 bytes of
// preamble, 1 SFD, 4 FCS and a 12-byte minimum inter-frame gap. Shapers
// charge it by default so that a port shaped to its line rate is exactly
// full rather than 10-30% (small frames) over.
const WireOverhead = 24

// MaxBurst bounds a bucket's depth so that its arithmetic (bytes × 8e9)
// cannot overflow an int64.
const MaxBurst = 512 << 20

// unitsPerByte: tokens are kept in bytes × 8e9, so refilling at R bits/s
// adds exactly R units per nanosecond, with no rounding and no drift.
const unitsPerByte = 8e9

// DefaultBurst is the bucket depth used when none is configured: 50 µs of
// traffic at rate, at least 64 KiB. The dataplane shapes once per tx
// burst; a bucket covering a few of those lets a late poll catch up
// instead of losing rate, while keeping bursts short next to the ECN
// thresholds (150 KB is 48 µs at 25 Gbps).
func DefaultBurst(rate uint64) uint64 {
	b := rate / 8 * 50 / 1e6
	if b < 64<<10 {
		b = 64 << 10
	}
	if b > MaxBurst {
		b = MaxBurst
	}
	return b
}

// TokenBucket shapes to rate bits per second with burst bytes of depth.
// A frame may be sent while the bucket holds any tokens; it then takes
// its full cost, possibly going into debt, which is repaid before the
// next frame. That keeps the long-run rate exact for any frame size and
// never blocks a frame larger than the burst.
type TokenBucket struct {
	rate     uint64 // bits/s; 0 = unlimited
	burst    int64  // units
	tokens   int64  // units; may be negative (debt)
	last     int64  // ns of the last refill
	maxIdle  int64  // ns that refill an empty bucket with maximum debt
	overhead uint32 // bytes charged per frame on top of its length
}

// MaxRate bounds a shaper's rate (1 Pbit/s) for the same reason.
const MaxRate = 1e15

var (
	errBurst = errors.New("qos: shaper burst above 512 MiB")
	errRate  = errors.New("qos: shaper rate above 1 Pbit/s")
)

// Init sets the bucket to rate bits/s (0 = unlimited) and burst bytes
// (0 = DefaultBurst(rate)), charging overhead bytes per frame, full at
// time now.
func (b *TokenBucket) Init(rate, burst uint64, overhead uint32, now int64) error {
	if burst == 0 {
		burst = DefaultBurst(rate)
	}
	if burst > MaxBurst {
		return errBurst
	}
	if rate > MaxRate {
		return errRate
	}
	*b = TokenBucket{rate: rate, burst: int64(burst) * unitsPerByte, last: now, overhead: overhead}
	b.tokens = b.burst
	if rate != 0 {
		// Enough to refill from the deepest debt (a 64 KiB frame); elapsed
		// times are capped at this so elapsed × rate cannot overflow.
		need := uint64(b.burst) + (1<<16+uint64(overhead))*unitsPerByte
		b.maxIdle = int64(need/rate) + 1
		if b.maxIdle <= 0 {
			b.maxIdle = math.MaxInt64
		}
	}
	return nil
}

// Unlimited reports whether the bucket has no rate.
func (b *TokenBucket) Unlimited() bool { return b.rate == 0 }

// Refill adds the tokens earned since the last refill. Time going
// backwards earns nothing.
func (b *TokenBucket) Refill(now int64) {
	dt := now - b.last
	if dt <= 0 {
		return
	}
	b.last = now
	if dt > b.maxIdle {
		dt = b.maxIdle
	}
	t := b.tokens + dt*int64(b.rate)
	if t > b.burst {
		t = b.burst
	}
	b.tokens = t
}

// Consume charges a frame of n bytes.
func (b *TokenBucket) Consume(n uint32) {
	if b.rate != 0 {
		b.tokens -= int64(n+b.overhead) * unitsPerByte
	}
}

// Allow refills to now and, if a frame may be sent, charges n bytes and
// returns true.
func (b *TokenBucket) Allow(now int64, n uint32) bool {
	if b.rate == 0 {
		return true
	}
	b.Refill(now)
	if b.tokens <= 0 {
		return false
	}
	b.Consume(n)
	return true
}

// Tokens is the current bucket content in bytes (negative while in debt).
func (b *TokenBucket) Tokens() int64 { return b.tokens / unitsPerByte }
