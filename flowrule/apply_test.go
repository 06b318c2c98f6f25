package flowrule

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/netip"
	"testing"

	"roce-fwd/roce"
)

// ipv4Checksum computes the header checksum from scratch (RFC 791), with
// the checksum field taken as zero.
func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i < int(h[0]&15)*4; i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestSetIPv4DSCP(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		spec := roce.FrameSpec{
			SrcIP: netip.AddrFrom4([4]byte{byte(rng.Uint32()), byte(rng.Uint32()), 1, 2}),
			DSCP:  uint8(rng.IntN(64)), ECN: uint8(rng.IntN(4)), TTL: uint8(1 + rng.IntN(255)),
			IPID: uint16(rng.Uint32()), BTH: roce.BTHFields{Opcode: 0x04, DestQP: rng.Uint32() & 0xffffff, PKey: 0xffff},
			Payload: make([]byte, 4*rng.IntN(8)),
		}
		if i%5 == 0 {
			spec.IPv4Options = []byte{1, 1, 1, 0} // NOPs and end of options
		}
		f := roceFrame(t, spec)
		dscp := uint8(rng.IntN(64))
		rules := mustParseRules(t, "flow create 0 ingress pattern eth / ipv4 / udp / end actions set_ipv4_dscp dscp_value "+itoa(uint64(dscp))+" / end")
		tab, err := Compile(rules)
		if err != nil {
			t.Fatal(err)
		}
		st := NewState(tab)
		var r roce.Result
		roce.Classify(f, nil, true, &r)
		if r.ICRC != roce.ICRCOK {
			t.Fatalf("test frame has ICRC %v", r.ICRC)
		}
		before := append([]byte(nil), f...)
		v := tab.Apply(tab.Match(f, &r), f, &r, st, 0, len(f))
		if !v.DSCPSet || v.DSCP != dscp || v.Drop {
			t.Fatalf("verdict %+v", v)
		}
		ip := f[r.L3:]
		if got := ip[1]; got != dscp<<2|spec.ECN {
			t.Fatalf("TOS %#x, want DSCP %d with ECN %d kept", got, dscp, spec.ECN)
		}
		if got, want := binary.BigEndian.Uint16(ip[10:]), ipv4Checksum(ip); got != want {
			t.Fatalf("checksum %#04x after rewrite, from scratch %#04x (TOS %#x -> %#x)", got, want, before[r.L3+1], ip[1])
		}
		// Only TOS and checksum changed.
		for j := range f {
			if f[j] != before[j] && j != int(r.L3)+1 && j != int(r.L3)+10 && j != int(r.L3)+11 {
				t.Fatalf("byte %d changed", j)
			}
		}
		if r.DSCP != dscp {
			t.Errorf("Result.DSCP %d, want %d", r.DSCP, dscp)
		}
		// The ICRC masks the TOS byte and the checksum: still valid.
		var again roce.Result
		roce.Classify(f, nil, true, &again)
		if again.ICRC != roce.ICRCOK || again.DSCP != dscp {
			t.Fatalf("after rewrite: ICRC %v, DSCP %d", again.ICRC, again.DSCP)
		}
		crc, ok := roce.ICRC(f, int(r.L3), int(r.L4), int(r.ICRCOff))
		if !ok || crc != binary.LittleEndian.Uint32(f[r.ICRCOff:]) {
			t.Fatalf("roce.ICRC %#x, stored %#x", crc, binary.LittleEndian.Uint32(f[r.ICRCOff:]))
		}
	}
}

