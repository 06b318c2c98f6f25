package cbpf_test

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"

	"roce-fwd/cbpf"
	"roce-fwd/demotraffic"
	"roce-fwd/dpdk"
)

// Filters libpcap compiles select the frames tcpdump would: RoCEv2 by UDP
// port, CE-marked IPv4, and neither of them on a frame that is not IP.
func TestLibpcapFilters(t *testing.T) {
	frames := demotraffic.Frames()
	var roce, other int
	for _, f := range frames {
		if len(f) > 37 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == 17 && binary.BigEndian.Uint16(f[36:]) == 4791 {
			roce++
		} else {
			other++
		}
	}
	if roce == 0 || other == 0 {
		t.Fatalf("the demo frames hold %d RoCEv2 and %d other frames: want both", roce, other)
	}
	p, err := dpdk.CompileBPF("ip and udp dst port 4791", 262144)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	for _, f := range frames {
		if cbpf.Run(p, f) != 0 {
			got++
		}
	}
	if got != roce {
		t.Errorf("udp dst port 4791 kept %d frames, want the %d RoCEv2 IPv4 frames", got, roce)
	}
	// ECN CE on a frame made CE, not on its original.
	ce, err := dpdk.CompileBPF("ip[1] & 3 == 3", 262144)
	if err != nil {
		t.Fatal(err)
	}
	f := append([]byte(nil), frames[0]...)
	if binary.BigEndian.Uint16(f[12:]) != 0x0800 {
		t.Fatal("the first demo frame is not IPv4")
	}
	f[15] &^= 3
	if cbpf.Run(ce, f) != 0 {
		t.Error("ip[1] & 3 == 3 kept a Not-ECT frame")
	}
	f[15] |= 3
	if cbpf.Run(ce, f) == 0 {
		t.Error("ip[1] & 3 == 3 dropped a CE frame")
	}
	if _, err := dpdk.CompileBPF("udp dst port banana", 65535); err == nil {
		t.Error("a filter that does not compile was accepted")
	}
}

// An absolute load past the packet rejects it, as libpcap's bpf_filter
// does, at any offset: near the end of the packet, and at the offsets
// Linux reserves for a socket's ancillary data (SKF_AD_OFF, 0xfffff000),
// which programs compiled for a dead pcap handle never use.
func TestLoadPastThePacket(t *testing.T) {
	pkt := make([]byte, 30)
	for _, tc := range []struct {
		code uint16
		k    uint32
	}{
		{0x30, 29}, {0x30, 30}, // ld b: the last byte, then one past it
		{0x28, 28}, {0x28, 29}, // ld h
		{0x20, 26}, {0x20, 27}, // ld w
		{0x30, 0xfffff000}, {0x30, 0xfffff001}, {0x20, 0xfffff001}, {0x20, 0xffffffff},
	} {
		p := []cbpf.Insn{{Code: tc.code, K: tc.k}, {Code: 0x06, K: 1}}
		if err := cbpf.Check(p); err != nil {
			t.Fatal(err)
		}
		size := map[uint16]uint32{0x30: 1, 0x28: 2, 0x20: 4}[tc.code]
		want := uint32(0)
		if uint64(tc.k)+uint64(size) <= uint64(len(pkt)) {
			want = 1
		}
		if got := cbpf.Run(p, pkt); got != want {
			t.Errorf("load of %d bytes at %#x on a %d-byte packet: verdict %d, want %d", size, tc.k, len(pkt), got, want)
		}
	}
}

// Check refuses what Run cannot run safely.
func TestCheck(t *testing.T) {
	bad := map[string][]cbpf.Insn{
		"empty":           nil,
		"no return":       {{Code: 0x00, K: 1}},
		"jump out":        {{Code: 0x05, K: 5}, {Code: 0x06, K: 1}},
		"cond jump out":   {{Code: 0x15, Jt: 3}, {Code: 0x06, K: 1}},
		"scratch 16":      {{Code: 0x02, K: 16}, {Code: 0x06, K: 1}},
		"divide by 0":     {{Code: 0x34, K: 0}, {Code: 0x06, K: 1}},
		"load mode":       {{Code: 0xe0}, {Code: 0x06, K: 1}},
		"bad alu op":      {{Code: 0xb4, K: 1}, {Code: 0x06, K: 1}},
		"bad jump op":     {{Code: 0x55}, {Code: 0x06, K: 1}},
		"ldx scratch 100": {{Code: 0x61, K: 100}, {Code: 0x06, K: 1}},
		"shift by 32":     {{Code: 0x64, K: 32}, {Code: 0x06, K: 1}},
		"high code bits":  {{Code: 0x3024, K: 2}, {Code: 0x06, K: 1}}, // mul with bits no instruction has
	}
	for name, p := range bad {
		if err := cbpf.Check(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Run agrees with golang.org/x/net/bpf's interpreter on every program
// both accept, over any packet.
func FuzzRun(f *testing.F) {
	f.Add([]byte{0x28, 0, 0, 0, 12, 0, 0, 0, 0x15, 0, 0, 1, 0, 0, 8, 0, 0x06, 0, 0, 0, 0xff, 0xff, 0, 0, 0x06, 0, 0, 0, 0, 0, 0, 0}, []byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x08\x00\x45\x00"))
	f.Add([]byte{0xb1, 0, 0, 0, 14, 0, 0, 0, 0x48, 0, 0, 0, 16, 0, 0, 0, 0x16, 0, 0, 0, 0, 0, 0, 0}, []byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x08\x00\x45\x00\x00\x54"))
	f.Fuzz(func(t *testing.T, code, pkt []byte) {
		var p []cbpf.Insn
		var raw []bpf.RawInstruction
		for i := 0; i+8 <= len(code) && len(p) < 64; i += 8 {
			in := cbpf.Insn{Code: binary.BigEndian.Uint16(code[i:]), Jt: code[i+2], Jf: code[i+3], K: binary.BigEndian.Uint32(code[i+4:])}
			p = append(p, in)
			raw = append(raw, bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K})
		}
		if cbpf.Check(p) != nil {
			return
		}
		for _, in := range p {
			if in.Code == 0x81 {
				return // ldx len: x/net/bpf reads it as ld len (into A, not X)
			}
			if in.Code&0x07 == 0x00 && in.Code&0xe0 == 0x20 && in.K >= 0xfffff000 {
				// An absolute load at SKF_AD_OFF or above: x/net/bpf
				// reads it as a Linux socket's ancillary data (ld
				// b[0xfffff001] is its packet length). Programs from
				// pcap_open_dead have no such loads, and cbpf reads
				// them as libpcap's bpf_filter does: past the packet,
				// so the packet is rejected (TestLoadPastThePacket).
				return
			}
		}
		insns, ok := bpf.Disassemble(raw)
		if !ok {
			return // an instruction x/net/bpf does not know
		}
		vm, err := bpf.NewVM(insns)
		if err != nil {
			return
		}
		want, err := vm.Run(pkt)
		if err != nil {
			return
		}
		got := cbpf.Run(p, pkt)
		// x/net/bpf returns min(verdict, len(pkt)) bytes; only accept
		// or reject is comparable.
		if (got != 0) != (want != 0) {
			t.Fatalf("program %+v on %x: cbpf %d, x/net/bpf %d", p, pkt, got, want)
		}
	})
}
