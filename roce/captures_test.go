package roce_test

import (
	"slices"
	"testing"

	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

// wantOpcodes is SOURCES.md's table: BTH opcode counts per capture.
var wantOpcodes = map[string]map[roce.Opcode]int{
	"oferby_proxy_roce.pcap": {0: 33, 3: 33, 5: 2, 17: 37},
	"montybeatnik_roce_capture_read-write-ecn.pcap": {
		100: 5, 10: 1, 17: 1, 12: 1, 13: 1, 14: 2, 15: 1,
	},
	"montybeatnik_test.pcap": {
		100: 5, 10: 1, 17: 1, 12: 1, 13: 1, 14: 2, 15: 1,
	},
	"pcapplusplus_InfiniBandPacket.pcap": {12: 1},
	"scapy_uts_cx4lx_cnp.pcap":           {0x81: 1},
}

func TestCapturesMatchSources(t *testing.T) {
	m := roce.DefaultTCMap()
	for _, c := range rocetest.Captures(t) {
		want, ok := wantOpcodes[c.Name]
		if !ok {
			t.Errorf("%s: capture not described in this test", c.Name)
			continue
		}
		got := map[roce.Opcode]int{}
		for i, f := range c.Frames {
			var r roce.Result
			roce.Classify(f, &m, true, &r)
			if r.Err != roce.ReasonNone {
				t.Errorf("%s #%d: error %v", c.Name, i, r.Err)
			}
			if !r.RoCE {
				continue
			}
			got[r.Opcode]++
			if r.ICRC != roce.ICRCOK {
				t.Errorf("%s #%d: ICRC %v", c.Name, i, r.ICRC)
			}
		}
		if !mapsEqual(got, want) {
			t.Errorf("%s: opcodes %v, want %v", c.Name, got, want)
		}
	}
}

func mapsEqual(a, b map[roce.Opcode]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCaptureDetails checks the facts SOURCES.md states beyond opcodes.
func TestCaptureDetails(t *testing.T) {
	caps := map[string][][]byte{}
	for _, c := range rocetest.Captures(t) {
		caps[c.Name] = c.Frames
	}
	classify := func(f []byte) roce.Result {
		var r roce.Result
		roce.Classify(f, nil, true, &r)
		return r
	}

	if fr := caps["scapy_uts_cx4lx_cnp.pcap"]; len(fr) == 1 {
		r := classify(fr[0])
		if !r.CNP || r.DSCP != 48 || r.ECN != roce.ECNECT0 || !r.BECN || r.TC != 6 || r.Transport != roce.TransportCNP {
			t.Errorf("CNP: %+v", r)
		}
		if sp := roce.UDP(fr[0][r.L4:]).SrcPort(); sp != 0 {
			t.Errorf("CNP source port %d", sp)
		}
		if r.PayloadLen != 16 {
			t.Errorf("CNP payload %d, want 16 reserved bytes", r.PayloadLen)
		}
	}

	if fr := caps["pcapplusplus_InfiniBandPacket.pcap"]; len(fr) == 1 {
		r := classify(fr[0])
		reth := roce.RETH(roce.BTH(fr[0][r.BTH:]).Ext(roce.ExtRETH))
		if reth == nil || reth.VA() != 0x7fee260fb000 || reth.RKey() != 0x2b8 || reth.DMALength() != 65536 {
			t.Errorf("READ Request RETH: %x", []byte(reth))
		}
	}

	var credits []roce.AETHSyndrome
	pad3 := 0
	for _, f := range caps["oferby_proxy_roce.pcap"] {
		r := classify(f)
		if !r.RoCE {
			continue
		}
		if r.ECN != roce.ECNECT0 {
			t.Errorf("oferby: ECN %d", r.ECN)
		}
		if sp := roce.UDP(f[r.L4:]).SrcPort(); sp != 69 && sp != 72 {
			t.Errorf("oferby: source port %d", sp)
		}
		if r.PadCount == 3 {
			pad3++
		}
		if r.HasAETH {
			if !r.AETH.IsACK() {
				t.Errorf("oferby: syndrome %v", r.AETH)
			}
			if !slices.Contains(credits, r.AETH) {
				credits = append(credits, r.AETH)
			}
		}
	}
	slices.Sort(credits)
	if !slices.Equal(credits, []roce.AETHSyndrome{5, 6}) || pad3 == 0 {
		t.Errorf("oferby: syndromes %v, pad-3 frames %d", credits, pad3)
	}

	for _, name := range []string{"montybeatnik_roce_capture_read-write-ecn.pcap", "montybeatnik_test.pcap"} {
		arp := 0
		for _, f := range caps[name] {
			r := classify(f)
			if r.EtherType == roce.EtherTypeARP {
				arp++
			}
			if !r.RoCE {
				continue
			}
			if r.ECN != roce.ECNNotECT {
				t.Errorf("%s: ECN %d, want Not-ECT", name, r.ECN)
			}
			if r.Opcode == roce.OpUD|roce.OpSendOnly {
				deth := roce.DETH(roce.BTH(f[r.BTH:]).Ext(roce.ExtDETH))
				if r.DestQP != 1 || deth == nil {
					t.Errorf("%s: UD SEND to QP %d", name, r.DestQP)
				}
			}
		}
		if name == "montybeatnik_test.pcap" && arp != 4 {
			t.Errorf("%s: %d ARP frames, want 4", name, arp)
		}
	}
}

// TestRewriteKeepsICRC: ECN/DSCP/TTL rewrites keep the ICRC valid (the
// fields are masked), a dest QP change breaks it.
func TestRewriteKeepsICRC(t *testing.T) {
	frames := rocetest.CaptureFrames()
	for _, c := range rocetest.Corpus() {
		frames = append(frames, c.Frame)
	}
	n := 0
	for i, orig := range frames {
		var r roce.Result
		roce.Classify(orig, nil, true, &r)
		if !r.RoCE || r.Err != roce.ReasonNone {
			continue
		}
		n++
		for _, rw := range []struct {
			name string
			do   func(f []byte, l3 int)
		}{
			{"CE", func(f []byte, l3 int) { setECN(f, l3, roce.ECNCE) }},
			{"DSCP", func(f []byte, l3 int) { setDSCP(f, l3, 46) }},
			{"TTL", func(f []byte, l3 int) {
				if f[l3]>>4 == 4 {
					roce.IPv4(f[l3:]).SetTTL(3)
				} else {
					roce.IPv6(f[l3:]).SetHopLimit(3)
				}
			}},
			{"BECN", func(f []byte, l3 int) { roce.BTH(f[r.BTH:]).SetBECN(true) }},
		} {
			f := slices.Clone(orig)
			rw.do(f, int(r.L3))
			var r2 roce.Result
			roce.Classify(f, nil, true, &r2)
			if r2.ICRC != roce.ICRCOK || r2.Err != roce.ReasonNone {
				t.Fatalf("frame %d %s: %v %v", i, rw.name, r2.ICRC, r2.Err)
			}
			if f[r.L3]>>4 == 4 && !roce.IPv4(f[r.L3:]).ChecksumValid() {
				t.Fatalf("frame %d %s: IPv4 checksum broken", i, rw.name)
			}
		}
		f := slices.Clone(orig)
		roce.BTH(f[r.BTH:]).SetDestQP(r.DestQP ^ 1)
		var r2 roce.Result
		roce.Classify(f, nil, true, &r2)
		if r2.ICRC != roce.ICRCBad || r2.Err != roce.ErrBadICRC {
			t.Fatalf("frame %d: dest QP change left ICRC %v", i, r2.ICRC)
		}
	}
	if n < 100 {
		t.Fatalf("only %d RoCE frames", n)
	}
}

func setECN(f []byte, l3 int, ecn uint8) {
	if f[l3]>>4 == 4 {
		roce.IPv4(f[l3:]).SetECN(ecn)
	} else {
		roce.IPv6(f[l3:]).SetECN(ecn)
	}
}

func setDSCP(f []byte, l3 int, d uint8) {
	if f[l3]>>4 == 4 {
		roce.IPv4(f[l3:]).SetDSCP(d)
	} else {
		roce.IPv6(f[l3:]).SetDSCP(d)
	}
}

// TestICRCNotAtFrameEnd: short frames carry Ethernet padding after the
// ICRC, which must be found through the UDP length.
func TestICRCNotAtFrameEnd(t *testing.T) {
	for _, f := range rocetest.CaptureFrames() {
		var r roce.Result
		roce.Classify(f, nil, true, &r)
		if r.RoCE && int(r.ICRCOff)+4 < len(f) && r.ICRC != roce.ICRCOK {
			t.Errorf("padded capture frame: ICRC %v", r.ICRC)
		}
	}
	s := rocetest.Spec(roce.OpRC|roce.OpSendMiddle, 1)
	s.Payload = nil
	f := make([]byte, s.Len())
	s.Encode(f)
	if len(f) != roce.MinFrameLen {
		t.Fatalf("len %d", len(f))
	}
	var r roce.Result
	roce.Classify(f, nil, true, &r)
	if r.ICRC != roce.ICRCOK || int(r.ICRCOff) != len(f)-2-4 {
		t.Fatalf("short frame: %v at %d", r.ICRC, r.ICRCOff)
	}
	// Garbage in the Ethernet padding changes nothing.
	f[len(f)-1] ^= 0xff
	roce.Classify(f, nil, true, &r)
	if r.ICRC != roce.ICRCOK {
		t.Fatal("padding is covered by the ICRC")
	}
}
