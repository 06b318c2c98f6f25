package qos

import (
	"math"
	"testing"

	"roce-fwd/roce"
)

// testConfig: all TCs lossy DWRR weight 1, no limits beyond the rings.
func testConfig() *Config {
	c := DefaultConfig()
	for i := range c.TC {
		c.TC[i].Limit = 0
	}
	return &c
}

func mustScheduler(t testing.TB, c *Config, ring int, rx *PFCRx) *Scheduler {
	t.Helper()
	s, err := NewScheduler(c, MakeRings(ring), rx, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// topUp keeps each TC in tcs holding at least n packets of sizes drawn
// from sizes.
func topUp(t testing.TB, s *Scheduler, tcs []uint8, n int, rng *Rand, sizes []uint32) {
	for _, tc := range tcs {
		for s.Queue(tc).Packets() < n {
			l := sizes[rng.Uint64()%uint64(len(sizes))]
			if _, r := s.Enqueue(tc, Slot{Handle: uintptr(tc), Len: l}, 0); r != ReasonNone {
				t.Fatalf("enqueue TC%d: %v", tc, r)
			}
		}
	}
}

// run dequeues rounds bursts of 32 and returns bytes sent per TC.
func run(t testing.TB, s *Scheduler, tcs []uint8, rounds int, now func(int) int64, sizes []uint32) [NumTC]uint64 {
	var got [NumTC]uint64
	out := make([]Slot, 32)
	rng := NewRand(99)
	for r := range rounds {
		topUp(t, s, tcs, 64, &rng, sizes)
		n := s.Dequeue(now(r), out, 0)
		for _, sl := range out[:n] {
			got[sl.Handle] += uint64(sl.Len)
		}
	}
	return got
}

var mixedSizes = []uint32{64, 78, 128, 300, 590, 1024, 1078, 1500, 4096, 4174, 9000}

func checkShares(t *testing.T, got [NumTC]uint64, weights map[uint8]float64) {
	t.Helper()
	var total, wsum float64
	for tc, w := range weights {
		total += float64(got[tc])
		wsum += w
	}
	for tc, w := range weights {
		share, want := float64(got[tc])/total, w/wsum
		if math.Abs(share-want) > 0.05*want {
			t.Errorf("TC%d: byte share %.4f, want %.4f ± 5%%", tc, share, want)
		}
	}
}

func TestDWRRShares(t *testing.T) {
	for _, weights := range []map[uint8]float64{
		{0: 50, 3: 50},
		{0: 70, 1: 20, 2: 10},
		{3: 15, 4: 15, 0: 14, 1: 14},
		{0: 1, 7: 100},
		{2: 3, 5: 7},
	} {
		c := testConfig()
		var tcs []uint8
		for tc, w := range weights {
			c.TC[tc].Weight = uint32(w)
			tcs = append(tcs, tc)
		}
		s := mustScheduler(t, c, 256, nil)
		got := run(t, s, tcs, 20_000, func(int) int64 { return 0 }, mixedSizes)
		checkShares(t, got, weights)
	}
}

// Quanta far below the packet size must not change the shares (the
// scheduler skips the empty rounds) and must not stall.
func TestDWRRSmallQuantum(t *testing.T) {
	c := testConfig()
	c.Quantum = 1
	c.TC[0].Weight, c.TC[1].Weight = 1, 3
	s := mustScheduler(t, c, 256, nil)
	got := run(t, s, []uint8{0, 1}, 5000, func(int) int64 { return 0 }, []uint32{9000, 64, 4096})
	checkShares(t, got, map[uint8]float64{0: 1, 1: 3})
}

func TestStrictStarves(t *testing.T) {
	c := testConfig()
	c.TC[6].Mode = Strict
	c.TC[7].Mode = Strict
	s := mustScheduler(t, c, 1024, nil)
	for range 100 {
		s.Enqueue(0, Slot{Handle: 0, Len: 1000}, 0)
		s.Enqueue(6, Slot{Handle: 6, Len: 100}, 0)
		s.Enqueue(7, Slot{Handle: 7, Len: 100}, 0)
	}
	out := make([]Slot, 32)
	var order []uintptr
	for {
		n := s.Dequeue(0, out, 0)
		if n == 0 {
			break
		}
		for _, sl := range out[:n] {
			order = append(order, sl.Handle)
		}
	}
	if len(order) != 300 {
		t.Fatalf("dequeued %d, want 300", len(order))
	}
	for i, h := range order {
		want := uintptr(7)
		if i >= 100 {
			want = 6
		}
		if i >= 200 {
			want = 0
		}
		if h != want {
			t.Fatalf("packet %d from TC%d, want TC%d (strict, higher TC first, then DWRR)", i, h, want)
		}
	}
}

func TestIdleTCGivesShareAway(t *testing.T) {
	c := testConfig()
	c.TC[0].Weight, c.TC[3].Weight = 50, 50
	s := mustScheduler(t, c, 256, nil)
	// TC3 idle: TC0 gets the whole port.
	got := run(t, s, []uint8{0}, 1000, func(int) int64 { return 0 }, mixedSizes)
	if got[0] == 0 || got[3] != 0 {
		t.Fatalf("alone: %v", got)
	}
	// TC3 wakes after a long idle spell: no saved-up credit, 50/50 from
	// the first rounds on.
	got = run(t, s, []uint8{0, 3}, 50, func(int) int64 { return 0 }, []uint32{1000})
	if d := math.Abs(float64(got[0]) - float64(got[3])); d > 2*50*256+1000 {
		t.Errorf("after idle: TC0 %d TC3 %d bytes, more apart than a quantum", got[0], got[3])
	}
	got = run(t, s, []uint8{0, 3}, 5000, func(int) int64 { return 0 }, mixedSizes)
	checkShares(t, got, map[uint8]float64{0: 50, 3: 50})
}

func TestPausedTCSkipped(t *testing.T) {
	c := testConfig()
	c.TC[3].Lossless = true
	c.TC[6].Mode = Strict
	c.PFC = PFCConfig{Xoff: 1000, Xon: 500}
	rx, _ := NewPFCRx(25e9, nil)
	s := mustScheduler(t, c, 256, rx)
	for range 10 {
		s.Enqueue(0, Slot{Handle: 0, Len: 100}, 0)
		s.Enqueue(3, Slot{Handle: 3, Len: 100}, 0)
		s.Enqueue(6, Slot{Handle: 6, Len: 100}, 0)
	}
	rx.ReceivePFC(0, 1<<3|1<<6, &[8]uint16{3: 0xFFFF, 6: 0xFFFF})
	out := make([]Slot, 64)
	n := s.Dequeue(1000, out, 0)
	if n != 10 {
		t.Fatalf("while TC3 and TC6 are paused: %d packets, want TC0's 10", n)
	}
	for _, sl := range out[:n] {
		if sl.Handle != 0 {
			t.Fatalf("paused TC%d sent", sl.Handle)
		}
	}
	// When the pause expires both go again, strict TC6 first.
	n = s.Dequeue(PauseNanos(0xFFFF, 25e9), out, 0)
	if n != 20 || out[0].Handle != 6 || out[19].Handle != 3 {
		t.Fatalf("after expiry: %d packets, first TC%d last TC%d", n, out[0].Handle, out[n-1].Handle)
	}
}

func TestDequeueBudgetAndLimits(t *testing.T) {
	c := testConfig()
	c.TC[0].Limit = 2500
	s := mustScheduler(t, c, 4, nil)
	for i := range 3 {
		if _, r := s.Enqueue(0, Slot{Handle: uintptr(i), Len: 1000}, 0); i < 2 && r != ReasonNone || i == 2 && r != ReasonQueueFull {
			t.Fatalf("enqueue %d: %v", i, r)
		}
	}
	for i := range 5 {
		if _, r := s.Enqueue(1, Slot{Len: 10}, 0); i < 4 && r != ReasonNone || i == 4 && r != ReasonQueueSlots {
			t.Fatalf("slots %d: %v", i, r)
		}
	}
	st := s.Stats(0).Queue
	if st.DropFull != 1 || st.MaxBytes != 2000 || s.Stats(1).Queue.DropSlots != 1 {
		t.Errorf("stats %+v / %+v", st, s.Stats(1).Queue)
	}
	out := make([]Slot, 8)
	if n := s.Dequeue(0, out, 9); n != 0 {
		t.Errorf("budget below the head packet: %d sent", n)
	}
	if b, p := s.Backlog(); b != 2040 || p != 6 {
		t.Errorf("backlog %d bytes %d packets", b, p)
	}
	n := s.Dequeue(0, out, 1015)
	var sent uint64
	for _, sl := range out[:n] {
		sent += uint64(sl.Len)
	}
	if sent > 1015 || n == 0 {
		t.Errorf("budget 1015: sent %d bytes in %d packets", sent, n)
	}
	if n := s.Dequeue(0, out[:0], 0); n != 0 {
		t.Error("empty out filled")
	}
}

func TestSchedulerWREDAndMarking(t *testing.T) {
	c := NVIDIARoCE()
	s := mustScheduler(t, &c, 4096, nil)
	f, _ := frame(t, false, 0, 26, roce.ECNECT0)
	var res roce.Result
	roce.Classify(f, &c.TCMap, false, &res)
	if res.TC != 3 {
		t.Fatalf("nvidia-roce maps DSCP 26 to TC%d", res.TC)
	}
	marked := 0
	for i := range 2000 { // 2000 × 1 KB: well past ECN max 1.5 MB
		mark, why := s.Enqueue(3, Slot{Len: 1000}, res.ECN)
		if why != ReasonNone {
			t.Fatalf("lossless enqueue %d: %v", i, why)
		}
		if mark {
			if i*1000 < 150_000 {
				t.Fatalf("marked at depth %d, below ECN min", i*1000)
			}
			marked++
		}
		if i*1000 >= 1_500_000 && !mark {
			t.Fatalf("not marked at depth %d, above ECN max", i*1000)
		}
	}
	if ws := s.Stats(3).WRED; ws.Marked != uint64(marked) {
		t.Errorf("marked %d, stats %+v", marked, ws)
	}
	// Not-ECT on the lossless TC above max: enqueued, never dropped.
	if mark, why := s.Enqueue(3, Slot{Len: 1000}, roce.ECNNotECT); mark || why != ReasonNone {
		t.Errorf("Not-ECT on lossless: %v %v", mark, why)
	}
	// Not-ECT on a lossy TC with WRED above max: dropped.
	c.TC[0].ECN = ECN{Min: 1000, Max: 2000, Probability: 1}
	s = mustScheduler(t, &c, 64, nil)
	for range 3 {
		s.Enqueue(0, Slot{Len: 1000}, roce.ECNNotECT)
	}
	if _, why := s.Enqueue(0, Slot{Len: 1000}, roce.ECNNotECT); why != ReasonWRED {
		t.Errorf("Not-ECT lossy above max: %v", why)
	}
}

func TestPortShaperRate(t *testing.T) {
	for _, c := range []struct {
		rate  uint64
		sizes []uint32
	}{
		{10e9, []uint32{1000}},
		{25e9, mixedSizes},
		{1e9, []uint32{64, 9000}},
	} {
		cfg := testConfig()
		cfg.Rate = c.rate
		s := mustScheduler(t, cfg, 512, nil)
		const step = 10_000 // dequeue every 10 µs over one simulated second
		var wire uint64
		out := make([]Slot, 64)
		rng := NewRand(5)
		for now := int64(step); now <= 1e9; now += step {
			topUp(t, s, []uint8{0, 5}, 64, &rng, c.sizes)
			n := s.Dequeue(now, out, 0)
			for _, sl := range out[:n] {
				wire += uint64(sl.Len) + WireOverhead
			}
		}
		got := float64(wire*8) / 1.0
		if math.Abs(got-float64(c.rate)) > 0.01*float64(c.rate) {
			t.Errorf("rate %s: sent %.4g bits/s on the wire, want within 1%%", FormatRate(c.rate), got)
		}
	}
}

func TestPerTCMaxRate(t *testing.T) {
	cfg := testConfig()
	cfg.TC[0].MaxRate = 2e9
	cfg.TC[0].Weight = 100 // would take nearly everything unshaped
	cfg.Rate = 10e9
	s := mustScheduler(t, cfg, 512, nil)
	var wire [NumTC]uint64
	out := make([]Slot, 64)
	rng := NewRand(5)
	for now := int64(10_000); now <= 1e9; now += 10_000 {
		topUp(t, s, []uint8{0, 1}, 64, &rng, []uint32{1500})
		n := s.Dequeue(now, out, 0)
		for _, sl := range out[:n] {
			wire[sl.Handle] += uint64(sl.Len) + WireOverhead
		}
	}
	if got := float64(wire[0] * 8); math.Abs(got-2e9) > 0.01*2e9 {
		t.Errorf("TC0 max rate 2 Gbps: got %.4g", got)
	}
	// TC1 takes the rest of the port.
	if got := float64((wire[0] + wire[1]) * 8); math.Abs(got-10e9) > 0.01*10e9 {
		t.Errorf("port 10 Gbps: got %.4g", got)
	}
}

func TestTokenBucket(t *testing.T) {
	var b TokenBucket
	if err := b.Init(8e9, 10_000, 0, 0); err != nil { // 1 byte per ns
		t.Fatal(err)
	}
	if !b.Allow(0, 10_000) || b.Allow(0, 1) {
		t.Fatal("burst not exactly 10000 bytes")
	}
	if !b.Allow(1, 1) || b.Allow(1, 1) || !b.Allow(2, 1) {
		t.Error("refill at 1 byte/ns")
	}
	b.Refill(1e12) // long idle: full, not more
	if b.Tokens() != 10_000 {
		t.Errorf("after idle: %d tokens", b.Tokens())
	}
	b.Refill(5) // time going backwards earns nothing
	if b.Tokens() != 10_000 {
		t.Errorf("backwards: %d tokens", b.Tokens())
	}
	if err := b.Init(1, MaxBurst+1, 0, 0); err == nil {
		t.Error("oversized burst accepted")
	}
	var u TokenBucket
	u.Init(0, 0, 0, 0)
	if !u.Unlimited() || !u.Allow(0, 1<<20) {
		t.Error("rate 0 is not unlimited")
	}
	if DefaultBurst(100e9) != 625_000 || DefaultBurst(1e6) != 64<<10 {
		t.Errorf("DefaultBurst: %d %d", DefaultBurst(100e9), DefaultBurst(1e6))
	}
}

func TestSchedulerAllocs(t *testing.T) {
	c := NVIDIARoCE()
	c.Rate = 25e9
	c.TC[0].MaxRate = 10e9
	rx, _ := NewPFCRx(25e9, nil)
	s := mustScheduler(t, &c, 1024, rx)
	out := make([]Slot, 32)
	now := int64(0)
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		for range 32 {
			i++
			s.Enqueue(uint8(i%8), Slot{Handle: uintptr(i), Len: uint32(64 + i%4000)}, uint8(i&3))
		}
		now += 5000
		s.Dequeue(now, out, 0)
	}); n != 0 {
		t.Errorf("enqueue+dequeue: %v allocs/op", n)
	}
	q := NewQueue(make([]Slot, 8), 0)
	if n := testing.AllocsPerRun(1000, func() {
		q.Enqueue(Slot{Len: 1})
		q.Dequeue()
		q.Drain(out)
	}); n != 0 {
		t.Errorf("queue: %v allocs/op", n)
	}
}

