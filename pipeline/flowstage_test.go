package pipeline

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"
	"time"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/internal/testenv"
	"roce-fwd/ports"
	"roce-fwd/qos"
	"roce-fwd/roce"
)

// mustTable compiles rules given in testpmd's flow grammar.
func mustTable(t testing.TB, lines ...string) *flowrule.Table {
	t.Helper()
	var rules []flowrule.Rule
	for _, l := range lines {
		c, err := flowrule.Parse(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		rules = append(rules, c.Rule)
	}
	tab, err := flowrule.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// flowFrame is an RC RDMA WRITE Only from UDP source port src, DSCP 26
// with ECT(0), of payload bytes, its ICRC valid.
func flowFrame(t testing.TB, src uint16, payload int) []byte {
	t.Helper()
	s := roce.FrameSpec{Src: roce.MAC{2, 0, 0, 0, 0, 0xa}, Dst: roce.MAC{2, 0, 0, 0, 0, 0xb}, SrcPort: src,
		DSCP: 26, ECN: roce.ECNECT0,
		BTH:     roce.BTHFields{Opcode: roce.OpRC | roce.OpWriteOnly, DestQP: 0x100, PKey: 0xffff},
		Ext:     roce.ExtFields{VA: 0x1000, RKey: 7, DMALength: uint32(payload)},
		Payload: make([]byte, payload)}
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// udpSrc is a frame's UDP source port, or -1 when it has no UDP header.
func udpSrc(f []byte) int {
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	if r.L4 == 0 {
		return -1
	}
	return int(binary.BigEndian.Uint16(f[r.L4:]))
}

func setFlows(t testing.TB, p *Pipeline, port uint16, dir FlowDir, tab *flowrule.Table, carry []int) {
	t.Helper()
	if err := p.SetFlows(port, dir, tab, carry); err != nil {
		t.Fatal(err)
	}
}

// forwardPcapFlows is forwardPcap with flow tables installed by setup
// before the pipeline starts; setup gets the rx and the tx port.
func forwardPcapFlows(t *testing.T, mode string, frames [][]byte, setup func(p *Pipeline, in, out uint16), tune ...func(*Spec)) *pcapRun {
	t.Helper()
	dir := t.TempDir()
	r := &pcapRun{in: filepath.Join(dir, "in.pcap"), out: filepath.Join(dir, "out.pcap"), back: filepath.Join(dir, "back.pcap"),
		setup: func(p *Pipeline, set *ports.Set) { setup(p, uint16(set.Ports[0].ID), uint16(set.Ports[1].ID)) }}
	return r.run(t, mode, frames, tune, "net_pcap%d,rx_pcap="+r.in+",tx_pcap="+r.back, "net_pcap%d,tx_pcap="+r.out)
}

// A drop rule, on the rx port's ingress or the tx port's egress, drops
// exactly the frames it matches, in every mode, under flow_drop; the
// rest comes out in order, and the rule counts the packets and bytes it
// matched.
func TestFlowDropRule(t *testing.T) {
	var frames [][]byte
	for i, f := range testenv.Frames(300) {
		frames = append(frames, f)
		if i%3 == 0 {
			frames = append(frames, flowFrame(t, 5555, i%200))
		}
	}
	var match, matchBytes uint64
	var kept [][]byte
	for _, f := range frames {
		if udpSrc(f) == 5555 {
			match++
			matchBytes += uint64(len(f))
		} else {
			kept = append(kept, f)
		}
	}
	if match != 100 {
		t.Fatalf("%d frames from UDP port 5555 in the input, want 100", match)
	}
	const rule = "flow create 0 ingress pattern eth / ipv4 / udp src is 5555 / end actions count / drop / end"
	for _, mode := range []string{"io", "mac", "roce"} {
		for _, dir := range []FlowDir{FlowIngress, FlowEgress} {
			t.Run(mode+"/"+dir.String(), func(t *testing.T) {
				var port uint16
				run := forwardPcapFlows(t, mode, frames, func(p *Pipeline, in, out uint16) {
					port = in
					if dir == FlowEgress {
						port = out
					}
					setFlows(t, p, port, dir, mustTable(t, rule), nil)
				})
				if d := run.p.Drops(); d["flow_drop"] != match || d["flow_meter"] != 0 || d["tx_full"] != 0 {
					t.Errorf("drops %v, want %d flow_drop", d, match)
				}
				fc := run.p.FlowCounters(port, dir)
				if fc.Table == nil || len(fc.Rules) != 1 || fc.Rules[0].Packets != match || fc.Rules[0].Bytes != matchBytes {
					t.Errorf("flow counters %+v, want %d packets and %d bytes", fc, match, matchBytes)
				}
				if other := run.p.FlowCounters(port, 1-dir); other.Table != nil || other.Rules != nil {
					t.Errorf("the other direction has a table: %+v", other)
				}
				got := run.finish(t)
				if len(got) != len(kept) {
					t.Fatalf("%d frames out, want %d", len(got), len(kept))
				}
				from := 0
				if mode == "mac" {
					from = 12
				}
				for i := range kept {
					if !bytes.Equal(got[i][from:], kept[i][from:]) {
						t.Fatalf("frame %d out differs from the %dth kept frame", i, i)
					}
				}
			})
		}
	}
}

// set_ipv4_dscp rewrites the DSCP of the frames it matches, keeps their
// ECN, leaves a valid IPv4 checksum and RoCE ICRC. With QoS on, an ingress
// rewrite queues the packet in the TC of its new DSCP; an egress one, like
// a NIC's, comes after scheduling and leaves it in the old TC.
func TestFlowSetDSCP(t *testing.T) {
	const n = 200
	var frames [][]byte
	for i := range n {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 256))
		frames = append(frames, testenv.QoSFrame(t, testenv.QPLossy, uint32(i), 128))
	}
	// Only the ECT flow (QP 0x100): the lossy one must come out untouched.
	const rule = "flow create 0 ingress pattern eth / ipv4 / udp / ib_bth dst_qp is 256 / end actions set_ipv4_dscp dscp_value 46 / end"
	cases := []struct {
		name string
		mode string
		dir  FlowDir
		qos  bool
	}{
		{"roce-qos/ingress", "roce", FlowIngress, true},
		{"roce-qos/egress", "roce", FlowEgress, true},
		{"roce/ingress", "roce", FlowIngress, false},
		{"io/egress", "io", FlowEgress, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tune []func(*Spec)
			if c.qos {
				tune = append(tune, withQoS(qos.NVIDIARoCE()))
			}
			var outID uint16
			run := forwardPcapFlows(t, c.mode, frames, func(p *Pipeline, in, out uint16) {
				outID = out
				port := in
				if c.dir == FlowEgress {
					port = out
				}
				setFlows(t, p, port, c.dir, mustTable(t, rule), nil)
			}, tune...)
			if c.qos {
				// The default map: DSCP 26 → TC3, 46 → TC5, 0 → TC0.
				want3, want5 := uint64(0), uint64(n)
				if c.dir == FlowEgress {
					want3, want5 = n, 0
				}
				if tc3, tc5, tc0 := tcEnqueued(run.p, outID, 3), tcEnqueued(run.p, outID, 5), tcEnqueued(run.p, outID, 0); tc3 != want3 || tc5 != want5 || tc0 != n {
					t.Errorf("TC3 took %d, TC5 %d, TC0 %d: want %d, %d, %d", tc3, tc5, tc0, want3, want5, n)
				}
			}
			got := run.finish(t)
			if len(got) != len(frames) {
				t.Fatalf("%d frames out, want %d", len(got), len(frames))
			}
			for i, f := range got {
				var r roce.Result
				roce.Classify(f, nil, true, &r)
				if r.ICRC != roce.ICRCOK || r.L3 == 0 {
					t.Fatalf("frame %d out: ICRC %v", i, r.ICRC)
				}
				ip := roce.IPv4(f[r.L3:])
				if !ip.ChecksumValid() {
					t.Fatalf("frame %d out: bad IPv4 header checksum", i)
				}
				// Frames are told apart by QP and PSN, not by their order.
				in := frames[2*int(r.PSN)]
				if r.DestQP == testenv.QPLossy {
					in = frames[2*int(r.PSN)+1]
					if !bytes.Equal(f, in) {
						t.Fatalf("frame %d (not matched) changed", i)
					}
					continue
				}
				if len(f) != len(in) {
					t.Fatalf("frame %d: %d bytes, sent %d", i, len(f), len(in))
				}
				if ip.DSCP() != 46 || ip.ECN() != roce.ECNECT0 {
					t.Fatalf("frame %d out: DSCP %d ECN %d, want 46 with ECT(0) kept", i, ip.DSCP(), ip.ECN())
				}
				for j := range f {
					if l3 := int(r.L3); f[j] != in[j] && j != l3+1 && j != l3+10 && j != l3+11 {
						t.Fatalf("frame %d: byte %d changed besides TOS and checksum", i, j)
					}
				}
			}
		})
	}
}