func TestSetIPv6DSCP(t *testing.T) {
	for _, ecn := range []uint8{0, 1, 2, 3} {
		f := roceFrame(t, roce.FrameSpec{IPv6: true, DSCP: 10, ECN: ecn, FlowLabel: 0xabcde,
			BTH: roce.BTHFields{Opcode: 0x04, DestQP: 3}})
		tab, err := Compile(mustParseRules(t, "flow create 0 ingress pattern ipv6 / end actions set_ipv6_dscp dscp_value 46 / end"))
		if err != nil {
			t.Fatal(err)
		}
		var r roce.Result
		roce.Classify(f, nil, true, &r)
		v := tab.Apply(tab.Match(f, &r), f, &r, NewState(tab), 0, len(f))
		ip := roce.IPv6(f[r.L3:])
		if !v.DSCPSet || ip.DSCP() != 46 || ip.ECN() != ecn || ip.FlowLabel() != 0xabcde || ip.Version() != 6 {
			t.Fatalf("verdict %+v: DSCP %d ECN %d flow %#x version %d", v, ip.DSCP(), ip.ECN(), ip.FlowLabel(), ip.Version())
		}
		var again roce.Result
		roce.Classify(f, nil, true, &again)
		if again.ICRC != roce.ICRCOK || again.DSCP != 46 {
			t.Fatalf("after rewrite: ICRC %v, DSCP %d", again.ICRC, again.DSCP)
		}
	}
}

func TestVerdicts(t *testing.T) {
	f := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04, DestQP: 5}})
	r := classify(f)
	cases := []struct {
		actions string
		want    Verdict
	}{
		{"queue index 3 / mark id 7 / flag", Verdict{NotInSoftware: 1 << ActQueue, HasMark: true, Mark: 7, Flag: true}},
		{"rss queues 0 1 end / count", Verdict{NotInSoftware: 1 << ActRSS}},
		{"mark id 1 / drop / flag", Verdict{Drop: true, Reason: DropRule, HasMark: true, Mark: 1}},
		{"count", Verdict{}},
	}
	for _, c := range cases {
		tab, err := Compile(mustParseRules(t, "flow create 0 ingress pattern eth / end actions "+c.actions+" / end"))
		if err != nil {
			t.Fatal(err)
		}
		if got := tab.Apply(tab.Match(f, r), f, r, NewState(tab), 0, 100); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.actions, got, c.want)
		}
	}
	tab, _ := Compile(nil)
	if got := tab.Apply(tab.Match(f, r), f, r, NewState(tab), 0, 100); got != (Verdict{}) {
		t.Errorf("no rule: %+v", got)
	}
}

func TestCountersMerge(t *testing.T) {
	tab, err := Compile(mustParseRules(t,
		"flow create 0 ingress pattern ipv4 / end actions count / end",
		"flow create 0 ingress pattern ipv6 / end actions count / end"))
	if err != nil {
		t.Fatal(err)
	}
	f4 := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	f6 := roceFrame(t, roce.FrameSpec{IPv6: true, BTH: roce.BTHFields{Opcode: 0x04}})
	a, b := NewState(tab), NewState(tab)
	for range 3 {
		tab.Apply(tab.Match(f4, classify(f4)), f4, classify(f4), a, 0, len(f4))
	}
	tab.Apply(tab.Match(f6, classify(f6)), f6, classify(f6), a, 0, len(f6))
	for range 2 {
		tab.Apply(tab.Match(f6, classify(f6)), f6, classify(f6), b, 0, len(f6))
	}
	if p, by := a.Counters(0); p != 3 || by != 3*uint64(len(f4)) {
		t.Errorf("lcore a rule 0: %d packets %d bytes", p, by)
	}
	if p, _ := b.Counters(0); p != 0 {
		t.Errorf("lcore b counted %d on rule 0", p)
	}
	m := Merge(a, b)
	if len(m) != 2 || m[0].Packets != 3 || m[1].Packets != 3 || m[1].Bytes != 3*uint64(len(f6)) {
		t.Errorf("merged %+v", m)
	}
	s := AddCounters(a.Snapshot(nil), b.Snapshot(nil))
	if s[0] != m[0] || s[1] != m[1] {
		t.Errorf("snapshots add to %+v, Merge gives %+v", s, m)
	}
}