func TestQueueRing(t *testing.T) {
	q := NewQueue(make([]Slot, 3), 0)
	next, want := 0, 0
	for range 100 {
		for q.Fits(1) == ReasonNone {
			q.Enqueue(Slot{Handle: uintptr(next), Len: 1})
			next++
		}
		if q.Enqueue(Slot{Len: 1}) != ReasonQueueSlots {
			t.Fatal("full ring accepted a packet")
		}
		for range 2 {
			s, ok := q.Dequeue()
			if !ok || int(s.Handle) != want {
				t.Fatalf("got %d, want %d", s.Handle, want)
			}
			want++
		}
	}
	if q.MaxPackets() != 3 || q.Bytes() != 1 || q.Packets() != 1 {
		t.Errorf("max %d bytes %d packets %d", q.MaxPackets(), q.Bytes(), q.Packets())
	}
	q.ResetMax()
	if q.MaxPackets() != 1 {
		t.Errorf("after ResetMax: %d", q.MaxPackets())
	}
	q.Dequeue()
	if _, ok := q.Dequeue(); ok || q.HeadLen() != 0 {
		t.Error("empty queue dequeued")
	}
}

func BenchmarkEnqueueWRED(b *testing.B) {
	c := NVIDIARoCE()
	s, _ := NewScheduler(&c, MakeRings(4096), nil, 1)
	drain := make([]Slot, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		// Hold TC3 between 400 KB and 656 KB: inside the ECN ramp, so
		// every decision draws a random number.
		if s.Queue(3).Bytes() > 656_000 {
			s.Flush(3, drain)
		}
		s.Enqueue(3, Slot{Handle: uintptr(i), Len: 1000}, roce.ECNECT0)
	}
}

