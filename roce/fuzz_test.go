package roce_test

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

// refICRC is the spec read literally: copy, mask, CRC the whole thing.
func refICRC(f []byte, l3, l4, end int) uint32 {
	buf := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, f[l3:end]...)
	ip := buf[8:]
	if ip[0]>>4 == 6 {
		ip[0] |= 0x0f
		ip[1], ip[2], ip[3], ip[7] = 0xff, 0xff, 0xff, 0xff
	} else {
		ip[1], ip[8], ip[10], ip[11] = 0xff, 0xff, 0xff, 0xff
	}
	u := ip[l4-l3:]
	u[6], u[7], u[8+4] = 0xff, 0xff, 0xff
	return crc32.ChecksumIEEE(buf)
}

func addSeeds(f *testing.F) {
	for _, c := range rocetest.Corpus() {
		f.Add(c.Frame)
	}
	pfc, pause := make([]byte, 60), make([]byte, 60)
	roce.BuildPFC(pfc, roce.MAC{2}, 0x08, [8]uint16{3: 0xffff})
	roce.BuildPause(pause, roce.MAC{2}, 0xffff)
	f.Add(pfc)
	f.Add(pause)
	// Captures are optional here: a fuzz target must not skip without them.
	for _, fr := range rocetest.CaptureFrames() {
		f.Add(fr)
	}
}

// agreeMaps cover every trust mode for checkAgree.
var agreeMaps = func() []*roce.TCMap {
	d, p, n := roce.DefaultTCMap(), roce.DefaultTCMap(), roce.DefaultTCMap()
	p.Trust, n.Trust = roce.TrustPCP, roce.TrustNone
	for i := range p.PCP {
		p.PCP[i] = uint8(7 - i)
	}
	return []*roce.TCMap{nil, &d, &p, &n}
}()

// junkResult has every field set: Classify must overwrite all of them.
var junkResult = roce.Result{L3: 1, L4: 2, BTH: 3, PayloadOff: 4, PayloadLen: 5, ICRCOff: 6,
	EtherType: 7, VID: 8, PKey: 9, DestQP: 10, PSN: 11, Opcode: 12, Transport: 13, IPVersion: 14,
	Tags: 15, PCP: 16, DSCP: 17, ECN: 18, TC: 19, PadCount: 20, TVer: 21, AETH: 22, ICRC: 23,
	Err: 24, RoCE: true, Tagged: true, CNP: true, FECN: true, BECN: true, AckReq: true, SE: true,
	MigReq: true, HasAETH: true, Fragment: true, L4Proto: 25, MACCtl: 26}

// checkAgree compares Classify, fast path included, with the general path.
func checkAgree(t *testing.T, frame []byte) {
	t.Helper()
	for _, m := range agreeMaps {
		for _, verify := range []bool{false, true} {
			got, want := junkResult, junkResult
			roce.Classify(frame, m, verify, &got)
			roce.ClassifyGeneral(frame, m, verify, &want)
			if got != want {
				t.Fatalf("% x (verify %v):\n got %+v\nwant %+v", frame, verify, got, want)
			}
		}
	}
}

// Mutations of every corpus frame around the fields the fast path reads.
func TestFastPathAgrees(t *testing.T) {
	for _, c := range rocetest.Corpus() {
		f := c.Frame
		for n := 0; n <= len(f); n++ {
			checkAgree(t, f[:n])
		}
		g := append([]byte(nil), f...)
		for i := 0; i < min(len(g), 80); i++ {
			orig := g[i]
			for _, v := range []byte{0, 0xff, orig ^ 1, orig ^ 2, orig ^ 4, orig ^ 0x10, orig ^ 0x20, orig ^ 0x40, orig ^ 0x80, orig + 1, orig - 1, orig + 4, orig - 4} {
				g[i] = v
				checkAgree(t, g)
			}
			g[i] = orig
		}
	}
}

func FuzzClassify(f *testing.F) {
	addSeeds(f)
	m := roce.DefaultTCMap()
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkAgree(t, frame)
		var r, r2 roce.Result
		ok := roce.Classify(frame, &m, true, &r)
		ok2 := roce.Classify(frame, &m, false, &r2)
		// What Classify reports is what its result says, on either path.
		if ok != (r.RoCE && r.Err == roce.ReasonNone) || ok2 != (r2.RoCE && r2.Err == roce.ReasonNone) {
			t.Fatalf("Classify reported %v (verifying) and %v (not) for %+v and %+v", ok, ok2, r, r2)
		}
		n := len(frame)
		if int(r.L3) > n || int(r.L4) > n || int(r.BTH) > n || int(r.ICRCOff) > n {
			t.Fatalf("offset past frame: %+v", r)
		}
		if r.Err >= roce.NumReasons || r.TC > 7 {
			t.Fatalf("bad result %+v", r)
		}
		// Verification only adds the ICRC state (and bad_icrc).
		r2.ICRC = r.ICRC
		if r2.Err == roce.ReasonNone && r.Err == roce.ErrBadICRC {
			r2.Err = roce.ErrBadICRC
		}
		if r != r2 {
			t.Fatalf("verify changed the result:\n%+v\n%+v", r, r2)
		}
		if r.RoCE && r.Err == roce.ReasonNone {
			if r.L4 <= r.L3 || r.BTH != r.L4+8 {
				t.Fatalf("offsets %+v", r)
			}
			end := int(r.PayloadOff) + int(r.PayloadLen) + int(r.PadCount)
			if end != int(r.ICRCOff) || int(r.ICRCOff)+4 > n || int(r.L4)+int(roce.UDP(frame[r.L4:]).Length()) != int(r.ICRCOff)+4 {
				t.Fatalf("lengths %+v", r)
			}
			if r.ICRC != roce.ICRCOK {
				t.Fatalf("no error but ICRC %v", r.ICRC)
			}
			if r.CNP != (r.Opcode == roce.OpCNP) || !r.Opcode.Defined() {
				t.Fatalf("opcode %+v", r)
			}
		}
		checkL4AndMACCtl(t, frame, &r)
		if r.ICRC != roce.ICRCUnchecked {
			want := refICRC(frame, int(r.L3), int(r.L4), int(r.ICRCOff))
			got := binary.LittleEndian.Uint32(frame[r.ICRCOff:])
			if (want == got) != (r.ICRC == roce.ICRCOK) {
				t.Fatalf("ICRC state %v, reference %08x carried %08x", r.ICRC, want, got)
			}
		}
	})
}

