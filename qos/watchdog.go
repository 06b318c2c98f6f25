package qos

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// WatchdogAction is what the PFC watchdog does to a TC in a pause storm.
type WatchdogAction uint8

const (
	ActionDrop    WatchdogAction = iota // ignore pause, flush the queue, drop arrivals (SONiC default)
	ActionForward                       // ignore pause and keep sending
	ActionAlert                         // only count and report
)

var actionNames = [...]string{"drop", "forward", "alert"}

func (a WatchdogAction) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "action-" + strconv.Itoa(int(a))
}

// ParseWatchdogAction reads "drop", "forward" or "alert".
func ParseWatchdogAction(s string) (WatchdogAction, error) {
	for i, n := range actionNames {
		if s == n {
			return WatchdogAction(i), nil
		}
	}
	return 0, errors.New("qos: PFC watchdog action " + strconv.Quote(s) + " is not one of drop, forward, alert")
}

// SONiC pfcwd defaults ("pfcwd start_default").
const (
	DefaultDetectionTime   = 200 * time.Millisecond
	DefaultRestorationTime = 200 * time.Millisecond
)

// WatchdogConfig configures the PFC watchdog of a port's lossless TCs.
type WatchdogConfig struct {
	Enabled         bool
	Action          WatchdogAction
	DetectionTime   time.Duration // 0 = DefaultDetectionTime
	RestorationTime time.Duration // 0 = DefaultRestorationTime
	// Per TC overrides (SONiC's pfcwd is per queue): Off has bit n set
	// when TC n is not watched; TC n's action is TCAction[n] when bit n
	// of TCActionSet is set, Action otherwise.
	Off         uint8
	TCActionSet uint8
	TCAction    [NumTC]WatchdogAction
}

// ActionOf is the action TC tc's storms take.
func (c WatchdogConfig) ActionOf(tc uint8) WatchdogAction {
	if c.TCActionSet&(1<<(tc&7)) != 0 {
		return c.TCAction[tc&7]
	}
	return c.Action
}

// Validate checks the ranges.
func (c WatchdogConfig) Validate() error {
	if err := c.check(); err != nil {
		return fmt.Errorf("qos: %w", err)
	}
	return nil
}

// check is Validate without the package's prefix, for Config.Validate's
// FieldError.
func (c WatchdogConfig) check() error {
	switch {
	case c.Action > ActionAlert:
		return errors.New("unknown PFC watchdog action " + c.Action.String())
	case c.TCActionSet != 0 && slices.ContainsFunc(c.TCAction[:], func(a WatchdogAction) bool { return a > ActionAlert }):
		return errors.New("unknown PFC watchdog action in a per-TC setting")
	case c.DetectionTime < 0 || c.RestorationTime < 0:
		return errors.New("PFC watchdog times must not be negative")
	}
	return nil
}

// WDEventKind says what happened to a TC.
type WDEventKind uint8

const (
	StormDetected WDEventKind = iota + 1
	StormRestored
)

func (k WDEventKind) String() string {
	switch k {
	case StormDetected:
		return "storm-detected"
	case StormRestored:
		return "storm-restored"
	}
	return "event-" + strconv.Itoa(int(k))
}

// WDEvent is one watchdog transition, for the caller to log (one line
// each) and, on StormDetected with ActionDrop, to Flush the queue.
type WDEvent struct {
	Kind   WDEventKind
	TC     uint8
	Action WatchdogAction
	At     int64 // ns
}

// WDStats are one TC's watchdog counters.
type WDStats struct {
	Detected uint64 // storms detected
	Restored uint64 // storms ended
	Dropped  uint64 // packets dropped by ActionDrop: flushed during a storm plus arrivals refused
	InStorm  bool
}

type wdTC struct {
	storm     bool
	flushBase uint64         // Flushed before the storm
	action    WatchdogAction // of the storm in progress
}

// Watchdog is a PFC watchdog for one port, decided on the pause's own
// timestamps rather than on sampled counters. Polled (Poll) at a period
// well under the detection time, it declares a storm on a lossless TC
// that has been paused without a break for DetectionTime while its queue
// holds packets, applies the action, and restores the TC once it has not
// been paused for RestorationTime.
//
// A pause is continuous while each XOFF refreshes it before its quanta
// run out (PFCRx keeps its start); a gap, however short, starts over.
// That avoids the failures of counter-polled watchdogs: a TC paused
// 90% of the time that still drains is not a storm (the gaps break it);
// a storm is restored when the pausing stops, not when the frames stop,
// so an XOFF storm that turns into an XON storm is restored; and a storm
// that goes on is never restored and detected again in a loop.
type Watchdog struct {
	s       *Scheduler
	rx      *PFCRx
	watch   uint8
	action  [NumTC]WatchdogAction // for storms that begin from now on
	detect  int64
	restore int64
	tc      [NumTC]wdTC
	st      [NumTC]WDStats
}