// BenchmarkDequeue reports ns per dequeued packet: nvidia-roce with
// TC0, TC3 (DWRR 50/50, mixed frame sizes) and TC6 (strict, CNP-sized)
// backlogged and PFC attached; "shaped" adds a 100 Gbps port shaper
// polled every µs (about 4 packets per call), "burst32" is unshaped with
// 32 packets per call.
func BenchmarkDequeue(b *testing.B) {
	for _, bc := range []struct {
		name string
		rate uint64
	}{{"burst32", 0}, {"shaped-100G", 100e9}} {
		b.Run(bc.name, func(b *testing.B) {
			c := NVIDIARoCE()
			c.Rate = bc.rate
			for i := range c.TC {
				c.TC[i].Limit = 0
			}
			rx, _ := NewPFCRx(100e9, nil)
			const ring = 1 << 16
			s, _ := NewScheduler(&c, MakeRings(ring), rx, 1)
			fill := func() {
				for k := range ring - 1 {
					s.Enqueue(0, Slot{Len: 1078}, 0)
					s.Enqueue(3, Slot{Len: 4174}, 0)
					if k%16 == 0 {
						s.Enqueue(6, Slot{Len: 78}, 0)
					}
				}
			}
			fill()
			out := make([]Slot, 32)
			now := int64(0)
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; {
				now += 1000
				done += s.Dequeue(now, out, 0)
				if _, p := s.Backlog(); p < 64 {
					b.StopTimer()
					fill()
					b.StartTimer()
				}
			}
		})
	}
}

