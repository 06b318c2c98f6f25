package qos

import (
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
	// The partner stops pausing at 1000 ms: restored 200 ms after its last
	// frame (999 ms), at the 1200 ms poll.
	evs = r.advance(1000*ms, 1500*ms, 0)
	if len(evs) != 1 || evs[0].Kind != StormRestored || evs[0].At != 1200*ms {
		t.Fatalf("restore events %+v", evs)
	}
	st = r.w.Stats(3)
	// Arrivals at 1000..1200 ms (the one at 1200 precedes that poll) were dropped too.
	if st.InStorm || st.Restored != 1 || st.Dropped != 1001+201 {
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