// meterRun offers packets of size bytes at rate bytes/s for dur ns
// (jittered arrival times) and returns the bytes of each colour.
func meterRun(t *testing.T, rule string, rate float64, size int, dur int64, seed uint64) (bytes [4]float64, tab *Table, st *State) {
	t.Helper()
	tab, err := Compile(mustParseRules(t, rule))
	if err != nil {
		t.Fatal(err)
	}
	st = NewState(tab)
	f := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	r := classify(f)
	idx := tab.Match(f, r)
	if idx != 0 {
		t.Fatalf("frame hit %d", idx)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	gap := float64(size) / rate * 1e9 // mean ns between packets
	now := int64(1_000_000_000)
	start := now
	for now-start < dur {
		v := tab.Apply(idx, f, r, st, now, size)
		bytes[v.Color] += float64(size)
		now += int64(gap * (0.5 + rng.Float64())) // uniform in [0.5, 1.5) x gap
	}
	return bytes, tab, st
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: %.0f, want %.0f within %.1f%%", what, got, want, 100*tol)
	} else {
		t.Logf("%s: %.0f vs %.0f (%.3f%%)", what, got, want, 100*(got-want)/want)
	}
}

func TestSrTCMRate(t *testing.T) {
	const cir = 125_000_000 // 1 Gb/s
	const sec = int64(1e9)
	for _, over := range []float64{1.5, 3} {
		b, _, st := meterRun(t, "flow create 0 ingress pattern eth / end actions meter srtcm cir 125000000 cbs 65536 ebs 32768 / end",
			over*cir, 1024, 2*sec, 7)
		within(t, "srTCM green bytes/s", b[Green]/2, cir, 0.02)
		// Under sustained overload C never fills, so E only gives its
		// initial content: yellow is at most EBS.
		if b[Yellow] > 32768 {
			t.Errorf("yellow %.0f bytes, beyond EBS", b[Yellow])
		}
		c := st.Counter(0)
		if float64(c.Green)*1024 != b[Green] || c.Packets != c.Green+c.Yellow+c.Red {
			t.Errorf("counters %+v disagree with verdicts", c)
		}
	}
	// Below CIR everything is green.
	b, _, _ := meterRun(t, "flow create 0 ingress pattern eth / end actions meter srtcm cir 125000000 cbs 65536 ebs 32768 / end",
		0.5*cir, 1024, sec, 8)
	if b[Yellow]+b[Red] != 0 {
		t.Errorf("at half CIR: %.0f yellow, %.0f red bytes", b[Yellow], b[Red])
	}
}

func TestTrTCMRate(t *testing.T) {
	const cir, pir = 100_000_000, 250_000_000
	const sec = int64(1e9)
	b, _, _ := meterRun(t, "flow create 0 ingress pattern eth / end actions meter trtcm cir 100000000 pir 250000000 cbs 30000 pbs 60000 / end",
		400_000_000, 1500, 2*sec, 9)
	within(t, "trTCM green bytes/s", b[Green]/2, cir, 0.02)
	within(t, "trTCM green+yellow bytes/s", (b[Green]+b[Yellow])/2, pir, 0.02)
	within(t, "trTCM red bytes/s", b[Red]/2, 400_000_000-pir, 0.02)
}

