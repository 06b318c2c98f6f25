package qos

import (
	"slices"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// stormRig is an nvidia-roce port at 25 Gbps whose partner pauses
// priority 3 every millisecond until stopAt, polled every 10 ms.
type stormRig struct {
	t      *testing.T
	c      Config
	rx     *PFCRx
	s      *Scheduler
	w      *Watchdog
	out    []Slot
	events []WDEvent
	sent   [NumTC]int
}

func newStormRig(t *testing.T, action WatchdogAction) *stormRig {
	c := NVIDIARoCE()
	c.Watchdog.Action = action
	rx, _ := NewPFCRx(25e9, nil)
	s := mustScheduler(t, &c, 1024, rx)
	w, err := NewWatchdog(&c, s)
	if err != nil {
		t.Fatal(err)
	}
	return &stormRig{t: t, c: c, rx: rx, s: s, w: w, out: make([]Slot, 64)}
}

// advance runs the rig from..to (ms), pausing TC3 while now < stopAt,
// offering one TC3 and one TC0 packet per ms, dequeuing every ms and
// polling every 10 ms. It returns the events seen.
func (r *stormRig) advance(from, to, stopAt int64) []WDEvent {
	var evs []WDEvent
	ev := make([]WDEvent, 4)
	for now := from; now < to; now += ms {
		if now < stopAt {
			r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
		}
		r.s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2)
		r.s.Enqueue(0, Slot{Handle: 0, Len: 1000}, 0)
		n := r.s.Dequeue(now, r.out, 0)
		for _, sl := range r.out[:n] {
			r.sent[sl.Handle]++
		}
		if now%(10*ms) == 0 {
			k := r.w.Poll(now, ev)
			for _, e := range ev[:k] {
				if e.Kind == StormDetected && e.Action == ActionDrop {
					for r.s.Flush(e.TC, r.out) > 0 {
					}
				}
			}
			evs = append(evs, ev[:k]...)
		}
	}
	return evs
}

func TestWatchdogDrop(t *testing.T) {
	r := newStormRig(t, ActionDrop)
	evs := r.advance(0, 1000*ms, 1000*ms)
	if len(evs) != 1 || evs[0].Kind != StormDetected || evs[0].TC != 3 || evs[0].Action != ActionDrop {
		t.Fatalf("events %+v", evs)
	}
	// Stuck from the first poll at 0 ms; detected at the first poll at
	// least 200 ms later.
	if evs[0].At != 200*ms {
		t.Errorf("detected at %d ms, want 200", evs[0].At/ms)
	}
	if r.s.Queue(3).Packets() != 0 {
		t.Errorf("queue holds %d packets after the flush", r.s.Queue(3).Packets())
	}
	if r.sent[3] != 0 {
		t.Errorf("drop action sent %d packets", r.sent[3])
	}
	if r.sent[0] != 1000 {
		t.Errorf("TC0 sent %d of 1000 during the storm", r.sent[0])
	}
	if _, why := r.s.Enqueue(3, Slot{Len: 1}, 2); why != ReasonPFCWD {
		t.Errorf("arrival during storm: %v", why)
	}
	st := r.w.Stats(3)
	// 201 arrivals flushed at detection (0..200 ms), 799 dropped on
	// arrival, plus the one just above.
	if !st.InStorm || st.Detected != 1 || st.Dropped != 1001 {
		t.Errorf("stats during storm %+v", st)
	}
	// The partner stops pausing at 1000 ms: its last XOFF (999 ms, 1.34 ms
	// of quanta at 25 Gbit/s) runs out at 1000.34 ms, and the TC is
	// restored at the first poll 200 ms after that, at 1210 ms.
	evs = r.advance(1000*ms, 1500*ms, 0)
	if len(evs) != 1 || evs[0].Kind != StormRestored || evs[0].At != 1210*ms {
		t.Fatalf("restore events %+v", evs)
	}
	st = r.w.Stats(3)
	// Arrivals at 1000..1210 ms (the one at 1210 precedes that poll) were dropped too.
	if st.InStorm || st.Restored != 1 || st.Dropped != 1001+211 {
		t.Errorf("stats after restore %+v", st)
	}
	if r.sent[3] == 0 || r.s.PauseOverride() != 0 {
		t.Errorf("after restore: sent %d, override %08b", r.sent[3], r.s.PauseOverride())
	}
	// PFC is honoured again.
	r.rx.ReceivePFC(1500*ms, 1<<3, &[8]uint16{3: 0xFFFF})
	r.s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2)
	before := r.sent[3]
	n := r.s.Dequeue(1500*ms+1, r.out, 0)
	for _, sl := range r.out[:n] {
		r.sent[sl.Handle]++
	}
	if r.sent[3] != before {
		t.Error("pause ignored after restore")
	}
}