// TestDWRRMatchesReferenceDRR compares the served order with a plain
// round-by-round deficit round robin (Shreedhar and Varghese), including
// quanta far below the packet sizes, where the scheduler skips rounds.
func TestDWRRMatchesReferenceDRR(t *testing.T) {
	for _, quantum := range []uint32{1, 64, 256, 4096} {
		c := testConfig()
		weights := [NumTC]uint32{3, 1, 7, 1, 2, 50, 1, 9}
		for i := range c.TC {
			c.TC[i].Weight = weights[i]
		}
		c.Quantum = quantum
		const per = 300
		s := mustScheduler(t, c, per, nil)
		rng := NewRand(uint64(quantum))
		var pkts [NumTC][]uint32
		for tc := range uint8(NumTC) {
			if tc == 4 { // one TC stays idle throughout
				continue
			}
			for range per {
				l := mixedSizes[rng.Uint64()%uint64(len(mixedSizes))]
				pkts[tc] = append(pkts[tc], l)
				s.Enqueue(tc, Slot{Handle: uintptr(tc), Len: l}, 0)
			}
		}
		// Reference DRR over the same packets.
		var want []uintptr
		var deficit [NumTC]int64
		head := [NumTC]int{}
		for len(want) < 1000 {
			for tc := range NumTC {
				if head[tc] == len(pkts[tc]) {
					deficit[tc] = 0
					continue
				}
				deficit[tc] += int64(quantum) * int64(weights[tc])
				for head[tc] < len(pkts[tc]) && int64(pkts[tc][head[tc]]) <= deficit[tc] {
					deficit[tc] -= int64(pkts[tc][head[tc]])
					head[tc]++
					want = append(want, uintptr(tc))
				}
				if head[tc] == len(pkts[tc]) {
					deficit[tc] = 0
				}
			}
		}
		out := make([]Slot, 7)
		var got []uintptr
		for len(got) < 1000 {
			n := s.Dequeue(0, out, 0)
			if n == 0 {
				t.Fatal("stalled")
			}
			for _, sl := range out[:n] {
				got = append(got, sl.Handle)
			}
		}
		for i := range 1000 {
			if got[i] != want[i] {
				t.Fatalf("quantum %d: packet %d from TC%d, reference DRR says TC%d", quantum, i, got[i], want[i])
			}
		}
	}
}