// primeFrames puts frames in flight through a ring port that forwards to
// itself, as primeRing does with the demo mix.
func primeFrames(t *testing.T, w *Worker, pool *dpdk.Mempool, frames [][]byte) {
	t.Helper()
	for _, f := range frames {
		m := pool.Alloc()
		if m == nil {
			t.Fatal("mbuf pool empty")
		}
		if err := m.SetData(f); err != nil {
			t.Fatal(err)
		}
		w.step.Txq[0].Push(m)
	}
}

// Mark and flag actions, ingress and egress, leave the mark in the mbuf
// where a PMD puts it; a rule with a queue action counts as not
// applicable in software.
func TestFlowMarkAndFlag(t *testing.T) {
	srcs := []uint16{5556, 5557, 5558, 4000}
	for _, mode := range []string{"io", "mac", "roce"} {
		t.Run(mode, func(t *testing.T) {
			cfg, set := openPorts(t, mode, "net_ring%d")
			p := newPipeline(t, cfg, set)
			id := uint16(set.Ports[0].ID)
			w := p.Workers[0]
			setFlows(t, p, id, FlowIngress, mustTable(t,
				"flow create 0 ingress pattern eth / ipv4 / udp src is 5556 / end actions mark id 7 / end"), nil)
			setFlows(t, p, id, FlowEgress, mustTable(t,
				"flow create 0 egress pattern eth / ipv4 / udp src is 5557 / end actions flag / end",
				"flow create 0 egress pattern eth / ipv4 / udp src is 5558 / end actions queue index 1 / mark id 9 / end"), nil)
			var frames [][]byte
			for i := range 32 {
				frames = append(frames, flowFrame(t, srcs[i%4], 64))
			}
			primeFrames(t, w, set.Ports[0].Pool, frames)
			if n := w.Poll(); n != 32 { // sends the fresh mbufs, handles them as they come back
				t.Fatalf("polled %d packets, want 32", n)
			}
			if n := w.step.Run(); n != 32 { // and once more round the ring, to look at them
				t.Fatalf("received %d packets, want 32", n)
			}
			for i, m := range w.step.Rx(0) {
				mark, marked := m.Mark()
				src := udpSrc(m.Data())
				switch {
				case src == 5556 && (!marked || mark != 7):
					t.Errorf("packet %d from %d: mark %d %v, want 7 (ingress)", i, src, mark, marked)
				case src == 5557 && (marked || !m.Flagged()):
					t.Errorf("packet %d from %d: mark %v flagged %v, want a flag (egress)", i, src, marked, m.Flagged())
				case src == 5558 && (!marked || mark != 9):
					t.Errorf("packet %d from %d: mark %d %v, want 9 (egress)", i, src, mark, marked)
				case src == 4000 && m.Flagged():
					t.Errorf("packet %d from %d matched nothing but is flagged", i, src)
				}
				w.step.Drop(m)
			}
			eg := p.FlowCounters(id, FlowEgress)
			if eg.NotApplicable != 8 || eg.Rules[0].Packets != 8 || eg.Rules[1].Packets != 8 {
				t.Errorf("egress counters %+v, want 8 hits each and 8 not applicable", eg)
			}
			if in := p.FlowCounters(id, FlowIngress); in.NotApplicable != 0 || in.Rules[0].Packets != 8 {
				t.Errorf("ingress counters %+v, want 8 hits", in)
			}
			closeRing(t, p, set)
		})
	}
}