func TestMeterPolicy(t *testing.T) {
	f := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	r := classify(f)
	// CBS one packet, EBS one packet, no refill: green, yellow, then red.
	tab, err := Compile(mustParseRules(t, "flow create 0 ingress pattern eth / end actions mark id 1 / meter srtcm cir 0 cbs 100 ebs 100 green mark 2 yellow pass red drop / flag / end"))
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(tab)
	want := []Verdict{
		{Color: Green, HasMark: true, Mark: 2, Flag: true},
		{Color: Yellow, HasMark: true, Mark: 1, Flag: true},
		{Color: Red, HasMark: true, Mark: 1, Drop: true, Reason: DropMeter},
	}
	for i, w := range want {
		if got := tab.Apply(0, f, r, st, int64(i)*1e9, 100); got != w {
			t.Errorf("packet %d: got %+v, want %+v", i, got, w)
		}
	}
	// Buckets are per State: another lcore starts full.
	if got := tab.Apply(0, f, r, NewState(tab), 0, 100); got.Color != Green {
		t.Errorf("fresh state: %v", got.Color)
	}
	// A clock going backwards adds no tokens.
	tab, _ = Compile(mustParseRules(t, "flow create 0 ingress pattern eth / end actions meter trtcm cir 100 pir 100 cbs 100 pbs 100 / end"))
	st = NewState(tab)
	tab.Apply(0, f, r, st, 5e9, 100)
	if got := tab.Apply(0, f, r, st, 4e9, 100); got.Color != Red {
		t.Errorf("after a backward step: %v", got.Color)
	}
	if got := tab.Apply(0, f, r, st, 6e9, 100); got.Color != Green {
		t.Errorf("after 1 s at 100 B/s: %v", got.Color)
	}
}

func TestApplyAllocs(t *testing.T) {
	f := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	tab, err := Compile(mustParseRules(t,
		"flow create 0 ingress pattern eth / ipv4 / end actions count / set_ipv4_dscp dscp_value 3 / mark id 4 / meter trtcm cir 1000 pir 2000 cbs 100000 pbs 200000 / jump group 1 / end",
		"flow create 0 group 1 ingress pattern udp / end actions flag / queue index 1 / end"))
	if err != nil {
		t.Fatal(err)
	}
	st := NewState(tab)
	var p Path
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += 1000
		i := tab.MatchPath(f, &r, &p)
		tab.Apply(i, f, &r, st, now, len(f))
		tab.ApplyPath(&p, f, &r, st, now, len(f))
	}); n != 0 {
		t.Errorf("Apply allocates %v times", n)
	}
}

func BenchmarkApply(b *testing.B) {
	f := roceFrame(b, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	var r roce.Result
	roce.Classify(f, nil, false, &r)
	tab, err := Compile(mustParseRules(b,
		"flow create 0 ingress pattern eth / ipv4 / end actions count / set_ipv4_dscp dscp_value 3 / meter srtcm cir 125000000 cbs 100000 ebs 0 / end"))
	if err != nil {
		b.Fatal(err)
	}
	st := NewState(tab)
	now := int64(0)
	for b.Loop() {
		now += 100
		tab.Apply(0, f, &r, st, now, len(f))
	}
}

// Four lcores sharing one meter, each with a quarter of the traffic, hold
// the configured rate together, as one NIC meter does.
func TestMeterShare(t *testing.T) {
	const cir = 125_000_000
	const n = 4
	tab, err := Compile(mustParseRules(t, "flow create 0 ingress pattern eth / end actions meter srtcm cir 125000000 cbs 65536 ebs 0 / end"))
	if err != nil {
		t.Fatal(err)
	}
	f := roceFrame(t, roce.FrameSpec{BTH: roce.BTHFields{Opcode: 0x04}})
	r := classify(f)
	var green float64
	const size, sec = 1024, int64(1e9)
	gap := int64(float64(size) / (2 * cir) * 1e9 * n) // each lcore offers 2xCIR/n
	for range n {
		st := NewStateShare(tab, n)
		for now := int64(0); now < 2*sec; now += gap {
			if v := tab.Apply(0, f, r, st, now, size); v.Color == Green {
				green += size
			}
		}
	}
	within(t, "green bytes/s over 4 lcores", green/2, cir, 0.02)
	// One lcore with all the traffic and the whole meter: the same rate.
	st := NewState(tab)
	var alone float64
	for now := int64(0); now < 2*sec; now += gap / n {
		if v := tab.Apply(0, f, r, st, now, size); v.Color == Green {
			alone += size
		}
	}
	within(t, "green bytes/s on one lcore", alone/2, cir, 0.02)
}