// A port is idle only when a packet could leave at once: empty queues,
// no shaper, no pause, no watchdog drop; cut-through packets count as
// enqueued and sent.
func TestIdleAndCutThrough(t *testing.T) {
	c := NVIDIARoCE()
	rx, _ := NewPFCRx(25e9, nil)
	s, err := NewScheduler(&c, MakeRings(16), rx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Idle(0) {
		t.Fatal("a fresh unshaped port is not idle")
	}
	s.CutThrough(3, 1000)
	if st := s.Stats(3).Queue; st.EnqPackets != 1 || st.DeqBytes != 1000 || st.MaxBytes != 0 || !s.Idle(0) {
		t.Errorf("after a cut-through packet: %+v, idle %v", st, s.Idle(0))
	}
	s.Enqueue(0, Slot{Len: 100}, 0)
	if s.Idle(0) {
		t.Error("idle with a packet queued")
	}
	s.Dequeue(0, make([]Slot, 4), 0)
	rx.ReceivePFC(10, 1<<3, &[8]uint16{3: 100})
	if s.Idle(20) || !s.Idle(10+PauseNanos(100, 25e9)) {
		t.Error("idle while paused, or not idle once the pause ran out")
	}
	c.Rate = 1e9
	shaped, _ := NewScheduler(&c, MakeRings(16), nil, 1)
	if shaped.Idle(0) {
		t.Error("a shaped port is never idle: its shaper decides when packets leave")
	}
}
