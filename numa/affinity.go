package numa

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ConfineThreads pins every thread of this process except the ones in
// keep to cpus. A dataplane calls it once its worker lcores run, so the Go
// runtime's own threads (scheduler, GC, timers, and those created later,
// which inherit the affinity) never preempt a worker on its CPU, and then
// again now and then for the threads the runtime cloned from a worker's
// own. It returns how many threads it moved: a thread already confined to
// cpus is left as it is.
func ConfineThreads(keep map[int]bool, cpus []int) (int, error) {
	if len(cpus) == 0 {
		return 0, fmt.Errorf("no CPU left for the control plane")
	}
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || keep[tid] {
			continue
		}
		var now unix.CPUSet
		if unix.SchedGetaffinity(tid, &now) == nil && now == set {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			if err == unix.ESRCH {
				continue // the thread ended meanwhile
			}
			return moved, fmt.Errorf("thread %d: sched_setaffinity: %w", tid, err)
		}
		moved++
	}
	return moved, nil
}