// Meters hold their rate: 10000 packets offered over one simulated
// second at twice the CIR, red dropped. What passes is what the buckets
// allowed: rate × time + burst, within 2%.
func TestFlowMeterRate(t *testing.T) {
	const (
		packets = 10000
		size    = 998           // bytes per frame
		gap     = int64(99_800) // ns between packets: 10 MB/s, twice the CIR
		t0      = int64(1e12)   // start of the simulated interval
		// Rates in bytes/s and bursts in bytes, as in the rules below.
		// Every bucket holds more than a poll's worth of tokens.
		cir, pir      = 5_000_000, 7_500_000
		cbs, ebs, pbs = 20_000, 10_000, 30_000
	)
	frame := flowFrame(t, 4000, 924) // with 74 bytes of headers and ICRC
	if len(frame) != size {
		t.Fatalf("frame of %d bytes, want %d", len(frame), size)
	}
	frames := make([][]byte, packets)
	for i := range frames {
		frames[i] = frame
	}
	cases := []struct {
		name, rule            string
		passRate, passBurst   float64 // green + yellow
		greenRate, greenBurst float64
	}{
		{"srtcm", "flow create 0 ingress pattern eth / ipv4 / udp / end actions meter srtcm cir 5000000 cbs 20000 ebs 10000 red drop / end",
			cir, cbs + ebs, cir, cbs},
		{"trtcm", "flow create 0 ingress pattern eth / ipv4 / udp / end actions meter trtcm cir 5000000 pir 7500000 cbs 20000 pbs 30000 red drop / end",
			pir, pbs, cir, cbs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "in.pcap")
			testenv.WritePcap(t, in, frames)
			cfg, set := openPorts(t, "roce", "net_pcap%d,rx_pcap="+in+",tx_pcap="+filepath.Join(dir, "back.pcap"), "net_null%d,no-rx=1")
			p := newPipeline(t, cfg, set)
			id := uint16(set.Ports[0].ID)
			setFlows(t, p, id, FlowIngress, mustTable(t, c.rule), nil)
			w := p.Workers[0]
			handled, idle := 0, 0
			var last int64
			for handled < packets {
				// The worker's clock stops at the time of the poll's first
				// packet: each poll's packets arrive together.
				last = t0 + int64(handled)*gap
				w.clock = tscClock{baseNS: last}
				n := w.Poll()
				handled += n
				if n == 0 {
					if idle++; idle > 1000 {
						t.Fatalf("the pcap port gave %d packets, want %d", handled, packets)
					}
				}
			}
			w.step.Flush()
			checkAccounting(t, p)
			seconds := float64(last-t0) / 1e9
			fc := p.FlowCounters(id, FlowIngress).Rules[0]
			drops := p.Drops()
			sent := w.TxQueues()[0].Sent
			if fc.Packets != packets || fc.Green+fc.Yellow+fc.Red != packets || drops["flow_meter"] != fc.Red || sent != fc.Green+fc.Yellow {
				t.Errorf("counters %+v, flow_meter drops %d, sent %d", fc, drops["flow_meter"], sent)
			}
			if fc.Red == 0 {
				t.Error("nothing was red at twice the CIR")
			}
			closeTo(t, "green+yellow bytes", float64((fc.Green+fc.Yellow)*size), c.passRate*seconds+c.passBurst, 0.02)
			closeTo(t, "green bytes", float64(fc.Green*size), c.greenRate*seconds+c.greenBurst, 0.02)
			p.Free()
			if err := set.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func closeTo(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.0f, want %.0f within %.0f%%", what, got, want, 100*tol)
	} else {
		t.Logf("%s: %.0f vs %.0f (%+.3f%%)", what, got, want, 100*(got-want)/want)
	}
}

// Replacing a table keeps the counters of the rules that survive, under
// their new index; removing it stops matching.
func TestSetFlowsCarriesCounters(t *testing.T) {
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set)
	id := uint16(set.Ports[0].ID)
	w := p.Workers[0]
	const (
		ruleX = "flow create 0 ingress pattern eth / ipv4 / udp src is 5555 / end actions count / end"
		ruleY = "flow create 0 ingress pattern eth / ipv4 / udp src is 4000 / end actions count / end"
		ruleZ = "flow create 0 ingress pattern eth / ipv4 / udp src is 4000 / end actions count / drop / end"
	)
	x, y := flowFrame(t, 5555, 100), flowFrame(t, 4000, 200)
	t1 := mustTable(t, ruleX, ruleY)
	setFlows(t, p, id, FlowIngress, t1, nil)
	var frames [][]byte
	for range 16 {
		frames = append(frames, x, y)
	}
	primeFrames(t, w, set.Ports[0].Pool, frames)
	for range 10 {
		w.Poll()
	}
	c1 := p.FlowCounters(id, FlowIngress)
	if c1.Table != t1 || c1.Rules[0] != (flowrule.Counter{Packets: 160, Bytes: 160 * uint64(len(x))}) || c1.Rules[1].Packets != 160 {
		t.Fatalf("first table's counters %+v", c1)
	}

	// Y goes, Z comes first, X moves to index 1.
	t2 := mustTable(t, ruleZ, ruleX)
	setFlows(t, p, id, FlowIngress, t2, []int{-1, 0})
	c2 := p.FlowCounters(id, FlowIngress)
	if c2.Table != t2 || c2.Rules[1] != c1.Rules[0] || c2.Rules[0] != (flowrule.Counter{}) {
		t.Fatalf("after the replacement %+v, want X's %+v at index 1", c2, c1.Rules[0])
	}
	for range 6 {
		w.Poll()
	}
	c3 := p.FlowCounters(id, FlowIngress)
	if c3.Rules[1].Packets != 160+6*16 || c3.Rules[0].Packets != 16 || p.Drops()["flow_drop"] != 16 {
		t.Errorf("after 6 polls: %+v, flow_drop %d; want X at %d and Z's 16 drops", c3, p.Drops()["flow_drop"], 160+6*16)
	}

	setFlows(t, p, id, FlowIngress, nil, nil)
	if c := p.FlowCounters(id, FlowIngress); c.Table != nil || c.Rules != nil {
		t.Errorf("after removal: %+v", c)
	}
	primeFrames(t, w, set.Ports[0].Pool, frames[:16])
	before := w.Stats().Packets
	for range 5 {
		w.Poll()
	}
	if got := w.Stats().Packets - before; got != 5*32 || p.Drops()["flow_drop"] != 16 {
		t.Errorf("after removal: %d packets in 5 polls, flow_drop %d; want 160 and still 16", got, p.Drops()["flow_drop"])
	}
	closeRing(t, p, set)
}

