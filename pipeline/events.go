package pipeline

import (
	"sync/atomic"

	"roce-fwd/qos"
)

// EventKind is a QoS event a worker reports for the control plane to log.
type EventKind uint8

const (
	EventStormDetected    EventKind = iota // the PFC watchdog declared a storm on a TC
	EventStormRestored                     // and ended it
	EventLosslessOverflow                  // a lossless queue hit its limit: PFC failed to hold the sender
)

func (k EventKind) String() string {
	switch k {
	case EventStormDetected:
		return "pfc storm detected"
	case EventStormRestored:
		return "pfc storm restored"
	case EventLosslessOverflow:
		return "lossless queue overflow"
	}
	return "unknown event"
}

// Event is one QoS event on a worker.
type Event struct {
	Kind   EventKind
	Port   uint16
	TC     uint8
	Action qos.WatchdogAction // storms
	At     int64              // unix ns
	Lcore  int                // set by Pipeline.Events
}

// eventRing passes events from a worker (the only writer) to the control
// plane (the only reader) without locks. A full ring drops the event
// and counts it: the counters behind every event are exact regardless.
type eventRing struct {
	buf  [64]Event
	head atomic.Uint64 // next to read
	tail atomic.Uint64 // next to write
	lost atomic.Uint64
}

func (r *eventRing) put(e Event) {
	t := r.tail.Load()
	if t-r.head.Load() >= uint64(len(r.buf)) {
		r.lost.Add(1)
		return
	}
	r.buf[t%uint64(len(r.buf))] = e
	r.tail.Store(t + 1)
}

func (r *eventRing) drain(out []Event) []Event {
	h, t := r.head.Load(), r.tail.Load()
	for ; h < t; h++ {
		out = append(out, r.buf[h%uint64(len(r.buf))])
	}
	r.head.Store(h)
	return out
}

// Events returns the QoS events the workers reported since the last call,
// and how many were lost because nobody read them in time.
func (p *Pipeline) Events() (ev []Event, lost uint64) {
	for _, w := range p.Workers {
		if w.qs == nil {
			continue
		}
		n := len(ev)
		ev = w.qs.events.drain(ev)
		for i := n; i < len(ev); i++ {
			ev[i].Lcore = w.Lcore
		}
		lost += w.qs.events.lost.Swap(0)
	}
	return ev, lost
}
