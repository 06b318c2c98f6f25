package roce_test

import (
	"runtime"
	"syscall"
	"testing"
)

// cpuTimer reports thread CPU time per op next to wall time: this machine
// is shared, and wall time counts the time other processes hold the core.
type cpuTimer struct{ start int64 }

func threadCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func startCPU(b *testing.B) *cpuTimer {
	runtime.LockOSThread()
	b.ResetTimer()
	return &cpuTimer{start: threadCPU()}
}

func (c *cpuTimer) stop(b *testing.B) {
	d := threadCPU() - c.start
	runtime.UnlockOSThread()
	b.ReportMetric(float64(d)/float64(b.N), "cpu-ns/op")
}
