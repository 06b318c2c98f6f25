package pipeline

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The control plane reaches a worker's state one way: it posts a job to
// the worker's mailbox, and the worker runs it between two polls; while
// the worker is not looping, the control plane runs the job itself. A job
// that returns false has more to do and runs again after the next poll:
// a large copy goes a chunk per poll, so the rx rings never wait long.
// Jobs of one worker run one at a time. Counter snapshots, QP table copies
// and resets, table swaps and flow rule installs all go through it.
//
// The worker pays one atomic load per poll.

// job is one piece of control-plane work for a worker.
type job struct {
	run   func() bool // true: finished
	state atomic.Uint32
}

// A job's states. Only the worker moves a job out of jobRunning; only
// the control plane withdraws or cancels one, and never while it runs, so
// a job's memory is never written after the control plane gave up on it.
const (
	jobPosted    uint32 = iota // waiting for the worker
	jobRunning                 // the worker is inside run
	jobPartial                 // run returned false: more after the next poll
	jobDone                    // run returned true
	jobWithdrawn               // taken back before the worker started it
	jobCancelled               // given up between two runs
)

// mailbox holds the job posted to a worker, if any.
type mailbox struct {
	mu   sync.Mutex // one job at a time, and no job while a worker starts
	slot atomic.Pointer[job]
}

// ctrlWait is how long the control plane waits for a running worker to
// finish a job: a worker takes a job after its current poll, so only one
// stuck inside a PMD misses it.
var ctrlWait = time.Second

// serveMailbox runs (or continues) the posted job; the worker calls it
// between two polls.
func (w *Worker) serveMailbox() {
	j := w.box.slot.Load()
	if j == nil {
		return
	}
	s := j.state.Load()
	if s != jobPosted && s != jobPartial || !j.state.CompareAndSwap(s, jobRunning) {
		return
	}
	if j.run() {
		j.state.Store(jobDone)
	} else {
		j.state.Store(jobPartial)
	}
}

// finishMailbox completes a job the worker has started, when it leaves
// its loop: the control plane then never sees a half-done job of a
// stopped worker. A job not yet started is left to the control plane.
func (w *Worker) finishMailbox() {
	j := w.box.slot.Load()
	if j == nil || !j.state.CompareAndSwap(jobPartial, jobRunning) {
		return
	}
	for !j.run() {
	}
	j.state.Store(jobDone)
}

// do runs fn, repeatedly until it returns true, against w's state: on
// w's lcore between polls while w runs, else on the calling goroutine.
// The error says what a running worker did not finish within ctrlWait;
// fn's effects are then partial (a copy) or absent (withdrawn).
func (w *Worker) do(what string, fn func() bool) error {
	b := &w.box
	b.mu.Lock()
	defer b.mu.Unlock()
	if !w.looping.Load() {
		for !fn() {
		}
		return nil
	}
	j := &job{run: fn}
	b.slot.Store(j)
	defer b.slot.Store(nil)
	deadline := time.Now().Add(ctrlWait)
	for {
		s := j.state.Load()
		late := time.Now().After(deadline)
		switch {
		case s == jobDone:
			return nil
		case s == jobPosted && !w.looping.Load():
			// The worker left its loop without taking it.
			if j.state.CompareAndSwap(jobPosted, jobWithdrawn) {
				for !fn() {
				}
				return nil
			}
		case s == jobPosted && late:
			if j.state.CompareAndSwap(jobPosted, jobWithdrawn) {
				return fmt.Errorf("lcore %d did not take the %s within %v", w.Lcore, what, ctrlWait)
			}
		case s == jobPartial && late:
			if j.state.CompareAndSwap(jobPartial, jobCancelled) {
				return fmt.Errorf("lcore %d did not finish the %s within %v", w.Lcore, what, ctrlWait)
			}
		}
		time.Sleep(20 * time.Microsecond)
	}
}