func TestWatchdogForward(t *testing.T) {
	r := newStormRig(t, ActionForward)
	evs := r.advance(0, 500*ms, 500*ms)
	if len(evs) != 1 || evs[0].Kind != StormDetected || evs[0].Action != ActionForward {
		t.Fatalf("events %+v", evs)
	}
	// Until 200 ms nothing left; from then on everything does.
	if r.sent[3] != 500 || r.s.Queue(3).Packets() != 0 {
		t.Errorf("forward: sent %d, queued %d", r.sent[3], r.s.Queue(3).Packets())
	}
	if st := r.w.Stats(3); st.Dropped != 0 || st.Detected != 1 {
		t.Errorf("stats %+v", st)
	}
	evs = r.advance(500*ms, 800*ms, 0)
	if len(evs) != 1 || evs[0].Kind != StormRestored {
		t.Fatalf("restore events %+v", evs)
	}
}

func TestWatchdogAlert(t *testing.T) {
	r := newStormRig(t, ActionAlert)
	evs := r.advance(0, 500*ms, 500*ms)
	if len(evs) != 1 || evs[0].Kind != StormDetected || evs[0].Action != ActionAlert {
		t.Fatalf("events %+v", evs)
	}
	if r.sent[3] != 0 || r.s.Queue(3).Packets() != 500 {
		t.Errorf("alert changed forwarding: sent %d, queued %d", r.sent[3], r.s.Queue(3).Packets())
	}
	if r.w.InStorm() != 1<<3 {
		t.Errorf("InStorm %08b", r.w.InStorm())
	}
	evs = r.advance(500*ms, 800*ms, 0)
	if len(evs) != 1 || evs[0].Kind != StormRestored {
		t.Fatalf("restore events %+v", evs)
	}
}

// Pauses that let traffic through now and then, an empty queue, or a
// queue that is not paused are not storms.
func TestWatchdogNoFalseAlarm(t *testing.T) {
	r := newStormRig(t, ActionDrop)
	ev := make([]WDEvent, 4)
	// Paused, but the queue is empty.
	for now := int64(0); now < 1000*ms; now += 10 * ms {
		r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
		if n := r.w.Poll(now, ev); n != 0 {
			t.Fatalf("empty queue: %+v", ev[:n])
		}
	}
	// Backlogged, paused 90% of the time but sending in between.
	for now := int64(1000 * ms); now < 3000*ms; now += ms {
		if now%(10*ms) != 5*ms {
			r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
		}
		r.s.Enqueue(3, Slot{Handle: 3, Len: 1000}, 2)
		r.s.Dequeue(now+int64(1.4*float64(ms)), r.out[:1], 0)
		if now%(10*ms) == 0 {
			if n := r.w.Poll(now, ev); n != 0 {
				t.Fatalf("intermittent pause at %d ms: %+v", now/ms, ev[:n])
			}
		}
	}
	// Backlogged and never dequeued, paused at every poll but only for
	// a few µs each time: not a storm (the pause does not hold the queue).
	r3 := newStormRig(t, ActionDrop)
	r3.s.Enqueue(3, Slot{Len: 1000}, 2)
	for now := int64(0); now < 1000*ms; now += 10 * ms {
		r3.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 1000})
		if n := r3.w.Poll(now+1000, ev); n != 0 {
			t.Fatalf("brief pauses: %+v", ev[:n])
		}
	}
	// Backlogged but not paused (the scheduler is simply not called).
	r2 := newStormRig(t, ActionDrop)
	r2.s.Enqueue(3, Slot{Len: 1000}, 2)
	for now := int64(0); now < 1000*ms; now += 10 * ms {
		if n := r2.w.Poll(now, ev); n != 0 {
			t.Fatalf("not paused: %+v", ev[:n])
		}
	}
}

