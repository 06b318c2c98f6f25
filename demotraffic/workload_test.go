package demotraffic

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"roce-fwd/pcapio"
	"roce-fwd/roce"
)

// genFrame is one generated frame, decoded with the dataplane's
// classifier, and the QP the generator made it for.
type genFrame struct {
	b  []byte
	r  roce.Result
	qp int
}

func (f *genFrame) src() netip.Addr { return ipAddr(f.b, &f.r, true) }
func (f *genFrame) dst() netip.Addr { return ipAddr(f.b, &f.r, false) }
func (f *genFrame) sport() uint16   { return binary.BigEndian.Uint16(f.b[f.r.L4:]) }
func (f *genFrame) dport() uint16   { return binary.BigEndian.Uint16(f.b[f.r.L4+2:]) }
func (f *genFrame) ext() roce.ExtFields {
	e, _ := roce.BTH(f.b[f.r.BTH : int(f.r.ICRCOff)+4]).ExtFields()
	return e
}

// reverse: ACKs and CNPs go from the responder back to the requester.
func (f *genFrame) reverse() bool { return f.r.Opcode == roce.OpAck || f.r.CNP }

func ipAddr(b []byte, r *roce.Result, src bool) netip.Addr {
	ip := b[r.L3:]
	if r.IPVersion == 6 {
		if src {
			return netip.AddrFrom16([16]byte(ip[8:24]))
		}
		return netip.AddrFrom16([16]byte(ip[24:40]))
	}
	if src {
		return netip.AddrFrom4([4]byte(ip[12:16]))
	}
	return netip.AddrFrom4([4]byte(ip[16:20]))
}

