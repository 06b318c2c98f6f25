package roce

import (
	"hash/crc32"
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"
)

// The ICRC's word masks are built from the named offsets; these literals
// are the spec's fields, worked out by hand.
func TestICRCMaskWords(t *testing.T) {
	v4 := [5]uint64{
		0x000000000000ff00, // TOS
		0x00000000ffff00ff, // TTL, header checksum
		0,
		0x00000000ffff0000, // UDP checksum
		0x00000000000000ff, // BTH byte 4
	}
	v6 := [7]uint64{
		0xff000000ffffff0f, // traffic class, flow label, hop limit
		0, 0, 0, 0,
		0xffff000000000000, // UDP checksum
		0x000000ff00000000, // BTH byte 4
	}
	if maskV4 != v4 || maskV6 != v6 {
		t.Errorf("masks %#x %#x", maskV4, maskV6)
	}
}

// Classify's fast path zeroes a Result with a few vector stores and
// combines the stores of adjacent fields; both depend on the layout.
func TestResultLayout(t *testing.T) {
	var r Result
	if n := unsafe.Sizeof(r); n != 52 {
		t.Errorf("Result is %d bytes", n)
	}
	if unsafe.Offsetof(r.EtherType) != 6 || unsafe.Offsetof(r.PayloadOff) != 8 ||
		unsafe.Offsetof(r.Tags) != 15 || unsafe.Sizeof(opRow{}) != 8 {
		t.Error("the 8-byte groups L3..EtherType and PayloadOff..Tags moved")
	}
	if unsafe.Offsetof(r.RoCE) != unsafe.Offsetof(r.L4Proto)+1 {
		t.Error("L4Proto and RoCE are not adjacent")
	}
}

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