func TestWatchdogEventsNeverLost(t *testing.T) {
	c := SONiCAzure()
	rx, _ := NewPFCRx(1e9, nil) // 0xFFFF quanta last 33.5 ms: one frame per poll holds the pause
	s := mustScheduler(t, &c, 64, rx)
	w, _ := NewWatchdog(&c, s)
	s.Enqueue(3, Slot{Len: 100}, 2)
	s.Enqueue(4, Slot{Len: 100}, 2)
	var got []WDEvent
	for now := int64(0); now <= 300*ms; now += 10 * ms {
		rx.ReceivePFC(now, 0x18, &[8]uint16{3: 0xFFFF, 4: 0xFFFF})
		got = append(got, make([]WDEvent, 1)...)
		n := w.Poll(now, got[len(got)-1:]) // room for one event per poll
		got = got[:len(got)-1+n]
	}
	if len(got) != 2 || got[0].TC != 3 || got[1].TC != 4 || got[1].At != got[0].At+10*ms {
		t.Errorf("events %+v", got)
	}
}

func TestWatchdogDisabled(t *testing.T) {
	c := NVIDIARoCE()
	c.Watchdog.Enabled = false
	rx, _ := NewPFCRx(25e9, nil)
	s := mustScheduler(t, &c, 64, rx)
	w, _ := NewWatchdog(&c, s)
	s.Enqueue(3, Slot{Len: 100}, 2)
	ev := make([]WDEvent, 4)
	for now := int64(0); now < 1000*ms; now += 10 * ms {
		rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
		if w.Poll(now, ev) != 0 {
			t.Fatal("disabled watchdog fired")
		}
	}
}

func TestWatchdogAllocs(t *testing.T) {
	r := newStormRig(t, ActionDrop)
	ev := make([]WDEvent, 4)
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now += ms
		r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
		r.s.Enqueue(3, Slot{Len: 100}, 2)
		r.w.Poll(now, ev)
		r.s.Flush(3, r.out)
	}); n != 0 {
		t.Errorf("watchdog: %v allocs/op", n)
	}
}

func TestParseWatchdogAction(t *testing.T) {
	for _, a := range []WatchdogAction{ActionDrop, ActionForward, ActionAlert} {
		if got, err := ParseWatchdogAction(a.String()); err != nil || got != a {
			t.Errorf("%v: %v %v", a, got, err)
		}
	}
	if _, err := ParseWatchdogAction("ignore"); err == nil {
		t.Error("unknown action accepted")
	}
}

