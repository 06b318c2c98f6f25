package daemon

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"

	"roce-fwd/config"
)

// Under systemd (Type=notify) the daemon speaks the notify protocol of
// sd_notify(3) on $NOTIFY_SOCKET: READY=1 once the ports forward, STATUS=
// lines with the forwarding rate, RELOADING=1 and READY=1 around a
// reload, STOPPING=1 at the end, and WATCHDOG=1 every WATCHDOG_USEC/2
// only while every worker lcore keeps polling, so that a worker stuck
// inside a PMD gets the daemon restarted. Workers parked by the console's
// "stop" are not stuck. Without NOTIFY_SOCKET none of it runs, and none
// of it touches the data path: progress is read from the counter
// snapshots the console uses.

// StatusEvery is how often the STATUS= line's rate is refreshed.
const StatusEvery = 5 * time.Second

// sdState holds the notifier while systemd is told about the daemon.
type sdState struct{ n atomic.Pointer[notifier] }

type notifier struct {
	d        *Daemon
	watchdog time.Duration // WATCHDOG_USEC; 0: no watchdog
	failed   atomic.Bool   // a send failed (logged once)
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	stopping bool // STOPPING=1 was sent: nothing more (a reload under way)
}

func (n *notifier) send(state string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopping {
		return
	}
	n.stopping = strings.HasPrefix(state, "STOPPING=1")
	if _, err := sd.SdNotify(false, state); err != nil && !n.failed.Swap(true) {
		n.d.log.Warn("systemd notification not sent", "socket", os.Getenv("NOTIFY_SOCKET"), "err", err)
	}
}

// NotifySystemd sends READY=1 (call it once the ports forward and the
// console listens) and then keeps the STATUS= line and the watchdog
// going. The function it returns sends STOPPING=1; it may be called more
// than once. Without NOTIFY_SOCKET it does nothing.
func (d *Daemon) NotifySystemd() (stopping func()) {
	if os.Getenv("NOTIFY_SOCKET") == "" {
		return func() {}
	}
	wd, err := sd.SdWatchdogEnabled(false)
	if err != nil {
		d.log.Warn("systemd watchdog: WATCHDOG_USEC not understood, not feeding it", "err", err)
	}
	n := &notifier{d: d, watchdog: wd, stop: make(chan struct{}), done: make(chan struct{})}
	first, ok := d.sample()
	if !ok {
		return func() {}
	}
	d.sd.n.Store(n)
	n.send("READY=1\nSTATUS=" + first.state())
	d.log.Info("told systemd the daemon is ready", "watchdog", wd)
	go n.supervise(first)
	var once sync.Once
	return func() {
		once.Do(func() {
			d.sd.n.Store(nil)
			close(n.stop)
			<-n.done
			n.send("STOPPING=1\nSTATUS=stopping")
		})
	}
}

// reloading and reloaded bracket a reload, as Type=notify-reload wants:
// MONOTONIC_USEC says when it began.
func (n *notifier) reloading(file string) {
	n.send("RELOADING=1\n" + sd.SdNotifyMonotonicUsec() + "STATUS=reloading " + file)
}

func (n *notifier) reloaded(changes []config.Change, err error) {
	status := fmt.Sprintf("config reloaded: %d changes", len(changes))
	if err != nil {
		first, _, _ := strings.Cut(err.Error(), "\n")
		status = "config not reloaded: " + first
	}
	n.send("READY=1\nSTATUS=" + status)
}

// sample is what the notifier reads of the daemon on each tick.
type sample struct {
	at      time.Time
	running bool
	polls   map[int]uint64 // per worker lcore: bursts and empty polls
	packets uint64
	drops   uint64
	mode    string
	ports   int
}

func (d *Daemon) sample() (sample, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return sample{}, false
	}
	s := sample{at: time.Now(), running: d.Pipe.Running(), polls: map[int]uint64{},
		mode: d.Cfg.Pipeline.Mode, ports: len(d.Ports.Ports)}
	// A stuck worker does not answer the snapshot: its last copy comes
	// back, a second later, with the same counts.
	for _, l := range d.Pipe.Stats() {
		s.polls[l.Lcore] = l.Bursts + l.EmptyPolls
		s.packets += l.Packets
		for _, n := range l.Drops {
			s.drops += n
		}
	}
	return s, true
}

// state is the STATUS= line before a rate is known.
func (s sample) state() string {
	if !s.running {
		return fmt.Sprintf("forwarding stopped (console stop): %s mode on %d ports", s.mode, s.ports)
	}
	return fmt.Sprintf("forwarding in %s mode on %d ports", s.mode, s.ports)
}

// rate is the STATUS= line for what was forwarded and dropped since prev.
func (s sample) rate(prev sample) string {
	dt := s.at.Sub(prev.at).Seconds()
	if !s.running || !prev.running || dt <= 0 {
		return s.state()
	}
	drops := float64(s.drops - prev.drops)
	fwd := max(float64(s.packets-prev.packets)-drops, 0)
	return fmt.Sprintf("forwarding %.2f Mpps in %s mode on %d ports, %.0f drops/s", fwd/dt/1e6, s.mode, s.ports, drops/dt)
}

// stalled lists the worker lcores whose polls did not advance from prev
// to s while forwarding ran throughout.
func (s sample) stalled(prev sample) []int {
	if !s.running || !prev.running {
		return nil
	}
	var out []int
	for l, n := range s.polls {
		if p, ok := prev.polls[l]; ok && n == p {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// supervise feeds the watchdog while the workers poll and refreshes the
// STATUS= line, until stop.
func (n *notifier) supervise(prev sample) {
	defer close(n.done)
	every := StatusEvery
	if n.watchdog > 0 {
		every = min(every, n.watchdog/2)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	shown := prev // the sample the last rate was measured from
	var stuck []int
	var stuckSince time.Time
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		cur, ok := n.d.sample()
		if !ok {
			return
		}
		select {
		case <-n.stop:
			return
		default:
		}
		now := cur.stalled(prev)
		if len(now) == 0 && n.watchdog > 0 {
			n.send("WATCHDOG=1")
		}
		switch {
		case len(now) > 0 && !slices.Equal(now, stuck):
			if len(stuck) == 0 {
				stuckSince = prev.at
			}
			n.d.log.Error("worker lcores stopped polling: the systemd watchdog is no longer fed", "lcores", now, "since", stuckSince.Format(time.TimeOnly))
			n.send(fmt.Sprintf("STATUS=stuck: lcore %s not polling since %s (the watchdog is not fed)",
				strings.Trim(fmt.Sprint(now), "[]"), stuckSince.Format(time.TimeOnly)))
		case len(now) == 0 && len(stuck) > 0:
			n.d.log.Warn("worker lcores polling again", "lcores", stuck)
			n.send("STATUS=" + cur.state())
			shown = cur
		case len(now) == 0 && (cur.at.Sub(shown.at) >= StatusEvery-every/2 || cur.running != shown.running):
			n.send("STATUS=" + cur.rate(shown))
			shown = cur
		}
		stuck, prev = now, cur
	}
}
