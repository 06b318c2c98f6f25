// Package capture writes what a pipeline tap takes (pipeline.ArmTap) to
// pcapng files, each packet on its port's interface with its direction
// and a comment carrying its verdict, and keeps packet traces in memory:
// the control plane's side of "capture start" and "trace start". Nothing
// here runs on a worker: a goroutine drains the taps' rings.
package capture

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

// Port names a port of the pipeline for the file's interface blocks.
type Port struct {
	ID   uint16
	Name string
}

// Options is what a capture takes.
type Options struct {
	Tap   pipeline.TapSpec
	File  string
	Ports []Port
	Text  string      // the command or config that started it, for show capture
	TCMap *roce.TCMap // how the verdicts name traffic classes
}

// Status is a capture as show capture reports it.
type Status struct {
	File    string `json:"file"`
	Filter  string `json:"filter"`
	Running bool   `json:"running"`
	Written uint64 `json:"written_packets"`
	Lost    uint64 `json:"lost_packets"` // selected, but the ring was full
	Err     string `json:"error,omitempty"`
}

// Capture is a running (or finished) capture to a pcapng file.
type Capture struct {
	o   Options
	tap *pipeline.Tap

	// The writer goroutine's own: the file's blocks, and by port id the
	// interface index (-1: a port the capture was not told of, such as a
	// kernel TAP) and name.
	w      ngWriter
	intf   []int32
	names  []string
	nameOf func(uint16) string // portName, made once
	vc     verdictCache

	n       uint64        // packets written: the writer goroutine's own
	written atomic.Uint64 // n, published after each read of the tap
	mu      sync.Mutex
	err     error
	stop    chan struct{}
	done    chan struct{}
}

// Start opens the file, arms the tap on p and starts writing.
func Start(p *pipeline.Pipeline, o Options) (*Capture, error) {
	if len(o.Ports) == 0 {
		return nil, errors.New("capture: no ports")
	}
	fs, buf, err := openFileSink(o.File, ngBufferSize)
	if err != nil {
		return nil, fmt.Errorf("capture file: %w", err)
	}
	c := newCapture(o, ngWriter{s: fs, buf: buf})
	err = c.w.section("roce-fwd", o.Text)
	for _, pt := range o.Ports {
		if err == nil {
			err = c.w.iface(pt.Name, fmt.Sprintf("roce-fwd port %d", pt.ID), uint32(o.Tap.Snaplen))
		}
	}
	if err != nil {
		err = fmt.Errorf("capture file: %w", err)
	} else {
		c.tap, err = p.ArmTap(o.Tap)
	}
	if err != nil {
		c.w.close()
		os.Remove(o.File)
		return nil, err
	}
	go c.run()
	return c, nil
}

// newCapture is a capture of o's ports into w, before its header is
// written.
func newCapture(o Options, w ngWriter) *Capture {
	c := &Capture{o: o, w: w, stop: make(chan struct{}), done: make(chan struct{})}
	for i, pt := range o.Ports {
		for int(pt.ID) >= len(c.intf) {
			c.intf = append(c.intf, -1)
			c.names = append(c.names, strconv.Itoa(len(c.names)))
		}
		c.intf[pt.ID], c.names[pt.ID] = int32(i), pt.Name
	}
	c.nameOf = c.portName
	return c
}

// run drains the tap into the file until Stop, the count, or an error.
// The buffer goes to the file sink when a megabyte is buffered, and at
// least every 100 ms while packets come (with direct I/O, up to the last
// whole 4 KiB block).
func (c *Capture) run() {
	defer close(c.done)
	idle := time.NewTicker(time.Millisecond)
	defer idle.Stop()
	last := time.Now()
	for !c.full() && c.w.err == nil {
		select {
		case <-c.stop:
			c.drain()
			return
		default:
		}
		k := c.tap.Read(c.write)
		c.written.Store(c.n)
		if k == 0 {
			if now := time.Now(); now.Sub(last) > 100*time.Millisecond {
				c.w.flush()
				last = now
			}
			select {
			case <-c.stop:
				c.drain()
				return
			case <-idle.C:
			}
		}
	}
	c.tap.Disarm()
	c.finish()
}

// drain takes the tap off the workers, writes what they published before
// and closes the file.
func (c *Capture) drain() {
	c.tap.Disarm()
	c.tap.Read(c.write)
	c.written.Store(c.n)
	c.finish()
}

func (c *Capture) full() bool {
	return c.o.Tap.Count != 0 && c.n >= c.o.Tap.Count
}

// write puts one record in the file (up to the count). Only the writer
// goroutine calls it.
func (c *Capture) write(rec *pipeline.TapRecord) {
	if c.w.err != nil || c.full() {
		return
	}
	port, dir := rec.RxPort, uint32(flagInbound)
	if rec.Dir == pipeline.TapTx {
		port, dir = rec.TxPort, flagOutbound
	}
	i := int32(0) // a port the capture was not told of (a kernel TAP)
	if int(port) < len(c.intf) && c.intf[port] >= 0 {
		i = c.intf[port]
	}
	c.w.beginPacket(uint32(i), rec.NS, rec.Data, rec.Len)
	c.w.beginOption(optComment)
	c.w.buf = appendVerdict(c.w.buf, rec, c.nameOf, c.o.TCMap, &c.vc)
	c.w.endOption()
	if c.w.endPacket(dir) == nil {
		c.n++
	}
}

func (c *Capture) portName(id uint16) string {
	if int(id) < len(c.names) {
		return c.names[id]
	}
	return strconv.Itoa(int(id))
}

// finish writes the file out and closes it.
func (c *Capture) finish() {
	err := c.w.close()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
}

// Stop ends the capture (if the count did not already) and closes the
// file.
func (c *Capture) Stop() Status {
	select {
	case <-c.done:
	default:
		select {
		case c.stop <- struct{}{}:
		case <-c.done:
		}
		<-c.done
	}
	return c.Status()
}

// Status reports the capture's file and counts.
func (c *Capture) Status() Status {
	_, lost := c.tap.Counts()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{File: c.o.File, Filter: c.o.Text, Written: c.written.Load(), Lost: lost}
	select {
	case <-c.done:
	default:
		s.Running = true
	}
	if c.err != nil {
		s.Err = c.err.Error()
	}
	return s
}