// generate makes w and checks what holds for every frame of every
// workload: valid RoCEv2 with a good ICRC and IPv4 checksum, no FCS, the
// DSCP, ECN and ports of its kind.
func generate(t *testing.T, w Workload) ([]genFrame, Summary) {
	t.Helper()
	var out []genFrame
	s, err := w.generate(func(b []byte, qp int) error {
		f := genFrame{b: bytes.Clone(b), qp: qp}
		roce.Classify(f.b, nil, true, &f.r)
		out = append(out, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Frames != len(out) || s.Frames != w.TotalFrames() || s.QPs != w.QPs {
		t.Fatalf("summary %d frames %d QPs; emitted %d, want %d frames", s.Frames, s.QPs, len(out), w.TotalFrames())
	}
	var bytes int64
	for i := range out {
		f := &out[i]
		bytes += int64(len(f.b))
		r := &f.r
		if !r.RoCE || r.Err != roce.ReasonNone || r.ICRC != roce.ICRCOK {
			t.Fatalf("frame %d: RoCE %v err %v ICRC %v", i, r.RoCE, r.Err, r.ICRC)
		}
		if want := max(roce.MinFrameLen, int(r.ICRCOff)+roce.ICRCLen); len(f.b) != want {
			t.Fatalf("frame %d: %d bytes, want %d (no FCS)", i, len(f.b), want)
		}
		wantIP := uint8(4)
		if w.IPv6 {
			wantIP = 6
		}
		if r.IPVersion != wantIP || r.Tags != 0 {
			t.Fatalf("frame %d: IPv%d, %d tags", i, r.IPVersion, r.Tags)
		}
		if r.IPVersion == 4 && !roce.IPv4(f.b[r.L3:]).ChecksumValid() {
			t.Fatalf("frame %d: bad IPv4 header checksum", i)
		}
		if r.ECN != roce.ECNECT0 || r.PKey != 0xffff || r.FECN || f.dport() != roce.RoCEv2Port {
			t.Fatalf("frame %d: ECN %d P_Key %#x FECN %v dport %d", i, r.ECN, r.PKey, r.FECN, f.dport())
		}
		if r.CNP {
			if r.DSCP != 48 || !r.BECN || f.sport() != 0 || r.PSN != 0 || r.PayloadLen != 16 {
				t.Fatalf("CNP %d: DSCP %d BECN %v sport %d PSN %d payload %d", i, r.DSCP, r.BECN, f.sport(), r.PSN, r.PayloadLen)
			}
		} else if r.DSCP != 26 || r.BECN || f.sport() < 0xc000 {
			t.Fatalf("frame %d (%v): DSCP %d BECN %v sport %#x", i, r.Opcode, r.DSCP, r.BECN, f.sport())
		}
		if r.DestQP < 2 {
			t.Fatalf("frame %d: special QP %d", i, r.DestQP)
		}
		pfx := netip.MustParsePrefix("10.0.0.0/16")
		if w.IPv6 {
			pfx = netip.MustParsePrefix("fd00::/64")
		}
		if !pfx.Contains(f.src()) || !pfx.Contains(f.dst()) || f.src() == f.dst() {
			t.Fatalf("frame %d: %v -> %v", i, f.src(), f.dst())
		}
	}
	if bytes != s.Bytes {
		t.Errorf("summary %d bytes, frames have %d", s.Bytes, bytes)
	}
	return out, s
}

var allMixes = []Mix{MixControl, MixMTU1024, MixMTU4096}

func TestWorkloadFrames(t *testing.T) {
	for _, m := range allMixes {
		for _, v6 := range []bool{false, true} {
			name := m.String()
			if v6 {
				name += "/ipv6"
			}
			t.Run(name, func(t *testing.T) {
				// 37 QPs and a frame count that is not whole rounds.
				frames, _ := generate(t, Workload{Mix: m, QPs: 37, IPv6: v6, Frames: 37*20 + 5, Seed: 3})
				checkSizes(t, m, v6, frames)
				checkPSNs(t, m, frames)
				checkQPs(t, 37, frames)
			})
		}
	}
}

// checkSizes checks each mix's opcodes, payloads and frame sizes.
func checkSizes(t *testing.T, m Mix, v6 bool, frames []genFrame) {
	t.Helper()
	extra := 0
	if v6 {
		extra = roce.IPv6HeaderLen - roce.IPv4MinHeaderLen
	}
	ops := map[roce.Opcode]int{}
	for i := range frames {
		f := &frames[i]
		op, n := f.r.Opcode, int(f.r.PayloadLen)
		ops[op]++
		if m == MixControl {
			if len(f.b) < 60+extra || len(f.b) > 122+extra {
				t.Fatalf("control frame %d (%v): %d bytes", i, op, len(f.b))
			}
			switch op {
			case roce.OpAck, roce.OpCNP:
			case roce.OpSendOnly:
				if n < 32 || n > 64 {
					t.Fatalf("SEND Only payload %d", n)
				}
			case roce.OpReadRequest:
				if l := f.ext().DMALength; n != 0 || l < 64 || l > 4096 {
					t.Fatalf("READ Request payload %d length %d", n, l)
				}
			default:
				t.Fatalf("control frame %d: opcode %v", i, op)
			}
			continue
		}
		mtu := m.MTU()
		switch op {
		case roce.OpAck:
			if len(f.b) != 62+extra {
				t.Fatalf("ACK %d bytes", len(f.b))
			}
		case roce.OpWriteFirst, roce.OpWriteMiddle, roce.OpSendFirst, roce.OpSendMiddle:
			if n != mtu {
				t.Fatalf("frame %d (%v): payload %d, want %d", i, op, n, mtu)
			}
			if max := 58 + 16 + mtu + extra; len(f.b) > max || len(f.b) < max-16 {
				t.Fatalf("frame %d (%v): %d bytes", i, op, len(f.b))
			}
		case roce.OpWriteLast, roce.OpSendLast:
			if n < 1 || n > mtu || !f.r.AckReq {
				t.Fatalf("frame %d (%v): payload %d AckReq %v", i, op, n, f.r.AckReq)
			}
		default:
			t.Fatalf("%s frame %d: opcode %v", m, i, op)
		}
	}
	if m == MixControl {
		// 745 frames of a 10-frame cycle: each kind within a few of its share.
		for op, want := range map[roce.Opcode]float64{roce.OpAck: .4, roce.OpSendOnly: .3, roce.OpReadRequest: .2, roce.OpCNP: .1} {
			if got := float64(ops[op]) / float64(len(frames)); got < want-.03 || got > want+.03 {
				t.Errorf("%v share %.3f, want %.1f", op, got, want)
			}
		}
	} else if ops[roce.OpAck] == 0 || ops[roce.OpAck] > len(frames)/10 {
		t.Errorf("%d ACKs in %d frames, want about 1 in 16", ops[roce.OpAck], len(frames))
	}
}

type qpKey struct {
	src, dst netip.Addr
	qp       uint32
}

// checkPSNs follows each QP's requests and ACKs through the capture.
func checkPSNs(t *testing.T, m Mix, frames []genFrame) {
	t.Helper()
	type state struct {
		next    uint32 // the PSN the next request must carry
		known   bool
		lastAck uint32
		acked   bool
		msgLeft uint32 // MTU mixes: bytes of the current WRITE still due
		inMsg   bool
	}
	qps := map[int]*state{}
	starts := map[uint32]bool{}
	for i := range frames {
		f := &frames[i]
		s := qps[f.qp]
		if s == nil {
			s = &state{}
			qps[f.qp] = s
		}
		r := &f.r
		switch {
		case r.CNP:
		case r.Opcode == roce.OpAck:
			if s.known && r.PSN != (s.next-1)&0xffffff {
				t.Fatalf("frame %d: ACK PSN %d, last request PSN %d", i, r.PSN, (s.next-1)&0xffffff)
			}
			if s.acked && ((r.PSN-s.lastAck)&0xffffff == 0 || (r.PSN-s.lastAck)&0xffffff >= 1<<23) {
				t.Fatalf("frame %d: ACK PSN %d not after %d", i, r.PSN, s.lastAck)
			}
			if !r.AETH.IsACK() {
				t.Fatalf("frame %d: syndrome %#x", i, r.AETH)
			}
			s.lastAck, s.acked = r.PSN, true
		default:
			if s.known && r.PSN != s.next {
				t.Fatalf("frame %d (%v): PSN %d, want %d", i, r.Opcode, r.PSN, s.next)
			}
			if !s.known {
				starts[r.PSN] = true
			}
			s.next, s.known = (r.PSN+1)&0xffffff, true
			if r.Opcode == roce.OpReadRequest {
				s.next = (r.PSN + (f.ext().DMALength+1023)/1024) & 0xffffff
			}
			// Messages: First, any Middles, Last; a WRITE's bytes add up
			// to the RETH's length.
			switch r.Opcode {
			case roce.OpWriteFirst, roce.OpSendFirst:
				if s.inMsg {
					t.Fatalf("frame %d: First inside a message", i)
				}
				s.inMsg, s.msgLeft = true, 0
				if r.Opcode == roce.OpWriteFirst {
					s.msgLeft = f.ext().DMALength
				}
				s.msgLeft -= uint32(r.PayloadLen)
			case roce.OpWriteMiddle, roce.OpSendMiddle, roce.OpWriteLast, roce.OpSendLast:
				if !s.inMsg {
					t.Fatalf("frame %d: %v outside a message", i, r.Opcode)
				}
				s.msgLeft -= uint32(r.PayloadLen)
				if r.Opcode == roce.OpWriteLast && s.msgLeft != 0 {
					t.Fatalf("frame %d: WRITE ends %d bytes off its DMA length", i, int32(s.msgLeft))
				}
				s.inMsg = r.Opcode == roce.OpWriteMiddle || r.Opcode == roce.OpSendMiddle
			}
		}
	}
	// Each QP starts from its own random PSN.
	if len(starts) < len(qps)*3/4 {
		t.Errorf("%d distinct start PSNs for %d QPs", len(starts), len(qps))
	}
}

// checkQPs checks that the capture holds qps QPs, each one flow, and that
// their frames are interleaved.
func checkQPs(t *testing.T, qps int, frames []genFrame) {
	t.Helper()
	requests := map[qpKey]int{}     // requester -> responder QP: generator's QP
	requesterQP := map[int]uint32{} // the requester's QP number, from ACKs and CNPs
	sports := map[int]uint16{}
	for i := range frames {
		f := &frames[i]
		if f.reverse() {
			if q, ok := requesterQP[f.qp]; ok && q != f.r.DestQP {
				t.Fatalf("QP %d: ACK/CNP to QP %d and %d", f.qp, q, f.r.DestQP)
			}
			requesterQP[f.qp] = f.r.DestQP
			if f.r.Opcode != roce.OpAck {
				continue
			}
		} else {
			k := qpKey{f.src(), f.dst(), f.r.DestQP}
			if q, ok := requests[k]; ok && q != f.qp {
				t.Fatalf("frame %d: flow %v belongs to QPs %d and %d", i, k, q, f.qp)
			}
			requests[k] = f.qp
		}
		// Both directions of a QP use the same source port.
		if p, ok := sports[f.qp]; ok && p != f.sport() {
			t.Fatalf("QP %d: source ports %d and %d", f.qp, p, f.sport())
		}
		sports[f.qp] = f.sport()
	}
	if len(requests) != qps {
		t.Errorf("%d distinct (src, dst, QP) request flows, want %d", len(requests), qps)
	}
	// The port follows from the QP numbers as Linux derives it.
	for k, q := range requests {
		if lq, ok := requesterQP[q]; ok {
			if want := udpSourcePort(flowLabel(lq, k.qp)); sports[q] != want {
				t.Errorf("QP %d: source port %#x, want %#x", q, sports[q], want)
			}
		}
	}
	// Interleaving: successive frames never share a QP, and the QPs come
	// in one fixed shuffled order, every QP once per round.
	sorted := true
	for i := range frames {
		if i > 0 && frames[i].qp == frames[i-1].qp && qps > 1 {
			t.Fatalf("frames %d and %d share QP %d", i-1, i, frames[i].qp)
		}
		if i >= qps && frames[i].qp != frames[i-qps].qp {
			t.Fatalf("frame %d: QP %d, a round earlier QP %d", i, frames[i].qp, frames[i-qps].qp)
		}
		if i > 0 && i < qps && frames[i].qp < frames[i-1].qp {
			sorted = false
		}
	}
	if len(frames) >= qps && qps >= 8 && sorted {
		t.Errorf("QPs in setup order: not shuffled")
	}
}

// The same arguments give the same bytes; another seed gives others.
func TestWorkloadDeterministic(t *testing.T) {
	sum := func(w Workload) [32]byte {
		var b bytes.Buffer
		if _, err := w.Write(&b); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(b.Bytes())
	}
	for _, m := range allMixes {
		w := Workload{Mix: m, QPs: 100, Seed: 42}
		a, b := sum(w), sum(w)
		if a != b {
			t.Errorf("%v: two runs differ", m)
		}
		w.Seed = 43
		if sum(w) == a {
			t.Errorf("%v: seeds 42 and 43 give the same capture", m)
		}
	}
}

// The pcap holds exactly the frames Generate gives, and the flow list is
// every distinct 5-tuple of them.
func TestWorkloadPcapAndFlows(t *testing.T) {
	for _, w := range []Workload{
		{Mix: MixControl, QPs: 300, Seed: 9},
		{Mix: MixMTU1024, QPs: 20, IPv6: true, Seed: 9},
	} {
		frames, s := generate(t, w)
		path := t.TempDir() + "/w.pcap"
		s2, err := w.WriteFile(path)
		if err != nil {
			t.Fatal(err)
		}
		read, err := pcapio.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(read) != len(frames) || s2.Frames != s.Frames || s2.Bytes != s.Bytes {
			t.Fatalf("pcap has %d frames, generated %d", len(read), len(frames))
		}
		want := map[FiveTuple]bool{}
		for i := range frames {
			if !bytes.Equal(read[i], frames[i].b) {
				t.Fatalf("frame %d differs in the pcap", i)
			}
			f := &frames[i]
			want[FiveTuple{f.src(), f.dst(), f.sport(), f.dport(), roce.ProtoUDP}] = true
		}
		if len(s.Flows) != len(want) {
			t.Errorf("%d flows listed, %d in the frames", len(s.Flows), len(want))
		}
		for i, ft := range s.Flows {
			if !want[ft] {
				t.Errorf("flow %v not in the frames", ft)
			}
			if i > 0 && compareTuples(s.Flows[i-1], ft) >= 0 {
				t.Errorf("flows not sorted and distinct at %d: %v, %v", i, s.Flows[i-1], ft)
			}
		}
		if got := FlowsOf(read); !slices.Equal(got, s.Flows) {
			t.Errorf("FlowsOf the pcap: %d flows, summary %d", len(got), len(s.Flows))
		}
		if !slices.Equal(s2.Flows, s.Flows) {
			t.Errorf("WriteFile and Generate list different flows")
		}
		// Requests, ACKs (same port, reversed) and CNPs (port 0) are all
		// their own 5-tuples.
		var cnps, reverse int
		for _, ft := range s.Flows {
			if ft.SrcPort == 0 {
				cnps++
			} else if want[FiveTuple{ft.Dst, ft.Src, ft.SrcPort, ft.DstPort, ft.Proto}] {
				reverse++
			}
		}
		if reverse == 0 || (w.Mix == MixControl && cnps == 0) {
			t.Errorf("%v: %d reversed and %d CNP flows", w.Mix, reverse, cnps)
		}
	}
}

func TestWriteFlows(t *testing.T) {
	var b strings.Builder
	flows := []FiveTuple{
		{netip.MustParseAddr("10.0.1.2"), netip.MustParseAddr("10.0.3.4"), 49231, 4791, 17},
		{netip.MustParseAddr("fd00::1:2"), netip.MustParseAddr("fd00::2:5"), 0, 4791, 17},
	}
	if err := WriteFlows(&b, flows); err != nil {
		t.Fatal(err)
	}
	if want := "10.0.1.2 10.0.3.4 49231 4791 17\nfd00::1:2 fd00::2:5 0 4791 17\n"; b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}

// The demo capture's flows: its RoCE frames' 5-tuples, not the ARP.
func TestDemoFlows(t *testing.T) {
	var lines []string
	for _, f := range FlowsOf(Frames()) {
		lines = append(lines, f.String())
	}
	want := []string{
		"192.168.1.10 192.168.1.11 49152 4791 17",
		"192.168.1.11 192.168.1.10 0 4791 17",
		"192.168.1.11 192.168.1.10 49153 4791 17",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("demo flows:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// A big workload: 8192 QPs over 256 hosts.
func TestWorkload8192QPs(t *testing.T) {
	w := Workload{Mix: MixControl, QPs: 8192, Seed: 1}
	frames, s := generate(t, w)
	if len(frames) != 32768 {
		t.Fatalf("%d frames, want 32768", len(frames))
	}
	checkQPs(t, 8192, frames)
	checkPSNs(t, MixControl, frames)
	hosts := map[netip.Addr]bool{}
	for i := range frames {
		hosts[frames[i].src()] = true
	}
	if len(hosts) != 256 {
		t.Errorf("%d hosts, want 256", len(hosts))
	}
	// A 5-tuple per QP and direction, fewer only where two QPs of a host
	// pair happen to share a source port (CNP flows are shared too).
	if len(s.Flows) < 2*8192 || len(s.Flows) > 3*8192 {
		t.Errorf("%d flows for 8192 QPs", len(s.Flows))
	}
}

func TestDefaultFrames(t *testing.T) {
	for _, c := range []struct {
		m         Mix
		qps, want int
	}{
		{MixControl, 1, 8},
		{MixControl, 100, 800},
		{MixControl, 4096, 32768},
		{MixControl, 5000, 30000}, // 32768 rounded down to whole rounds
		{MixControl, 40000, 40000},
		{MixControl, MaxQPs, MaxQPs},
		{MixMTU1024, 1, 8},
		{MixMTU4096, 1024, 8192},
		{MixMTU4096, 3000, 6000},
		{MixMTU1024, 8192, 8192},
		{MixMTU1024, 10000, 10000}, // every QP still gets a frame
	} {
		if got := DefaultFrames(c.m, c.qps); got != c.want {
			t.Errorf("DefaultFrames(%v, %d) = %d, want %d", c.m, c.qps, got, c.want)
		}
	}
}

func TestWorkloadValidate(t *testing.T) {
	for _, c := range []struct {
		w    Workload
		want string
	}{
		{Workload{Mix: MixControl, QPs: 1}, ""},
		{Workload{Mix: MixControl, QPs: MaxQPs, Frames: MaxFrames}, ""},
		{Workload{Mix: 0, QPs: 1}, "mix"},
		{Workload{Mix: MixControl, QPs: 0}, "qps 0"},
		{Workload{Mix: MixControl, QPs: MaxQPs + 1}, "qps 1048577"},
		{Workload{Mix: MixControl, QPs: 8, Frames: 7}, "every QP needs a frame"},
		{Workload{Mix: MixControl, QPs: 8, Frames: MaxFrames + 1}, "frames 1048577"},
		{Workload{Mix: MixControl, QPs: 8, Frames: -1}, "frames -1"},
	} {
		err := c.w.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.w, err, c.want)
		}
		if err != nil {
			if _, gerr := c.w.Generate(func([]byte) error { return nil }); gerr == nil {
				t.Errorf("%+v: Generate accepted it", c.w)
			}
		}
	}
}

func TestParseMix(t *testing.T) {
	for _, m := range allMixes {
		if got, err := ParseMix(m.String()); err != nil || got != m {
			t.Errorf("ParseMix(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseMix("demo"); err == nil {
		t.Error("demo is not a workload mix")
	}
}

// The source port of a QP is Linux's, and the same from either end.
func TestUDPSourcePort(t *testing.T) {
	for _, c := range []struct {
		l, r, label uint32
		port        uint16
	}{
		{0x11, 0x12, 0x132, 0xc132},              // product 0x132, nothing to fold
		{0x100000, 0x5, 0x5, 0xc005},             // 0x500000: bit 20 up folds onto 0x5
		{0x1, 0xfc123, 0xfc123, 0xc000 | 0x011c}, // top 6 label bits 0x3f XOR 0x0123
	} {
		if fl := flowLabel(c.l, c.r); fl != c.label || flowLabel(c.r, c.l) != fl || udpSourcePort(fl) != c.port {
			t.Errorf("%#x/%#x: label %#x port %#x, want %#x %#x", c.l, c.r, fl, udpSourcePort(fl), c.label, c.port)
		}
	}
}
