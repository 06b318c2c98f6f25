package qos

import (
	"reflect"
	"testing"

	"roce-fwd/roce"
)

var srcMAC = roce.MAC{2, 0, 0, 0, 0, 9}

func pfcFrame(t testing.TB, ce uint8, q [8]uint16) []byte {
	t.Helper()
	buf := make([]byte, 64)
	n, err := roce.BuildPFC(buf, srcMAC, ce, q)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func pauseFrame(t testing.TB, q uint16) []byte {
	t.Helper()
	buf := make([]byte, 64)
	n, err := roce.BuildPause(buf, srcMAC, q)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestPauseNanos(t *testing.T) {
	for _, c := range []struct {
		q     uint16
		speed uint64
		want  int64
	}{
		{0xFFFF, 25e9, 1342157}, // 33553920 bits / 25 Gbps = 1.3421568 ms, rounded up
		{0xFFFF, 100e9, 335540},
		{0xFFFF, 400e9, 83885},
		{0xFFFF, 10e9, 3355392},
		{1, 25e9, 21}, // 512 bits = 20.48 ns
		{1000, 100e9, 5120},
		{0, 25e9, 0},
	} {
		if got := PauseNanos(c.q, c.speed); got != c.want {
			t.Errorf("PauseNanos(%#x, %d) = %d, want %d", c.q, c.speed, got, c.want)
		}
	}
}

func TestPFCRxPauseAndResume(t *testing.T) {
	rx, err := NewPFCRx(25e9, nil)
	if err != nil {
		t.Fatal(err)
	}
	const t0 = 1_000_000
	if rx.Paused(3, t0) || rx.PausedMask(t0) != 0 {
		t.Fatal("paused before any frame")
	}
	if !rx.Receive(t0, pfcFrame(t, 1<<3, [8]uint16{3: 0xFFFF, 4: 0xFFFF})) {
		t.Fatal("PFC frame not recognised")
	}
	d := PauseNanos(0xFFFF, 25e9)
	if !rx.Paused(3, t0) || !rx.Paused(3, t0+d-1) || rx.Paused(3, t0+d) {
		t.Errorf("TC3 pause does not last exactly %d ns", d)
	}
	// Only priority 3's class-enable bit was set: quanta 4 is ignored.
	if rx.Paused(4, t0) || rx.PausedMask(t0) != 1<<3 {
		t.Errorf("paused mask %08b, want only TC3", rx.PausedMask(t0))
	}
	// A new frame restarts the timer at its own value (shorter here).
	rx.Receive(t0+1000, pfcFrame(t, 1<<3, [8]uint16{3: 100}))
	if rx.Paused(3, t0+1000+PauseNanos(100, 25e9)) {
		t.Error("a shorter refresh did not restart the timer")
	}
	// XON resumes at once.
	rx.Receive(t0+2000, pfcFrame(t, 1<<3, [8]uint16{3: 0xFFFF}))
	rx.Receive(t0+3000, pfcFrame(t, 1<<3, [8]uint16{}))
	if rx.Paused(3, t0+3000) {
		t.Error("XON did not resume")
	}
	if got := rx.PausedNanos(3, t0+10_000); got != 3000 {
		t.Errorf("paused %d ns, want 3000", got)
	}
	st := rx.Stats()
	if st.Frames[3] != 4 || st.XOFF[3] != 3 || st.XON[3] != 1 || st.Frames[4] != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestPFCRxPausedNanos(t *testing.T) {
	rx, _ := NewPFCRx(100e9, nil)
	q := uint16(1000) // 5120 ns at 100 Gbps
	d := PauseNanos(q, 100e9)
	rx.ReceivePFC(0, 1<<2, &[8]uint16{2: q})
	if got := rx.PausedNanos(2, d/2); got != d/2 {
		t.Errorf("mid-pause: %d, want %d", got, d/2)
	}
	if got := rx.PausedNanos(2, 10*d); got != d {
		t.Errorf("after expiry: %d, want %d", got, d)
	}
	// A second pause after the first expired: intervals add up.
	rx.ReceivePFC(100*d, 1<<2, &[8]uint16{2: q})
	// Refresh mid-pause extends the same interval.
	rx.ReceivePFC(100*d+d/2, 1<<2, &[8]uint16{2: q})
	if got, want := rx.PausedNanos(2, 1000*d), d+d/2+d; got != want {
		t.Errorf("two pauses, one refreshed: %d, want %d", got, want)
	}
}

func TestPFCRxPauseAll(t *testing.T) {
	rx, _ := NewPFCRx(25e9, nil)
	if !rx.Receive(0, pauseFrame(t, 0xFFFF)) {
		t.Fatal("PAUSE frame not recognised")
	}
	if m := rx.PausedMask(1); m != 0xff {
		t.Errorf("PAUSE: paused mask %08b, want all", m)
	}
	d := PauseNanos(0xFFFF, 25e9)
	if rx.PausedMask(d) != 0 {
		t.Error("PAUSE outlived its quanta")
	}
	rx.Receive(d+5, pauseFrame(t, 0xFFFF))
	rx.Receive(d+10, pauseFrame(t, 0))
	if rx.PausedMask(d+10) != 0 {
		t.Error("PAUSE 0 did not resume")
	}
	if st := rx.Stats(); st.Pause != 3 || st.Frames[0] != 0 {
		t.Errorf("stats %+v", st)
	}
	// Not a MAC control frame.
	f, _ := frame(t, false, 0, 26, roce.ECNECT0)
	if rx.Receive(0, f) {
		t.Error("RoCE frame taken for flow control")
	}
}

func TestPFCRxPrioToTC(t *testing.T) {
	m := [8]uint8{0, 0, 0, 3, 3, 1, 1, 1} // priorities 3 and 4 both feed TC3
	rx, err := NewPFCRx(25e9, &m)
	if err != nil {
		t.Fatal(err)
	}
	rx.ReceivePFC(0, 1<<4, &[8]uint16{4: 10})
	if !rx.Paused(3, 1) || rx.Paused(4, 1) {
		t.Errorf("priority 4 → TC3: mask %08b", rx.PausedMask(1))
	}
	bad := [8]uint8{8}
	if _, err := NewPFCRx(25e9, &bad); err == nil {
		t.Error("TC 8 accepted")
	}
	if _, err := NewPFCRx(0, nil); err == nil {
		t.Error("speed 0 accepted")
	}
}

func TestPFCTxXoffRefreshXon(t *testing.T) {
	tx, err := NewPFCTx(PFCTxConfig{Enable: 1 << 3, Xoff: 100_000, Xon: 50_000, Speed: 25e9})
	if err != nil {
		t.Fatal(err)
	}
	refresh := PauseNanos(0xFFFF, 25e9) / 2
	now := int64(0)
	tx.Add(3, 99_999)
	if _, send := tx.Check(now); send {
		t.Fatal("XOFF below the threshold")
	}
	tx.Add(3, 1)
	f, send := tx.Check(now)
	if !send || f.ClassEnable != 1<<3 || f.Quanta[3] != 0xFFFF {
		t.Fatalf("at xoff: send %v frame %+v", send, f)
	}
	if tx.XOFFMask() != 1<<3 {
		t.Error("XOFF state not recorded")
	}
	if got := tx.PausedNanos(3, now+1000); got != 1000 {
		t.Errorf("paused by us %d ns into the pause, want 1000", got)
	}
	if _, send := tx.Check(now + refresh - 1); send {
		t.Error("refresh before half the pause time")
	}
	f, send = tx.Check(now + refresh)
	if !send || f.Quanta[3] != 0xFFFF {
		t.Errorf("no refresh while congested: %v %+v", send, f)
	}
	// Between xon and xoff: still congested, keep refreshing, no XON.
	tx.Sub(3, 40_000)
	if _, send := tx.Check(now + refresh + 1); send {
		t.Error("frame between refreshes")
	}
	if f, send = tx.Check(now + 2*refresh); !send || f.Quanta[3] == 0 {
		t.Errorf("hysteresis: want a refresh XOFF, got %v %+v", send, f)
	}
	tx.Sub(3, 10_000) // at xon
	f, send = tx.Check(now + 2*refresh + 1)
	if !send || f.ClassEnable != 1<<3 || f.Quanta[3] != 0 {
		t.Errorf("at xon: want XON, got %v %+v", send, f)
	}
	if _, send := tx.Check(now + 10*refresh); send {
		t.Error("XON sent twice")
	}
	st := tx.Stats()
	// The partner was paused from the first XOFF to the XON, refreshes
	// and all.
	if st.PausedNs[3] != 2*refresh+1 || tx.PausedNanos(3, now+10*refresh) != 2*refresh+1 {
		t.Errorf("paused by us %d ns (%d now), want %d", st.PausedNs[3], tx.PausedNanos(3, now+10*refresh), 2*refresh+1)
	}
	if st.XOFF[3] != 3 || st.Refresh[3] != 2 || st.XON[3] != 1 || st.Frames != 4 {
		t.Errorf("stats %+v", st)
	}
	// The frame builds and parses back.
	buf := make([]byte, 60)
	n, err := f.Build(buf, srcMAC)
	if err != nil {
		t.Fatal(err)
	}
	ce, q, ok := roce.ParsePFC(buf[:n])
	if !ok || ce != 1<<3 || q != f.Quanta {
		t.Errorf("built frame parses as %v %08b %v", ok, ce, q)
	}
}

func TestPFCTxSeveralPriorities(t *testing.T) {
	tx, _ := NewPFCTx(PFCTxConfig{Enable: 1<<3 | 1<<4, Xoff: 1000, Xon: 0, Quanta: 500, Speed: 100e9})
	tx.Add(3, 1000)
	tx.Add(4, 2000)
	tx.Add(5, 5000) // not a PFC priority
	f, send := tx.Check(0)
	if !send || f.ClassEnable != 0x18 || f.Quanta[3] != 500 || f.Quanta[4] != 500 || f.Quanta[5] != 0 {
		t.Errorf("%v %+v", send, f)
	}
	tx.Sub(3, 1000)
	tx.Sub(4, 1000)
	f, send = tx.Check(1)
	if !send || f.ClassEnable != 1<<3 || f.Quanta[3] != 0 {
		t.Errorf("XON for 3 only: %v %+v", send, f)
	}
	tx.Sub(4, 5000) // more than held: clamps to 0
	if tx.Bytes(4) != 0 {
		t.Errorf("bytes(4) = %d", tx.Bytes(4))
	}
	for _, c := range []PFCTxConfig{{Enable: 8, Xoff: 10, Xon: 10, Speed: 1}, {Enable: 8, Speed: 1}, {Enable: 8, Xoff: 10}} {
		if _, err := NewPFCTx(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func TestPFCAllocs(t *testing.T) {
	rx, _ := NewPFCRx(25e9, nil)
	tx, _ := NewPFCTx(PFCTxConfig{Enable: 1 << 3, Xoff: 10_000, Xon: 5_000, Speed: 25e9})
	pf := pfcFrame(t, 1<<3, [8]uint16{3: 0xFFFF})
	pa := pauseFrame(t, 10)
	buf := make([]byte, 60)
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += 1000
		rx.Receive(now, pf)
		rx.Receive(now, pa)
		_ = rx.Paused(3, now)
		_ = rx.PausedMask(now)
		_ = rx.PausedNanos(3, now)
		tx.Add(3, 9000)
		if f, ok := tx.Check(now); ok {
			f.Build(buf, srcMAC)
		}
		tx.Sub(3, 9000)
		tx.Check(now)
	}); n != 0 {
		t.Errorf("PFC rx/tx: %v allocs/op", n)
	}
}

// A mirror fed with the receiver's decisions pauses, resumes and accounts
// paused time exactly as the receiver does.
func TestPFCRxMirror(t *testing.T) {
	src, _ := NewPFCRx(25e9, nil)
	dst, _ := NewPFCRx(25e9, nil)
	type ev struct {
		at int64
		ce uint8
		q  [8]uint16
	}
	evs := []ev{
		{1000, 1 << 3, [8]uint16{3: 0xFFFF}},
		{500_000, 1<<3 | 1<<4, [8]uint16{3: 100, 4: 0xFFFF}},
		{700_000, 1 << 4, [8]uint16{}}, // XON
		{900_000, 0xFF, [8]uint16{0xFFFF, 1, 2, 3, 4, 5, 6, 7}},
	}
	for _, e := range evs {
		src.Receive(e.at, pfcFrame(t, e.ce, e.q))
		for p := range uint8(8) {
			if e.ce&(1<<p) != 0 {
				dst.Mirror(e.at, p, src.Until(p))
			}
		}
		for _, now := range []int64{e.at, e.at + 1000, e.at + 150_000} {
			if a, b := src.PausedMask(now), dst.PausedMask(now); a != b {
				t.Fatalf("at %d: mirror paused %08b, receiver %08b", now, b, a)
			}
		}
	}
	for p := range uint8(8) {
		if a, b := src.PausedNanos(p, 5_000_000), dst.PausedNanos(p, 5_000_000); a != b {
			t.Errorf("priority %d: mirror paused %d ns, receiver %d ns", p, b, a)
		}
		if src.Stats().Frames[p] == 0 && p == 3 {
			t.Error("receiver counted no frames")
		}
	}
	if dst.Stats().Frames != [8]uint64{} {
		t.Error("mirror counted frames it did not receive")
	}
}

// Each pause is remembered from its first XOFF to the XON that ended it
// or to when its quanta ran out, with the XOFF frames that kept it going,
// and counted by duration.
func TestPFCRxHistory(t *testing.T) {
	const us = int64(1000)
	r, err := NewPFCRx(100e9, nil)
	if err != nil {
		t.Fatal(err)
	}
	var q [NumTC]uint16
	q[3] = 0xffff
	r.ReceivePFC(0, 1<<3, &q)
	r.ReceivePFC(100*us, 1<<3, &q)
	q[3] = 0
	r.ReceivePFC(200*us, 1<<3, &q) // XON
	q[4] = 1000                    // 5.12 µs at 100 Gbit/s
	r.ReceivePFC(1000*us, 1<<4, &q)
	r.ReceivePFC(2000*us, 1<<4, &q) // the first ran out long before
	got := r.History(2000*us+1, nil)
	want := []PauseEpisode{
		{Prio: 3, TC: 3, From: 0, To: 200 * us, Frames: 2, XON: true},
		{Prio: 4, TC: 4, From: 1000 * us, To: 1000*us + 5120, Frames: 1},
		{Prio: 4, TC: 4, From: 2000 * us, To: 2000*us + 1, Frames: 1, Open: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history\n got %+v\nwant %+v", got, want)
	}
	st := r.Stats()
	if st.Pauses[3][3] != 1 || st.Pauses[4][1] != 1 || st.PauseNs[3] != 200*us || st.PauseNs[4] != 5120 {
		t.Errorf("histograms %v %v, totals %v", st.Pauses[3], st.Pauses[4], st.PauseNs)
	}
	// The history keeps the last 256 pauses, in order; priority 4's last
	// pause ran out before now, though no frame has closed it yet.
	for i := range 300 {
		at := 10_000*us + int64(i)*10*us
		q[5] = 0xffff
		r.ReceivePFC(at, 1<<5, &q)
		q[5] = 0
		r.ReceivePFC(at+us, 1<<5, &q)
	}
	got = r.History(20_000*us, got[:0])
	if len(got) != 256+1 || got[0].From != 10_000*us+44*10*us || got[255].From != 10_000*us+299*10*us ||
		got[256].Prio != 4 || got[256].Open || got[256].To != 2000*us+5120 {
		t.Errorf("%d pauses, first from %d, last closed from %d", len(got), got[0].From, got[255].From)
	}
	// Settled, the run-out pause is counted and remembered as ended.
	r.Settle(20_000 * us)
	if st := r.Stats(); st.Pauses[4][1] != 2 || st.PauseNs[4] != 2*5120 {
		t.Errorf("after Settle: priority 4 pauses %v, %d ns", st.Pauses[4], st.PauseNs[4])
	}
	if h := r.History(20_000*us, nil); len(h) != 256 || h[255].Prio != 4 || h[255].Open {
		t.Errorf("after Settle: %d pauses, the last %+v", len(h), h[len(h)-1])
	}
}
