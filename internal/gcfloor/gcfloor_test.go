package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

var sink []byte

// churn allocates n bytes of garbage in 64 KiB pieces and returns how
// many collections ran meanwhile.
func churn(n int) uint32 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for range n / (64 << 10) {
		sink = make([]byte, 64<<10)
	}
	sink = nil
	runtime.ReadMemStats(&ms)
	return ms.NumGC - before
}

// waitMoves waits until a collection after the call has moved the limit.
func waitMoves(t *testing.T, after int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, moves := Limit(); moves > after {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no collection moved the limit")
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

// With the floor, 32 MiB of garbage on a heap of a few megabytes runs
// the collector at most once; without it, GOGC=100 runs it many times.
func TestFloorSpacesCollections(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	runtime.GC()
	if !Set(64 << 20) {
		t.Fatal("the floor was not set")
	}
	_, moves := Limit()
	runtime.GC()
	waitMoves(t, moves)
	with := churn(32 << 20)
	Undo()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after Undo: %d, want 100", got)
	}
	runtime.GC()
	goal := heapGoal()
	without := churn(32 << 20)
	t.Logf("collections during 32 MiB of garbage: %d with the floor, %d without (heap goal %d KiB)", with, without, goal>>10)
	if with > 1 {
		t.Errorf("%d collections with a 64 MiB floor", with)
	}
	// The comparison's premise, read from the runtime rather than
	// counted: without the floor the collector's goal is a fraction of
	// the garbage. (A count of cycles falls on a loaded machine, where
	// the collector's workers get little CPU and a cycle ends late.)
	if goal > 16<<20 {
		t.Errorf("heap goal %d MiB without the floor: the comparison shows nothing", goal>>20)
	}
}

// heapGoal is the heap size at which the collector starts its next cycle.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// A live heap above the floor is paced by GOGC: the limit moves to about
// twice it after a collection, and garbage does not make the collector
// run back to back.
func TestFloorFollowsALargeHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if !Set(16 << 20) {
		t.Fatal("the floor was not set")
	}
	defer Undo()
	live := make([][]byte, 0, 1024)
	for range 48 << 4 { // 48 MiB in 64 KiB pieces
		live = append(live, make([]byte, 64<<10))
	}
	_, moves := Limit()
	runtime.GC()
	waitMoves(t, moves)
	limit, _ := Limit()
	if got := debug.SetMemoryLimit(-1); got != limit {
		t.Errorf("the runtime's memory limit is %d, the floor set %d", got, limit)
	}
	if limit < 96<<20 {
		t.Errorf("limit %d MiB with 48 MiB live: GOGC=100 wants about 96 at least", limit>>20)
	}
	if n := churn(32 << 20); n > 2 {
		t.Errorf("%d collections for 32 MiB of garbage with 48 MiB live", n)
	}
	runtime.KeepAlive(live)
}

// The user's GOGC or GOMEMLIMIT wins.
func TestEnvironmentWins(t *testing.T) {
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv("GOGC", "")
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv(env, "200")
			if Set(64 << 20) {
				Undo()
				t.Fatalf("the floor was set with %s in the environment", env)
			}
			if limit, _ := Limit(); limit != 0 {
				t.Errorf("limit %d", limit)
			}
		})
	}
}
