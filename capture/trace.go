package capture

import (
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

// traceBytes is how many of a packet's first bytes a trace shows.
const traceBytes = 64

// Trace keeps the first Count packets a tap selects, with their verdicts,
// for show trace.
type Trace struct {
	tap   *pipeline.Tap
	name  func(uint16) string
	m     *roce.TCMap
	text  string
	mu    sync.Mutex
	recs  []TraceRecord
	count uint64
	stop  chan struct{}
	done  chan struct{}
}

// TraceRecord is one traced packet.
type TraceRecord struct {
	Time    time.Time `json:"time"`
	Dir     string    `json:"dir"`
	Verdict string    `json:"verdict"`
	Len     uint32    `json:"len"`
	Hex     string    `json:"hex"` // the first bytes
}

// StartTrace arms a tap for r on p (its count bounds the trace).
func StartTrace(p *pipeline.Pipeline, spec pipeline.TapSpec, text string, name func(uint16) string, m *roce.TCMap) (*Trace, error) {
	if spec.Count == 0 {
		return nil, fmt.Errorf("a trace needs a count")
	}
	tp, err := p.ArmTap(spec)
	if err != nil {
		return nil, err
	}
	t := &Trace{tap: tp, name: name, m: m, text: text, count: spec.Count, stop: make(chan struct{}), done: make(chan struct{})}
	go t.run()
	return t, nil
}

func (t *Trace) run() {
	defer close(t.done)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		t.tap.Read(t.keep)
		t.mu.Lock()
		full := uint64(len(t.recs)) >= t.count
		t.mu.Unlock()
		if full {
			break
		}
		select { // a trace's count is small: a tick between reads is soon enough
		case <-t.stop:
			t.tap.Disarm()
			t.tap.Read(t.keep)
			return
		case <-tick.C:
		}
	}
	t.tap.Disarm()
}

func (t *Trace) keep(rec *pipeline.TapRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uint64(len(t.recs)) >= t.count {
		return
	}
	t.recs = append(t.recs, TraceRecord{Time: time.Unix(0, rec.NS).UTC(), Dir: rec.Dir.String(),
		Verdict: Verdict(rec, t.name, t.m), Len: rec.Len, Hex: hex.EncodeToString(rec.Data[:min(len(rec.Data), traceBytes)])})
}

// Stop disarms the trace; what it kept stays for Records.
func (t *Trace) Stop() {
	select {
	case <-t.done:
		return
	default:
	}
	select {
	case t.stop <- struct{}{}:
	case <-t.done:
	}
	<-t.done
}

// Running reports whether the trace still takes packets.
func (t *Trace) Running() bool {
	select {
	case <-t.done:
		return false
	default:
		return true
	}
}

// Records is what the trace kept so far, in the order read.
func (t *Trace) Records() []TraceRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceRecord(nil), t.recs...)
}

// Text is show trace's output.
func (t *Trace) Text() string {
	recs := t.Records()
	_, lost := t.tap.Counts()
	var b strings.Builder
	state := "stopped"
	if t.Running() {
		state = "running"
	}
	fmt.Fprintf(&b, "trace (%s): %s; %d of %d packets", state, t.text, len(recs), t.count)
	if lost > 0 {
		fmt.Fprintf(&b, ", %d not kept (its ring was full)", lost)
	}
	b.WriteString("\n")
	for i, r := range recs {
		fmt.Fprintf(&b, "\n#%d %s %d bytes\n  %s\n", i+1, r.Time.Format("15:04:05.000000000"), r.Len, r.Verdict)
		for off := 0; off < len(r.Hex); off += 32 {
			fmt.Fprintf(&b, "  %04x  %s\n", off/2, spaced(r.Hex[off:min(off+32, len(r.Hex))]))
		}
	}
	return b.String()
}

func spaced(h string) string {
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}
