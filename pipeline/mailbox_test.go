package pipeline

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeLoop stands for a worker's loop: it serves the mailbox between
// "polls" until stop, then finishes what it started, as Loop does.
func fakeLoop(w *Worker, serving *atomic.Bool) (stop func()) {
	return fakeLoopCounting(w, serving, new(atomic.Int64))
}

// fakeLoopCounting is fakeLoop counting its polls.
func fakeLoopCounting(w *Worker, serving *atomic.Bool, polls *atomic.Int64) (stop func()) {
	w.looping.Store(true)
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				w.finishMailbox()
				w.looping.Store(false)
				return
			default:
			}
			polls.Add(1)
			if serving == nil || serving.Load() {
				w.serveMailbox()
			}
			time.Sleep(10 * time.Microsecond) // a poll
		}
	}()
	return func() { close(quit); <-done }
}

// chunks returns a job that needs n runs and records them.
func chunks(n int, runs *int) func() bool {
	return func() bool {
		*runs++
		return *runs == n
	}
}

func TestMailboxStoppedWorkerRunsHere(t *testing.T) {
	w := &Worker{Lcore: 3}
	runs := 0
	if err := w.do("copy", chunks(5, &runs)); err != nil || runs != 5 {
		t.Fatalf("err %v, %d runs", err, runs)
	}
}

// A running worker resumes a job across polls: one chunk per serve.
func TestMailboxResumesAcrossPolls(t *testing.T) {
	w := &Worker{Lcore: 3}
	var polls atomic.Int64
	stop := fakeLoopCounting(w, nil, &polls)
	defer stop()
	runs := 0
	last := int64(-1)
	err := w.do("copy", func() bool {
		runs++
		if p := polls.Load(); p == last {
			t.Error("two chunks in one poll")
		} else {
			last = p
		}
		return runs == 20
	})
	if err != nil || runs != 20 {
		t.Fatalf("err %v, %d runs", err, runs)
	}
	if w.box.slot.Load() != nil {
		t.Error("finished job left in the mailbox")
	}
}

// A worker that never takes a job (stuck inside a PMD): the job is
// withdrawn at the deadline and never runs, even once the worker is back.
func TestMailboxTimeoutWithdraws(t *testing.T) {
	defer func(d time.Duration) { ctrlWait = d }(ctrlWait)
	ctrlWait = 20 * time.Millisecond
	w := &Worker{Lcore: 7}
	var serving atomic.Bool
	stop := fakeLoop(w, &serving)
	defer stop()
	ran := false
	err := w.do("new tables", func() bool { ran = true; return true })
	if err == nil || !strings.Contains(err.Error(), "lcore 7 did not take the new tables") {
		t.Fatalf("err %v", err)
	}
	serving.Store(true)
	time.Sleep(5 * time.Millisecond)
	if ran {
		t.Error("a withdrawn job ran")
	}
}

// A worker that started a long job and then stops serving: the job is
// cancelled between chunks and its remaining chunks never run.
func TestMailboxTimeoutCancelsBetweenChunks(t *testing.T) {
	defer func(d time.Duration) { ctrlWait = d }(ctrlWait)
	ctrlWait = 20 * time.Millisecond
	w := &Worker{Lcore: 2}
	var serving atomic.Bool
	serving.Store(true)
	stop := fakeLoop(w, &serving)
	defer stop()
	var runs atomic.Int32
	err := w.do("QP table copy", func() bool {
		if runs.Add(1) == 3 {
			serving.Store(false) // the worker gets stuck after its third chunk
		}
		return false
	})
	if err == nil || !strings.Contains(err.Error(), "did not finish the QP table copy") {
		t.Fatalf("err %v", err)
	}
	n := runs.Load()
	serving.Store(true)
	time.Sleep(5 * time.Millisecond)
	if runs.Load() != n || n < 3 {
		t.Errorf("%d chunks before the cancel, %d after", n, runs.Load())
	}
}

// A worker leaving its loop finishes the job it started; one it had not
// started, the control plane runs itself.
func TestMailboxWorkerStopping(t *testing.T) {
	t.Run("started", func(t *testing.T) {
		w := &Worker{}
		var serving atomic.Bool
		serving.Store(true)
		stop := fakeLoop(w, &serving)
		runs := 0
		go func() {
			time.Sleep(2 * time.Millisecond)
			serving.Store(false)
			stop()
		}()
		if err := w.do("copy", func() bool {
			runs++
			return runs == 1000
		}); err != nil || runs != 1000 {
			t.Fatalf("err %v, %d runs", err, runs)
		}
	})
	t.Run("not started", func(t *testing.T) {
		w := &Worker{}
		var serving atomic.Bool
		stop := fakeLoop(w, &serving)
		go func() {
			time.Sleep(2 * time.Millisecond)
			stop()
		}()
		runs := 0
		if err := w.do("copy", chunks(3, &runs)); err != nil || runs != 3 {
			t.Fatalf("err %v, %d runs", err, runs)
		}
	})
}

// Jobs posted from many goroutines run one at a time.
func TestMailboxOneJobAtATime(t *testing.T) {
	w := &Worker{}
	stop := fakeLoop(w, nil)
	defer stop()
	var inside atomic.Int32
	var wg sync.WaitGroup
	total := 0
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				n := 0
				if err := w.do("counters", func() bool {
					if inside.Add(1) != 1 {
						t.Error("two jobs at once")
					}
					total++
					n++
					inside.Add(-1)
					return n == 2
				}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if total != 8*20*2 {
		t.Errorf("%d runs, want %d", total, 8*20*2)
	}
}
