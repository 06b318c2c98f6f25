package qos

// Rand is a xorshift64* generator: one multiply per draw, 8 bytes of
// state, and a sequence fixed by the seed, so WRED decisions are
// reproducible in tests and independent between queues.
type Rand struct{ s uint64 }

// NewRand returns a generator for seed. The seed goes through splitmix64
// so that nearby seeds (one per queue, say) give unrelated sequences and
// seed 0 does not produce the all-zero state xorshift never leaves.
func NewRand(seed uint64) Rand {
	z := seed + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	if z == 0 {
		z = 0x9e3779b97f4a7c15
	}
	return Rand{z}
}

// Uint64 returns the next value.
func (r *Rand) Uint64() uint64 {
	x := r.s
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	r.s = x
	return x * 0x2545f4914f6cdd1d
}

// Float64 returns a value in [0, 1) with 53 random bits.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * (1.0 / (1 << 53))
}
