// Package capture writes what a pipeline tap takes (pipeline.ArmTap) to
// pcapng files, each packet on its port's interface with its direction
// and a comment carrying its verdict, and keeps packet traces in memory:
// the control plane's side of "capture start" and "trace start". Nothing
// here runs on a worker: a goroutine drains the taps' rings.
package capture

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
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
	o    Options
	tap  *pipeline.Tap
	f    *os.File
	bw   *bufio.Writer
	w    ngWriter
	intf map[uint16]int // port id → interface index
	name map[uint16]string
	cmt  []byte // the verdict being written

	mu      sync.Mutex
	written uint64
	err     error
	stop    chan struct{}
	done    chan struct{}
}

// Start opens the file, arms the tap on p and starts writing.
func Start(p *pipeline.Pipeline, o Options) (*Capture, error) {
	if len(o.Ports) == 0 {
		return nil, errors.New("capture: no ports")
	}
	f, err := os.OpenFile(o.File, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("capture file: %w", err)
	}
	c := &Capture{o: o, f: f, bw: bufio.NewWriterSize(f, 1<<20), intf: map[uint16]int{}, name: map[uint16]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	c.w.w = c.bw
	err = c.w.section("roce-fwd", o.Text)
	for i, pt := range o.Ports {
		if err == nil {
			err = c.w.iface(pt.Name, fmt.Sprintf("roce-fwd port %d", pt.ID), uint32(o.Tap.Snaplen))
		}
		c.intf[pt.ID], c.name[pt.ID] = i, pt.Name
	}
	if err != nil {
		f.Close()
		os.Remove(o.File)
		return nil, fmt.Errorf("capture file: %w", err)
	}
	if c.tap, err = p.ArmTap(o.Tap); err != nil {
		f.Close()
		os.Remove(o.File)
		return nil, err
	}
	go c.run()
	return c, nil
}

// run drains the tap into the file until Stop, the count, or an error.
func (c *Capture) run() {
	defer close(c.done)
	idle := time.NewTicker(time.Millisecond)
	defer idle.Stop()
	for !c.full() && !c.failed() {
		select {
		case <-c.stop:
			c.tap.Disarm()
			c.tap.Read(c.write) // what the workers published before
			c.finish()
			return
		default:
		}
		if c.tap.Read(c.write) == 0 {
			select {
			case <-c.stop:
				c.tap.Disarm()
				c.tap.Read(c.write)
				c.finish()
				return
			case <-idle.C:
			}
		}
	}
	c.tap.Disarm()
	c.finish()
}

func (c *Capture) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.o.Tap.Count != 0 && c.written >= c.o.Tap.Count
}

func (c *Capture) failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err != nil
}

// write puts one record in the file (up to the count).
func (c *Capture) write(rec *pipeline.TapRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.o.Tap.Count != 0 && c.written >= c.o.Tap.Count {
		return
	}
	port, dir := rec.RxPort, uint32(flagInbound)
	if rec.Dir == pipeline.TapTx {
		port, dir = rec.TxPort, flagOutbound
	}
	i, ok := c.intf[port]
	if !ok {
		i = 0 // a port the capture was not told of (a kernel TAP)
	}
	c.cmt = AppendVerdict(c.cmt[:0], rec, c.portName, c.o.TCMap)
	if err := c.w.packet(uint32(i), rec.NS, rec.Data, rec.Len, dir, c.cmt); err != nil {
		c.err = err
		return
	}
	c.written++
}

func (c *Capture) portName(id uint16) string {
	if n, ok := c.name[id]; ok {
		return n
	}
	return strconv.Itoa(int(id))
}

// finish writes the file out and closes it.
func (c *Capture) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.bw.Flush()
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if c.err == nil {
		c.err = err
	}
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
	s := Status{File: c.o.File, Filter: c.o.Text, Written: c.written, Lost: lost}
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
