package daemon

import (
	"log/slog"
	"time"

	"roce-fwd/pipeline"
)

// stallWatch warns when a worker lcore goes longer than ever before, and
// over 1 ms, without polling its rx queues: for that long a NIC's
// rx ring fills with nobody reading it. Each new longest gap is logged
// once, so a machine that stalls a worker shows a few lines at first and
// then only what is worse; the counts of every stall are in the stats
// (show lcores, rocefwd_lcore_stalls_total).
type stallWatch struct {
	log    *slog.Logger
	warned map[int]time.Duration // lcore -> the longest gap logged
}

// stallWarnBound is the stall bound whose gap the watch logs from
// (StallBounds[2], 1 ms): past what a NIC's ring rides out at line rate.
const stallWarnBound = 2

func newStallWatch(log *slog.Logger) *stallWatch {
	return &stallWatch{log: log, warned: map[int]time.Duration{}}
}

// check logs the workers whose longest gap between polls grew past what
// was logged and past 1 ms.
func (w *stallWatch) check(stats []pipeline.LcoreStats) {
	for _, s := range stats {
		if s.MaxPollGap <= pipeline.StallBounds[stallWarnBound] || s.MaxPollGap <= w.warned[s.Lcore] {
			continue
		}
		w.warned[s.Lcore] = s.MaxPollGap
		w.log.Warn("a worker lcore went longer than ever without polling its rx queues",
			"lcore", s.Lcore, "gap", s.MaxPollGap.Round(time.Microsecond),
			"gaps_over_"+pipeline.StallBoundLabel(stallWarnBound), s.Stalls[stallWarnBound],
			"cause", "its CPU was taken: interrupts (see the IRQ warnings), other tasks (isolcpus=/nohz_full= for the worker CPUs), the hypervisor, or the Go collector (GOGC/GOMEMLIMIT set in the environment?)")
	}
}
