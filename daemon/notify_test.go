package daemon

import (
	"testing"
	"time"
)

// What the notifier makes of two samples: the lcores whose polls did not
// advance while forwarding ran, and the STATUS= line.
func TestNotifySamples(t *testing.T) {
	t0 := time.Unix(1000, 0)
	prev := sample{at: t0, running: true, polls: map[int]uint64{1: 10, 2: 20, 3: 30}, packets: 1e6, drops: 100, mode: "roce", ports: 2}
	cur := sample{at: t0.Add(2 * time.Second), running: true, polls: map[int]uint64{1: 11, 2: 20, 3: 30}, packets: 25e6 + 1e6, drops: 100 + 2*400, mode: "roce", ports: 2}
	if got := cur.stalled(prev); len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("stalled %v, want [2 3]", got)
	}
	if got, want := cur.rate(prev), "forwarding 12.50 Mpps in roce mode on 2 ports, 400 drops/s"; got != want {
		t.Errorf("rate %q, want %q", got, want)
	}
	// Parked by the console's stop (before or now): not stuck.
	for _, c := range []struct{ prev, cur bool }{{false, true}, {true, false}, {false, false}} {
		p, s := prev, cur
		p.running, s.running = c.prev, c.cur
		if got := s.stalled(p); got != nil {
			t.Errorf("running %v then %v: stalled %v", c.prev, c.cur, got)
		}
	}
	cur.running = false
	if got, want := cur.rate(prev), "forwarding stopped (console stop): roce mode on 2 ports"; got != want {
		t.Errorf("stopped: %q, want %q", got, want)
	}
	// More drops than packets in an interval (queued earlier): no negative rate.
	cur = prev
	cur.at, cur.drops = t0.Add(time.Second), prev.drops+10
	if got, want := cur.rate(prev), "forwarding 0.00 Mpps in roce mode on 2 ports, 10 drops/s"; got != want {
		t.Errorf("rate %q, want %q", got, want)
	}
}