// The known ways counter-polled PFC watchdogs fail, each as the partner's
// frames and the watchdog's polls (every 10 ms) would have it.
func TestWatchdogFailureModes(t *testing.T) {
	ev := make([]WDEvent, NumTC)
	poll := func(w *Watchdog, now int64) []WDEvent { return append([]WDEvent(nil), ev[:w.Poll(now, ev)]...) }

	t.Run("an XOFF storm that turns into an XON storm is restored", func(t *testing.T) {
		r := newStormRig(t, ActionDrop)
		r.s.Enqueue(3, Slot{Len: 1000}, 2)
		var got []WDEvent
		for now := int64(0); now < 2000*ms; now += ms {
			q := uint16(0xFFFF)
			if now >= 500*ms {
				q = 0 // XON, every millisecond, for ever
			}
			r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: q})
			if now%(10*ms) == 0 {
				got = append(got, poll(r.w, now)...)
			}
		}
		// Detected at 200 ms; the last pause ended at 500 ms (the XON):
		// restored at 700 ms although the frames never stopped.
		if len(got) != 2 || got[0].Kind != StormDetected || got[0].At != 200*ms || got[1].Kind != StormRestored || got[1].At != 700*ms {
			t.Errorf("events %+v", got)
		}
	})

	t.Run("every priority at once (802.3x PAUSE) is detected and restored on each lossless TC", func(t *testing.T) {
		c := SONiCAzure() // lossless TCs 3 and 4
		rx, _ := NewPFCRx(25e9, nil)
		s := mustScheduler(t, &c, 64, rx)
		w, _ := NewWatchdog(&c, s)
		for tc := range uint8(NumTC) {
			s.Enqueue(tc, Slot{Len: 100}, 2)
		}
		var got []WDEvent
		for now := int64(0); now < 1000*ms; now += ms {
			if now < 400*ms {
				rx.ReceivePause(now, 0xFFFF)
			}
			if now%(10*ms) == 0 {
				got = append(got, poll(w, now)...)
			}
		}
		want := []WDEvent{{StormDetected, 3, ActionDrop, 200 * ms}, {StormDetected, 4, ActionDrop, 200 * ms},
			{StormRestored, 3, ActionDrop, 610 * ms}, {StormRestored, 4, ActionDrop, 610 * ms}}
		if !slices.Equal(got, want) {
			t.Errorf("events\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("a storm that goes on is never restored, so never detected again", func(t *testing.T) {
		r := newStormRig(t, ActionDrop)
		evs := r.advance(0, 5000*ms, 5000*ms) // 25 detection times
		if len(evs) != 1 || evs[0].Kind != StormDetected {
			t.Fatalf("during the storm: %+v", evs)
		}
		evs = r.advance(5000*ms, 6000*ms, 0)
		if len(evs) != 1 || evs[0].Kind != StormRestored {
			t.Fatalf("after the storm: %+v", evs)
		}
		if st := r.w.Stats(3); st.Detected != 1 || st.Restored != 1 || st.InStorm {
			t.Errorf("stats %+v", st)
		}
	})

	t.Run("a restart in the middle of a storm detects it a detection time later", func(t *testing.T) {
		r := newStormRig(t, ActionAlert) // a new daemon: fresh state, the storm long under way
		start := int64(3_600_000) * ms
		r.s.Enqueue(3, Slot{Len: 1000}, 2)
		var got []WDEvent
		for now := start; now < start+500*ms; now += ms {
			r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
			if now%(10*ms) == 0 {
				got = append(got, poll(r.w, now)...)
			}
		}
		if len(got) != 1 || got[0].Kind != StormDetected || got[0].At != start+200*ms {
			t.Errorf("events %+v", got)
		}
	})

	t.Run("pauses with gaps are not a storm, however often they come", func(t *testing.T) {
		r := newStormRig(t, ActionDrop)
		r.s.Enqueue(3, Slot{Len: 1000}, 2)
		// 0xFFFF quanta at 25 Gbit/s last 1.34 ms; one frame every 1.5 ms
		// leaves a 0.16 ms gap each time: paused 89% of the time.
		for now := int64(0); now < 2000*ms; now += 500_000 {
			if now%(1500_000) == 0 {
				r.rx.ReceivePFC(now, 1<<3, &[8]uint16{3: 0xFFFF})
			}
			if now%(10*ms) == 0 {
				if got := poll(r.w, now); len(got) != 0 {
					t.Fatalf("at %d ms: %+v", now/ms, got)
				}
			}
		}
	})
}
