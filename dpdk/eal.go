// Package dpdk is roce-fwd's thin binding to DPDK 22.11 (libdpdk through
// cgo). It is the only package that imports "C", and it imports no other
// roce-fwd package: it is the bottom layer, and callers translate their
// own models into its types (package offload turns flow rules into
// FlowAttr, FlowItem and FlowAction).
//
// Threading model: EAL is initialised once, from a goroutine locked to its
// OS thread, which becomes the main lcore. Calls DPDK documents as
// "main lcore only" (remote launch, wait, cleanup) are sent to that thread
// by OnMain. Worker lcores run Go functions launched with Launch: a C
// trampoline calls back into Go with a runtime/cgo.Handle, so the Go loop
// runs on the pinned EAL thread itself.
//
// The data path crosses into C once per burst (Step.Run); burst arrays and
// step descriptors live in DPDK memory so that no Go pointer is passed to C.
package dpdk

/*
#cgo pkg-config: libdpdk
#cgo CFLAGS: -O3 -Wno-deprecated-declarations
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/cgo"
	"sync"
	"syscall"
	"unsafe"
)

// Error is a failed DPDK call: the operation and DPDK's own reason.
type Error struct {
	Op    string
	Errno int // positive errno
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (errno %d)", e.Op, StrError(e.Errno), e.Errno)
}

// Is lets errors.Is(err, syscall.ENOTSUP) work on DPDK errors.
func (e *Error) Is(target error) bool {
	en, ok := target.(syscall.Errno)
	return ok && int(en) == e.Errno
}

// StrError is rte_strerror: DPDK's text for an errno, including its own codes.
func StrError(errno int) string {
	if errno < 0 {
		errno = -errno
	}
	return C.GoString(C.rte_strerror(C.int(errno)))
}

// errRC turns a DPDK return code (negative errno, or -1 with rte_errno set)
// into an *Error, or nil when rc >= 0.
func errRC(op string, rc C.int) error {
	if rc >= 0 {
		return nil
	}
	errno := int(-rc)
	if rc == -1 {
		if e := int(C.rf_errno()); e != 0 {
			errno = e
		}
	}
	return &Error{Op: op, Errno: errno}
}

var eal struct {
	sync.Mutex
	running bool
	calls   chan func()
	stopped chan struct{}
}

// Init runs rte_eal_init with args (without the program name) on a new
// OS thread locked for the life of the process: that thread is the main
// lcore. It may be called once per process.
func Init(args []string) error {
	eal.Lock()
	defer eal.Unlock()
	if eal.running {
		return errors.New("EAL is already initialised")
	}
	eal.calls = make(chan func())
	eal.stopped = make(chan struct{})
	result := make(chan error)
	go func() {
		// Locked before rte_eal_init pins the thread, so the runtime's
		// template thread (created on the first LockOSThread) is unpinned.
		runtime.LockOSThread()
		argv := cArgv(append([]string{"roce-fwd"}, args...))
		rc := C.rte_eal_init(C.int(len(args)+1), argv)
		if rc < 0 {
			result <- fmt.Errorf("EAL init with args %q: %s", args, StrError(int(C.rf_errno())))
			return // the thread stays locked and ends with the goroutine
		}
		result <- nil
		for f := range eal.calls {
			f()
		}
		close(eal.stopped)
	}()
	if err := <-result; err != nil {
		return err
	}
	eal.running = true
	if err := checkMbufLayout(); err != nil {
		return err
	}
	return nil
}

// cArgv builds a C argv. EAL keeps pointers into it (file prefix and the
// like), so it is never freed.
func cArgv(args []string) **C.char {
	argv := (**C.char)(C.malloc(C.size_t(len(args)+1) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(argv, len(args)+1)
	for i, a := range args {
		s[i] = C.CString(a)
	}
	s[len(args)] = nil
	return argv
}

// Running reports whether EAL is initialised.
func Running() bool {
	eal.Lock()
	defer eal.Unlock()
	return eal.running
}

// OnMain runs f on the main lcore's thread and waits for it.
func OnMain(f func()) {
	done := make(chan struct{})
	eal.calls <- func() { f(); close(done) }
	<-done
}

// Cleanup stops the worker lcores' use of EAL and releases its resources
// (rte_eal_cleanup). Ports must already be closed.
func Cleanup() error {
	eal.Lock()
	defer eal.Unlock()
	if !eal.running {
		return nil
	}
	// EAL unlinks its telemetry socket in an atexit handler, which a Go
	// program's exit does not run: unlink it here, and the runtime
	// directory with it when nothing else is left in it.
	dir := C.GoString(C.rte_eal_get_runtime_dir())
	sock := telemetrySocketIn(dir)
	var rc C.int
	done := make(chan struct{})
	eal.calls <- func() { rc = C.rte_eal_cleanup(); close(done) }
	<-done
	close(eal.calls)
	<-eal.stopped
	eal.running = false
	if sock != "" {
		os.Remove(sock)
	}
	if dir != "" {
		os.Remove(dir) // only if empty: a shared config may still be in use
	}
	return errRC("rte_eal_cleanup", rc)
}

// RuntimeDir is EAL's runtime directory (rte_eal_get_runtime_dir): where
// it keeps its sockets and shared files, <base>/dpdk/<file-prefix>. It is
// "" before Init. EAL leaves the directory behind when it cleans up.
func RuntimeDir() string {
	if !Running() {
		return ""
	}
	return C.GoString(C.rte_eal_get_runtime_dir())
}

// Version is DPDK's version string, e.g. "DPDK 22.11.11".
func Version() string { return C.GoString(C.rte_version()) }

// MainLcore is the lcore id of the control thread.
func MainLcore() int { return int(C.rte_get_main_lcore()) }

// WorkerLcores lists the enabled lcores other than the main one.
func WorkerLcores() []int {
	var ids []int
	for l := C.rte_get_next_lcore(^C.uint(0), 1, 0); l < C.RTE_MAX_LCORE; l = C.rte_get_next_lcore(l, 1, 0) {
		ids = append(ids, int(l))
	}
	return ids
}

// LcoreSocket is the NUMA socket of an lcore.
func LcoreSocket(lcore int) int { return int(C.rte_lcore_to_socket_id(C.uint(lcore))) }

// LcoreCPU is the first CPU an lcore is pinned to, -1 if unknown.
func LcoreCPU(lcore int) int { return int(C.rte_lcore_to_cpu_id(C.int(lcore))) }

// SocketCount is the number of NUMA sockets EAL detected.
func SocketCount() int { return int(C.rte_socket_count()) }

// TSCHz is the TSC frequency EAL measured.
func TSCHz() uint64 { return uint64(C.rf_tsc_hz()) }

// Launch starts fn on a worker lcore (rte_eal_remote_launch).
func Launch(lcore int, fn func()) error {
	h := cgo.NewHandle(fn)
	var rc C.int
	OnMain(func() { rc = C.rf_launch(C.uint(lcore), C.uintptr_t(h)) })
	if rc != 0 {
		h.Delete()
		return errRC(fmt.Sprintf("launch on lcore %d", lcore), rc)
	}
	return nil
}

// Wait blocks until the function on lcore has returned (rte_eal_wait_lcore).
func Wait(lcore int) {
	OnMain(func() { C.rte_eal_wait_lcore(C.uint(lcore)) })
}

// lcoreTIDs records the OS thread of each worker lcore that has run Go
// code, so the control plane can keep its own threads off those CPUs.
var lcoreTIDs sync.Map // lcore id -> tid

// LcoreThreadIDs returns the OS thread ids of the worker lcores that have
// started a launched function, by lcore.
func LcoreThreadIDs() map[int]int {
	out := map[int]int{}
	lcoreTIDs.Range(func(k, v any) bool { out[k.(int)] = v.(int); return true })
	return out
}

//export rfLcoreMain
func rfLcoreMain(h C.uintptr_t) {
	// Locked first, so that a thread the runtime starts while this one
	// runs Go code (to run a goroutine the worker made ready) is cloned
	// from the runtime's template thread, on the control plane's CPUs,
	// not from this one: a clone of an lcore's thread inherits the lcore's
	// CPU and would run control-plane goroutines there, preempting the
	// worker. (Not airtight: the runtime's own entry into Go on this thread
	// comes before the lock. The daemon confines every thread but the
	// workers' to the other CPUs once they run, and again every second,
	// which catches those.)
	runtime.LockOSThread()
	lcoreTIDs.Store(int(C.rte_lcore_id()), syscall.Gettid())
	handle := cgo.Handle(h)
	fn := handle.Value().(func())
	handle.Delete()
	fn()
	runtime.UnlockOSThread()
}