// Under a running worker: a table takes effect between two polls, a
// replacement keeps the counters, a drop table empties the ring.
func TestSetFlowsWhileForwarding(t *testing.T) {
	cfg, set := openPorts(t, "roce", "net_ring%d")
	p := newPipeline(t, cfg, set)
	id := uint16(set.Ports[0].ID)
	var frames [][]byte
	for range 32 {
		frames = append(frames, flowFrame(t, 5555, 100))
	}
	primeFrames(t, p.Workers[0], set.Ports[0].Pool, frames)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	const ruleX = "flow create 0 ingress pattern eth / ipv4 / udp src is 5555 / end actions count / end"
	setFlows(t, p, id, FlowIngress, mustTable(t, ruleX), nil)
	waitFor(t, "the rule to count 20000 packets", func() bool { return p.FlowCounters(id, FlowIngress).Rules[0].Packets >= 20000 })
	before := p.FlowCounters(id, FlowIngress).Rules[0]
	setFlows(t, p, id, FlowIngress, mustTable(t,
		"flow create 0 ingress pattern eth / ipv4 / udp src is 1 / end actions count / end", ruleX), []int{-1, 0})
	after := p.FlowCounters(id, FlowIngress).Rules[1]
	if after.Packets < before.Packets || after.Bytes < before.Bytes {
		t.Errorf("rule X counted %+v before the replacement, %+v after", before, after)
	}
	setFlows(t, p, id, FlowIngress, mustTable(t,
		"flow create 0 ingress pattern eth / ipv4 / udp src is 5555 / end actions drop / end"), nil)
	waitFor(t, "the ring to be emptied", func() bool { return p.Drops()["flow_drop"] == 32 })
	p.Stop()
	// Every packet went round the ring until the drop rule took it: the
	// 32 primed ones were sent once before they were first received, and
	// not sent after they were last received.
	if s, sent := p.Workers[0].Stats(), p.Workers[0].TxQueues()[0].Sent; sent != s.Packets || s.Drops[DropFlowRule] != 32 {
		t.Errorf("received %d, sent %d, dropped %d", s.Packets, sent, s.Drops[DropFlowRule])
	}
	closeRing(t, p, set)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The flow stage allocates nothing per poll, with ingress and egress
// tables holding drop, mark, DSCP and meter rules, in every mode.
func TestFlowPollDoesNotAllocate(t *testing.T) {
	cases := []struct {
		name, mode string
		tune       []func(*Spec)
	}{
		{"io", "io", nil},
		{"mac", "mac", nil},
		{"roce", "roce", nil},
		{"roce-qos", "roce", []func(*Spec){withQoS(qos.NVIDIARoCE())}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, set := openPorts(t, c.mode, "net_ring%d")
			p := newPipeline(t, cfg, set, c.tune...)
			id := uint16(set.Ports[0].ID)
			w := p.Workers[0]
			setFlows(t, p, id, FlowIngress, mustTable(t,
				"flow create 0 ingress pattern eth / ipv4 / udp src is 5555 / end actions count / drop / end",
				"flow create 0 ingress pattern eth / ipv4 / udp src is 5556 / end actions mark id 7 / set_ipv4_dscp dscp_value 46 / end",
				"flow create 0 ingress pattern eth / ipv4 / udp src is 5557 / end actions meter srtcm cir 100000 cbs 3000 ebs 0 red drop / flag / end"), nil)
			setFlows(t, p, id, FlowEgress, mustTable(t,
				"flow create 0 egress pattern eth / ipv4 / udp / end actions count / set_ipv4_dscp dscp_value 26 / jump group 1 / end",
				"flow create 0 egress group 1 pattern eth / ipv4 / udp src is 5556 / end actions queue index 1 / end"), nil)
			srcs := []uint16{5555, 5556, 5557, 4000}
			var frames [][]byte
			for i := range 32 {
				frames = append(frames, flowFrame(t, srcs[i%4], 64))
			}
			pool := set.Ports[0].Pool
			primeFrames(t, w, pool, frames)
			// Keep 32 in flight: what the drop rule and the meter took is
			// replaced by frames they will take again.
			refill := [][]byte{frames[0], frames[2]}
			k := 0
			allocs := testing.AllocsPerRun(2000, func() {
				w.Poll()
				w.serveMailbox()
				for q := &w.step.Txq[0]; q.Room() > 0; k++ {
					m := pool.Alloc()
					if m == nil || m.SetData(refill[k%2]) != nil {
						panic("no mbuf")
					}
					q.Push(m)
				}
			})
			if allocs != 0 {
				t.Errorf("%v allocations per poll", allocs)
			}
			d := p.Drops()
			in, eg := p.FlowCounters(id, FlowIngress), p.FlowCounters(id, FlowEgress)
			if d["flow_drop"] < 2000*4 || d["flow_meter"] < 2000*4 || in.Rules[1].Packets < 2000*8 || in.Rules[2].Red == 0 ||
				eg.Rules[1].Packets < 2000*8 || eg.NotApplicable != eg.Rules[1].Packets {
				t.Errorf("drops %v, ingress %+v, egress %+v: not every rule ran", d, in, eg)
			}
			closeRing(t, p, set)
		})
	}
}

