package dpdk

import (
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A thread the runtime starts while a worker lcore runs Go code must not
// be a clone of the lcore's thread: it would inherit the lcore's CPU, and
// the goroutines it runs later would preempt the worker there. The worker
// here makes goroutines ready that block in system calls, so that the
// runtime needs threads it has not got, and starts them from the worker's
// thread unless that thread is locked.
func TestLcoreThreadsStayOnLcore(t *testing.T) {
	cpu := LcoreCPU(1)
	if cpu < 0 {
		t.Skip("lcore 1 is not pinned to a CPU")
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(8)) // idle Ps to wake threads for
	tid := make(chan int, 1)
	err := Launch(1, func() {
		tid <- unix.Gettid()
		var wg sync.WaitGroup
		for range 4 {
			for range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ts := unix.Timespec{Nsec: 20e6}
					unix.Nanosleep(&ts, nil)
				}()
			}
			wg.Wait()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	Wait(1)
	worker := <-tid
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		id, err := strconv.Atoi(e.Name())
		if err != nil || id == worker {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(id, &set); err != nil {
			continue // the thread ended meanwhile
		}
		if set.Count() == 1 && set.IsSet(cpu) {
			comm, _ := os.ReadFile("/proc/self/task/" + e.Name() + "/comm")
			t.Errorf("thread %d (%q) is pinned to lcore 1's CPU %d, like the lcore's own thread", id, comm, cpu)
		}
	}
}
