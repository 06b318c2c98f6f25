package roce_test

import (
	"testing"

	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

// smallMix is a small-frame RoCE mix: ACKs, READ requests, CNPs, small
// SENDs and WRITEs, some tagged and some IPv6, as a fabric carries them.
func smallMix() [][]byte {
	var out [][]byte
	add := func(op roce.Opcode, v6 bool, tags int, n int) {
		s := rocetest.Spec(op, len(out))
		s.IPv6 = v6
		s.Tags = rocetest.TagModes[tags].Tags
		if n >= 0 {
			s.Payload = make([]byte, n)
		}
		f := make([]byte, s.Len())
		s.Encode(f)
		out = append(out, f)
	}
	for i := 0; i < 4; i++ {
		add(roce.OpRC|roce.OpAck, false, 0, -1)
		add(roce.OpRC|roce.OpSendOnly, false, 0, 20)
		add(roce.OpRC|roce.OpWriteOnly, false, 1, 8)
		add(roce.OpRC|roce.OpReadRequest, false, 0, -1)
		add(roce.OpRC|roce.OpSendLastImm, false, 0, 4)
		add(roce.OpUD|roce.OpSendOnly, false, 0, 16)
	}
	add(roce.OpCNP, false, 0, -1)
	add(roce.OpCNP, false, 1, -1)
	add(roce.OpRC|roce.OpAck, true, 0, -1)
	add(roce.OpRC|roce.OpSendOnly, true, 0, 12)
	add(roce.OpRC|roce.OpAck, false, 2, -1)
	add(roce.OpRC|roce.OpReadResponseOnly, false, 0, 16)
	add(roce.OpRC|roce.OpWriteFirst, false, 0, 4)
	add(roce.OpXRC|roce.OpSendOnly, false, 0, 8)
	return out
}

func benchClassify(b *testing.B, verify bool) {
	mix := smallMix()
	m := roce.DefaultTCMap()
	var r roce.Result
	bytes := 0
	for _, f := range mix {
		bytes += len(f)
	}
	b.SetBytes(int64(bytes / len(mix)))
	b.ReportAllocs()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		roce.Classify(mix[i&31], &m, verify, &r)
	}
	c.stop(b)
	if r.Err != roce.ReasonNone {
		b.Fatal(r.Err)
	}
}

func BenchmarkClassify(b *testing.B)     { benchClassify(b, false) }
func BenchmarkClassifyICRC(b *testing.B) { benchClassify(b, true) }

func icrcFrame(payload int) ([]byte, roce.Result) {
	s := rocetest.Spec(roce.OpRC|roce.OpSendOnly, 1)
	s.Payload = make([]byte, payload)
	f := make([]byte, s.Len())
	s.Encode(f)
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	return f, r
}

func benchICRC(b *testing.B, payload int) {
	f, r := icrcFrame(payload)
	b.SetBytes(int64(len(f)))
	b.ReportAllocs()
	c := startCPU(b)
	for i := 0; i < b.N; i++ {
		roce.ICRC(f, int(r.L3), int(r.L4), int(r.ICRCOff))
	}
	c.stop(b)
}

// RoCEv2/IPv4 frames are 58+4k bytes long, so the nearest sizes stand in:
// 62 bytes (SEND Only with 4 bytes, the size of an ACK) and 1022 bytes.
func BenchmarkICRC64(b *testing.B) { benchICRC(b, 4) }
func BenchmarkICRC1K(b *testing.B) { benchICRC(b, 1024-62) }

// A full IB MTU 1024 packet (1082-byte frame): from 1024 bytes on, Go's
// crc32 switches to AVX-512 VPCLMULQDQ where the CPU has it.
func BenchmarkICRCMTU1024(b *testing.B) { benchICRC(b, 1024) }