// A forward that Update moves to a port with an egress table brings the
// table into play from the next poll.
func TestFlowsFollowUpdatedForward(t *testing.T) {
	cfg, set := openPorts(t, "roce", "net_ring%d", "net_ring%d")
	p0, p1 := uint16(set.Ports[0].ID), uint16(set.Ports[1].ID)
	p := newPipeline(t, cfg, set, func(s *Spec) {
		s.Workers[0].Rx = []RxSpec{{Port: p0, To: p0}, {Port: p1, To: p1}}
	})
	w := p.Workers[0]
	if w.step.Txq[0].Port != p0 {
		t.Fatalf("tx queue 0 is on port %d, want %d", w.step.Txq[0].Port, p0)
	}
	setFlows(t, p, p1, FlowEgress, mustTable(t, "flow create 0 egress pattern eth / end actions count / drop / end"), nil)
	var frames [][]byte
	for range 32 {
		frames = append(frames, flowFrame(t, 4000, 64))
	}
	primeFrames(t, w, set.Ports[0].Pool, frames)
	for range 5 {
		w.Poll()
	}
	if d := p.Drops()["flow_drop"]; d != 0 {
		t.Fatalf("%d dropped while port %d forwarded to itself", d, p0)
	}
	tb := p.Tables()
	tb.Forward[p0] = p1
	if err := p.Update(tb); err != nil {
		t.Fatal(err)
	}
	w.Poll()
	if d, c := p.Drops()["flow_drop"], p.FlowCounters(p1, FlowEgress); d != 32 || c.Rules[0].Packets != 32 {
		t.Errorf("after forwarding to port %d: flow_drop %d, rule %+v; want the 32 in flight", p1, d, c.Rules[0])
	}
	closeRing(t, p, set)
}
