package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"roce-fwd/pipeline"
)

// The watch logs a worker's longest gap between polls once it passes
// 1 ms, and again only when a longer one comes.
func TestStallWatch(t *testing.T) {
	var logs bytes.Buffer
	w := newStallWatch(slog.New(slog.NewTextHandler(&logs, nil)))
	at := func(lcore int, gap time.Duration, over1ms uint64) pipeline.LcoreStats {
		s := pipeline.LcoreStats{Lcore: lcore, MaxPollGap: gap}
		s.Stalls[2] = over1ms
		return s
	}
	w.check([]pipeline.LcoreStats{at(1, 400*time.Microsecond, 0), at(2, 900*time.Microsecond, 0)})
	if logs.Len() != 0 {
		t.Fatalf("gaps under 1 ms logged: %s", logs.String())
	}
	w.check([]pipeline.LcoreStats{at(1, 3*time.Millisecond, 2), at(2, 900*time.Microsecond, 0)})
	got := logs.String()
	for _, s := range []string{"level=WARN", "lcore=1", "gap=3ms", "gaps_over_1ms=2", "isolcpus"} {
		if !strings.Contains(got, s) {
			t.Errorf("warning %q lacks %q", got, s)
		}
	}
	if strings.Contains(got, "lcore=2") {
		t.Errorf("lcore 2 never went 1 ms without polling: %s", got)
	}
	logs.Reset()
	w.check([]pipeline.LcoreStats{at(1, 3*time.Millisecond, 5)})
	if logs.Len() != 0 {
		t.Errorf("the same longest gap logged again: %s", logs.String())
	}
	w.check([]pipeline.LcoreStats{at(1, 7500*time.Microsecond, 6)})
	if got := logs.String(); strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "gap=7.5ms") {
		t.Errorf("a longer gap: want one warning with it: %s", got)
	}
}
