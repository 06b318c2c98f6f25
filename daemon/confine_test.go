package daemon

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestKeepConfined: a thread that appears on a worker's CPU after the
// threads were confined (as a clone of a worker's thread does) is moved
// off it by the loop, and a pass with nothing to move moves nothing.
func TestKeepConfined(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	const worker = 1 // the CPU treated as a worker's
	restore := affinities(t)
	defer restore()

	// A thread of its own, pinned to the worker's CPU alone.
	tid, stray := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set unix.CPUSet
		set.Set(worker)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
		}
		tid <- unix.Gettid()
		<-stray
	}()
	id := <-tid
	defer close(stray)

	d := &Daemon{log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	var loop periodic
	loop.start(10*time.Millisecond, func() { d.confineAgain(map[int]bool{}, []int{0}) }, nil)
	defer loop.halt()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(id, &set); err != nil {
			t.Fatal(err)
		}
		if !set.IsSet(worker) && set.IsSet(0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still on CPUs %v after 10 s of the loop", id, set)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// affinities records every thread's CPUs, and returns what puts them
// back (threads started since get every CPU).
func affinities(t *testing.T) func() {
	t.Helper()
	was := map[int]unix.CPUSet{}
	for _, id := range taskIDs(t) {
		var set unix.CPUSet
		if unix.SchedGetaffinity(id, &set) == nil {
			was[id] = set
		}
	}
	return func() {
		var all unix.CPUSet
		for c := range runtime.NumCPU() {
			all.Set(c)
		}
		for _, id := range taskIDs(t) {
			set, ok := was[id]
			if !ok {
				set = all
			}
			unix.SchedSetaffinity(id, &set)
		}
	}
}

func taskIDs(t *testing.T) []int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}
