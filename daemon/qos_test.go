package daemon

import (
	"testing"

	"roce-fwd/pipeline"
	"roce-fwd/qos"
)

// A storm is kept from its detection to its restoration, per port, TC and
// lcore; the log keeps the last 256.
func TestStormLog(t *testing.T) {
	var s stormLog
	ev := func(k pipeline.EventKind, tc uint8, lcore int, at int64) pipeline.Event {
		return pipeline.Event{Kind: k, TC: tc, Lcore: lcore, Action: qos.ActionDrop, At: at}
	}
	s.record(ev(pipeline.EventStormDetected, 3, 1, 100), "in")
	s.record(ev(pipeline.EventStormDetected, 3, 2, 110), "in")
	s.record(ev(pipeline.EventStormDetected, 4, 1, 120), "out")
	s.record(ev(pipeline.EventStormRestored, 3, 2, 300), "in")
	got := s.of("in")
	want := []StormEpisode{{Port: "in", TC: 3, Action: "drop", Lcore: 1, Detected: 100}, {Port: "in", TC: 3, Action: "drop", Lcore: 2, Detected: 110, Restored: 300}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("storms of in: %+v", got)
	}
	for i := range 300 {
		s.record(ev(pipeline.EventStormDetected, 5, 1, int64(1000+i)), "x")
	}
	if x := s.of("x"); len(s.list) != 256 || len(x) != 256 || x[0].Detected != 1044 || x[255].Detected != 1299 {
		t.Errorf("%d kept, %d of x", len(s.list), len(x))
	}
}