// NewWatchdog watches the lossless TCs of port s, built from c, under
// c.Watchdog; pause state comes from s.PFC(). With the watchdog disabled
// or without PFC it watches nothing.
func NewWatchdog(c *Config, s *Scheduler) (*Watchdog, error) {
	w := &Watchdog{s: s, rx: s.rx}
	if err := w.Reconfigure(c); err != nil {
		return nil, err
	}
	return w, nil
}

// Reconfigure applies c's watchdog settings (c's lossless TCs must be the
// ones the scheduler was built with). A storm in progress keeps the
// action it began with; a TC that stops being watched is restored at once.
func (w *Watchdog) Reconfigure(c *Config) error {
	cfg := c.Watchdog
	if err := cfg.Validate(); err != nil {
		return err
	}
	for i := range NumTC {
		w.action[i] = cfg.ActionOf(uint8(i))
	}
	w.detect = durationNs(cfg.DetectionTime, DefaultDetectionTime)
	w.restore = durationNs(cfg.RestorationTime, DefaultRestorationTime)
	watch := uint8(0)
	if cfg.Enabled && w.rx != nil {
		watch = c.LosslessTCs() &^ cfg.Off
	}
	for i := range NumTC {
		if bit := uint8(1) << i; w.watch&bit != 0 && watch&bit == 0 && w.tc[i].storm {
			w.end(i)
		}
	}
	w.watch = watch
	return nil
}

// Poll advances the watchdog to now, writes the transitions into ev and
// returns how many. A transition that does not fit in ev is left for the
// next Poll, so none goes unreported.
func (w *Watchdog) Poll(now int64, ev []WDEvent) int {
	n := 0
	for i := range NumTC {
		bit := uint8(1) << i
		if w.watch&bit == 0 {
			continue
		}
		st := &w.tc[i]
		since, paused := w.rx.PausedSince(uint8(i), now)
		if !st.storm {
			if paused && now-since >= w.detect && w.s.tc[i].q.n > 0 && n < len(ev) {
				w.begin(i)
				ev[n] = WDEvent{Kind: StormDetected, TC: uint8(i), Action: st.action, At: now}
				n++
			}
			continue
		}
		if !paused && now-w.rx.ResumedAt(uint8(i)) >= w.restore && n < len(ev) {
			w.end(i)
			ev[n] = WDEvent{Kind: StormRestored, TC: uint8(i), Action: st.action, At: now}
			n++
		}
	}
	return n
}

func (w *Watchdog) begin(i int) {
	st := &w.tc[i]
	st.storm = true
	st.action = w.action[i]
	st.flushBase = w.s.tc[i].flushed
	w.st[i].Detected++
	w.st[i].InStorm = true
	bit := uint8(1) << i
	switch st.action {
	case ActionDrop:
		w.s.ignorePause |= bit
		w.s.wdDrop |= bit
	case ActionForward:
		w.s.ignorePause |= bit
	}
}

func (w *Watchdog) end(i int) {
	st := &w.tc[i]
	t := &w.s.tc[i]
	if st.action == ActionDrop {
		w.st[i].Dropped += t.flushed - st.flushBase
	}
	st.storm = false
	w.st[i].Restored++
	w.st[i].InStorm = false
	bit := uint8(1) << i
	w.s.ignorePause &^= bit
	w.s.wdDrop &^= bit
}

// Stats returns TC tc's watchdog counters.
func (w *Watchdog) Stats(tc uint8) WDStats {
	i := tc & 7
	st := w.st[i]
	t := &w.s.tc[i]
	st.Dropped += t.dropWD
	if w.tc[i].storm && w.tc[i].action == ActionDrop {
		st.Dropped += t.flushed - w.tc[i].flushBase
	}
	return st
}

// InStorm has bit n set while TC n is in a storm.
func (w *Watchdog) InStorm() uint8 {
	var m uint8
	for i := range w.tc {
		if w.tc[i].storm {
			m |= 1 << i
		}
	}
	return m
}
