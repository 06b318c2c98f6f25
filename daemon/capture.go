package daemon

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"roce-fwd/capture"
	"roce-fwd/dpdk"
	"roce-fwd/pipeline"
)

// taps are the daemon's capture and trace, at most one of each.
type taps struct {
	capture *capture.Capture
	trace   *capture.Trace
}

// portID resolves a port name or number.
func (d *Daemon) portID(s string) (uint16, error) {
	for _, p := range d.Ports.Ports {
		if p.Name == s || strconv.Itoa(int(p.ID)) == s {
			return uint16(p.ID), nil
		}
	}
	var names []string
	for _, p := range d.Ports.Ports {
		names = append(names, fmt.Sprintf("%d (%s)", p.ID, p.Name))
	}
	return 0, fmt.Errorf("port %q: not a port (%s)", s, strings.Join(names, ", "))
}

func (d *Daemon) portName(id uint16) string {
	for _, p := range d.Ports.Ports {
		if uint16(p.ID) == id {
			return p.Name
		}
	}
	return strconv.Itoa(int(id))
}

// tapSpec turns the words after "capture start" or "trace start" into a
// tap's spec, the BPF expression compiled.
func (d *Daemon) tapSpec(words []string, trace bool) (capture.Request, pipeline.TapSpec, error) {
	r, err := capture.ParseArgs(words, trace, d.portID)
	if err != nil {
		return r, pipeline.TapSpec{}, err
	}
	// 16384 packets per worker; their bytes, packed, in up to 32 MiB
	// (pipeline.ArmTap sizes it from the snaplen).
	spec := pipeline.TapSpec{Filter: r.Filter, Snaplen: r.Snaplen, Count: r.Count, Slots: 1 << 14}
	if r.BPF != "" {
		if spec.Filter.BPF, err = dpdk.CompileBPF(r.BPF, 262144); err != nil {
			return r, spec, err
		}
	}
	return r, spec, nil
}

// StartCapture starts "capture start" with the given words.
func (d *Daemon) StartCapture(words []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.startCapture(words)
}

func (d *Daemon) startCapture(words []string) error {
	if d.Pipe == nil {
		return errors.New("not forwarding")
	}
	if d.taps.capture != nil && d.taps.capture.Status().Running {
		return fmt.Errorf("a capture to %s is running: capture stop first", d.taps.capture.Status().File)
	}
	r, spec, err := d.tapSpec(words, false)
	if err != nil {
		return err
	}
	var ps []capture.Port
	for _, p := range d.Ports.Ports {
		ps = append(ps, capture.Port{ID: uint16(p.ID), Name: p.Name})
	}
	m := d.Pipe.Spec.RoCE.TCMap
	c, err := capture.Start(d.Pipe, capture.Options{Tap: spec, File: r.File, Ports: ps, Text: strings.Join(words, " "), TCMap: &m})
	if err != nil {
		return err
	}
	d.taps.capture = c
	d.log.Info("capture started", "file", r.File, "args", strings.Join(words, " "))
	return nil
}

// StopCapture ends the capture and reports it.
func (d *Daemon) StopCapture() (capture.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taps.capture == nil {
		return capture.Status{}, errors.New("no capture")
	}
	st := d.taps.capture.Stop()
	d.log.Info("capture stopped", "file", st.File, "written", st.Written, "lost", st.Lost)
	return st, nil
}

// CaptureStatus reports the capture, if any.
func (d *Daemon) CaptureStatus() (capture.Status, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taps.capture == nil {
		return capture.Status{}, false
	}
	return d.taps.capture.Status(), true
}

// StartTrace starts "trace start" with the given words; it replaces the
// previous trace.
func (d *Daemon) StartTrace(words []string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return errors.New("not forwarding")
	}
	_, spec, err := d.tapSpec(words, true)
	if err != nil {
		return err
	}
	if d.taps.trace != nil {
		d.taps.trace.Stop()
	}
	m := d.Pipe.Spec.RoCE.TCMap
	text := strings.Join(append([]string{"trace start"}, words...), " ")
	t, err := capture.StartTrace(d.Pipe, spec, text, d.portName, &m)
	if err != nil {
		return err
	}
	d.taps.trace = t
	return nil
}

// StopTrace stops taking packets; ClearTrace forgets them.
func (d *Daemon) StopTrace() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taps.trace == nil {
		return errors.New("no trace")
	}
	d.taps.trace.Stop()
	return nil
}

func (d *Daemon) ClearTrace() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taps.trace != nil {
		d.taps.trace.Stop()
		d.taps.trace = nil
	}
}

// Trace is the current trace, or nil.
func (d *Daemon) Trace() *capture.Trace {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.taps.trace
}

// stopTaps ends the capture and trace before the pipeline goes.
func (d *Daemon) stopTaps() {
	if d.taps.capture != nil {
		if st := d.taps.capture.Status(); st.Running {
			st = d.taps.capture.Stop()
			d.log.Info("capture stopped", "file", st.File, "written", st.Written, "lost", st.Lost)
		}
	}
	if d.taps.trace != nil {
		d.taps.trace.Stop()
	}
}