// checkL4AndMACCtl checks L4, L4Proto and MACCtl against the frame, read
// with literal offsets, and ParseMACControl against ParsePFC/ParsePause.
func checkL4AndMACCtl(t *testing.T, frame []byte, r *roce.Result) {
	t.Helper()
	n := len(frame)
	if r.RoCE && r.L4Proto != roce.ProtoUDP {
		t.Fatalf("RoCE over protocol %d: %+v", r.L4Proto, r)
	}
	if r.L4 != 0 {
		switch r.L4Proto {
		case roce.ProtoUDP:
			if int(r.L4)+8 > n {
				t.Fatalf("UDP past the frame: %+v", r)
			}
		case roce.ProtoTCP:
			if int(r.L4)+20 > n || r.Err != roce.ReasonNone || r.RoCE {
				t.Fatalf("TCP: %+v", r)
			}
		default:
			t.Fatalf("L4 for protocol %d: %+v", r.L4Proto, r)
		}
	}
	if r.IPVersion == 4 && r.L4Proto != frame[r.L3+9] {
		t.Fatalf("IPv4 protocol %d, L4Proto %d", frame[r.L3+9], r.L4Proto)
	}
	if r.IPVersion == 6 && r.L4 != 0 && r.L4 == r.L3+40 && r.L4Proto != frame[r.L3+6] {
		t.Fatalf("IPv6 next header %d, L4Proto %d", frame[r.L3+6], r.L4Proto)
	}
	untagged := n >= 14 && frame[12] == 0x88 && frame[13] == 0x08
	if (r.MACCtl != roce.MACCtlNone) != untagged {
		t.Fatalf("MACCtl %v for EtherType % x: %+v", r.MACCtl, frame[12:14], r)
	}
	req, ok := roce.ParseMACControl(frame, r)
	ce, q, pfc := roce.ParsePFC(frame)
	pq, pause := roce.ParsePause(frame)
	switch {
	case pfc != (r.MACCtl == roce.MACCtlPFC) || pause != (r.MACCtl == roce.MACCtlPause):
		t.Fatalf("MACCtl %v, ParsePFC %v, ParsePause %v", r.MACCtl, pfc, pause)
	case ok != (pfc || pause):
		t.Fatalf("ParseMACControl %v for %v", ok, r.MACCtl)
	case pfc && (req.ClassEnable != ce || req.Quanta != q):
		t.Fatalf("PFC %+v, ParsePFC %#x %v", req, ce, q)
	case pause && (req.ClassEnable != 0xff || req.Quanta != [8]uint16{pq, pq, pq, pq, pq, pq, pq, pq}):
		t.Fatalf("PAUSE %+v, ParsePause %d", req, pq)
	}
}

func FuzzICRC(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var r roce.Result
		roce.Classify(frame, nil, false, &r)
		if r.ICRCOff == 0 {
			// Arbitrary offsets must be rejected or computed, never panic.
			if len(frame) > 4 {
				roce.ICRC(frame, int(frame[0]), int(frame[1]), int(frame[2]))
			}
			return
		}
		l3, l4, end := int(r.L3), int(r.L4), int(r.ICRCOff)
		got, ok := roce.ICRC(frame, l3, l4, end)
		if !ok {
			t.Fatalf("ICRC refused classifier offsets %+v", r)
		}
		if want := refICRC(frame, l3, l4, end); got != want {
			t.Fatalf("ICRC %08x, reference %08x", got, want)
		}
		// Masked fields do not matter, everything else does.
		g := append([]byte(nil), frame...)
		g[l4+6] ^= 0x5a
		g[l4+8+4] ^= 0xc0
		if g[l3]>>4 == 4 {
			roce.IPv4(g[l3:]).SetTOS(g[l3+1] ^ 0xff)
			roce.IPv4(g[l3:]).SetTTL(g[l3+8] + 1)
		} else {
			roce.IPv6(g[l3:]).SetTrafficClass(0x5a)
			roce.IPv6(g[l3:]).SetFlowLabel(0x12345)
			roce.IPv6(g[l3:]).SetHopLimit(1)
		}
		if c, _ := roce.ICRC(g, l3, l4, end); c != got {
			t.Fatal("masked field changed the ICRC")
		}
		g[end-1] ^= 1
		if c, _ := roce.ICRC(g, l3, l4, end); c == got {
			t.Fatal("payload change kept the ICRC")
		}
		if err := roce.SetICRC(g); err != nil {
			t.Fatal(err)
		}
		var r2 roce.Result
		roce.Classify(g, nil, true, &r2)
		if r2.ICRC != roce.ICRCOK {
			t.Fatalf("after SetICRC: %v", r2.ICRC)
		}
	})
}
