package roce

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestCRCUpdateMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		seed := rng.Uint32()
		if got, want := crcUpdate(seed, p), crc32.Update(seed, crc32.IEEETable, p); got != want {
			t.Fatalf("len %d: %08x, want %08x", n, got, want)
		}
		if got, want := crcTail(seed, p), crc32.Update(seed, crc32.IEEETable, p); got != want {
			t.Fatalf("tail len %d: %08x, want %08x", n, got, want)
		}
	}
}

// BenchmarkCRCTable and BenchmarkCRCStdlib compare the package's slicing-by-8
// table with hash/crc32 (PCLMULQDQ from 64 bytes on amd64); hwMin follows.
func BenchmarkCRCTable(b *testing.B) {
	for _, n := range []int{16, 32, 48, 64, 96, 128, 1024} {
		p := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				crcUpdate(0, p)
			}
		})
	}
}

func BenchmarkCRCStdlib(b *testing.B) {
	for _, n := range []int{16, 32, 48, 64, 96, 128, 1024} {
		p := make([]byte, n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				crc32.Update(0, crc32.IEEETable, p)
			}
		})
	}
}
