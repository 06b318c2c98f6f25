package capture

import (
	"encoding/binary"
	"io"
	"slices"
)

// ngWriter writes pcapng (the blocks a capture needs: a section header,
// an interface description per port, an enhanced packet block per packet
// with its comment and direction flags). Blocks are built in place at the
// end of one large buffer, which goes to the sink when it fills: no
// scratch copy, no allocation per packet, and a hand-over per megabyte,
// so the capture writer keeps up with a worker.
type ngWriter struct {
	s     sink
	buf   []byte
	block int // where the block being built starts in buf
	opt   int // where the option being built starts
	err   error
}

// ngFlushAt is the buffered bytes that make a write: a few hundred
// microseconds of a busy capture. ngBufferSize leaves room after it for
// the largest block (a 64 KiB packet and a 64 KiB comment), so a buffer
// never grows (a file sink's buffers are page-aligned memory of its own).
const (
	ngFlushAt    = 1 << 20
	ngBufferSize = ngFlushAt + 1<<18
)

// newNgWriter writes to w, a buffer at a time.
func newNgWriter(w io.Writer) ngWriter {
	return ngWriter{s: writerSink{w}, buf: make([]byte, 0, ngBufferSize)}
}

// ngPacketRoom is the room beginPacket makes sure of beyond a packet's
// data: its comment and options, without growing the buffer.
const ngPacketRoom = 4096

// Block types and option codes (pcapng, IETF draft-ietf-opsawg-pcapng).
const (
	ngSHB = 0x0A0D0D0A
	ngIDB = 0x00000001
	ngEPB = 0x00000006

	optEnd     = 0
	optComment = 1
	optFlags   = 2 // epb_flags
	optIfName  = 2 // if_name
	optIfDesc  = 3 // if_description
	optUserApp = 4 // shb_userappl
	optTSResol = 9 // if_tsresol

	// Direction in epb_flags' low two bits.
	flagInbound  = 1
	flagOutbound = 2

	maxOption = 0xFFFF // an option's length is 16 bits
)

func (n *ngWriter) u16(v uint16) { n.buf = binary.LittleEndian.AppendUint16(n.buf, v) }
func (n *ngWriter) u32(v uint32) { n.buf = binary.LittleEndian.AppendUint32(n.buf, v) }

func (n *ngWriter) pad() {
	n.buf = append(n.buf, make([]byte, -len(n.buf)&3)...)
}

func (n *ngWriter) option(code uint16, v []byte) {
	n.beginOption(code)
	n.buf = append(n.buf, v...)
	n.endOption()
}

// beginOption starts an option whose value the caller appends to n.buf;
// endOption sets its length (cutting a value over 64 KiB) and pads it.
func (n *ngWriter) beginOption(code uint16) {
	n.opt = len(n.buf)
	n.u16(code)
	n.u16(0)
}

func (n *ngWriter) endOption() {
	l := len(n.buf) - n.opt - 4
	if l > maxOption {
		n.buf, l = n.buf[:n.opt+4+maxOption], maxOption
	}
	binary.LittleEndian.PutUint16(n.buf[n.opt+2:], uint16(l))
	n.pad()
}

// begin starts a block of type t; end finishes it (total length at both
// ends) and writes the buffer out when it is full. Blocks start 4-byte
// aligned: every block's length is a multiple of 4.
func (n *ngWriter) begin(t uint32) {
	n.block = len(n.buf)
	n.u32(t)
	n.u32(0) // the length, set by end
}

func (n *ngWriter) end() error {
	n.pad()
	total := uint32(len(n.buf) - n.block + 4)
	binary.LittleEndian.PutUint32(n.buf[n.block+4:], total)
	n.u32(total)
	if len(n.buf) >= ngFlushAt {
		return n.flush()
	}
	return n.err
}

// flush hands what is buffered to the sink. After a write error every
// later call returns it and nothing more is written.
func (n *ngWriter) flush() error {
	if len(n.buf) > 0 && n.err == nil {
		n.buf, n.err = n.s.put(n.buf)
	}
	if n.err != nil {
		n.buf = n.buf[:0]
	}
	return n.err
}

// close writes out what is buffered and ends the sink (closing its file).
func (n *ngWriter) close() error {
	err := n.s.close(n.buf)
	n.buf = nil
	if n.err != nil {
		return n.err
	}
	return err
}

// section writes the section header block.
func (n *ngWriter) section(app, comment string) error {
	n.begin(ngSHB)
	n.u32(0x1A2B3C4D) // byte-order magic
	n.u16(1)
	n.u16(0)
	n.u32(0xFFFFFFFF) // section length: not given
	n.u32(0xFFFFFFFF)
	n.option(optUserApp, []byte(app))
	if comment != "" {
		n.option(optComment, []byte(comment))
	}
	n.option(optEnd, nil)
	return n.end()
}

// iface writes an Ethernet interface description block with nanosecond
// timestamps.
func (n *ngWriter) iface(name, desc string, snaplen uint32) error {
	n.begin(ngIDB)
	n.u16(1) // LINKTYPE_ETHERNET
	n.u16(0)
	n.u32(snaplen)
	n.option(optIfName, []byte(name))
	n.option(optIfDesc, []byte(desc))
	n.option(optTSResol, []byte{9})
	n.option(optEnd, nil)
	return n.end()
}

// beginPacket starts an enhanced packet block: its header and data. The
// caller may add options (a comment built in place between beginOption
// and endOption) before endPacket. The header's words are stored in
// place, not appended one by one: a capture writes millions a second.
func (n *ngWriter) beginPacket(ifc uint32, ns int64, data []byte, origLen uint32) {
	l := len(n.buf)
	p := (len(data) + 3) &^ 3
	if cap(n.buf)-l < 28+p+ngPacketRoom { // never with ngBufferSize buffers: a safeguard
		n.buf = slices.Grow(n.buf, 28+p+ngPacketRoom)
	}
	b := n.buf[l : l+28+p]
	le := binary.LittleEndian
	le.PutUint32(b[24+p:], 0) // the padding; the data and header overwrite the rest
	le.PutUint32(b[0:], ngEPB)
	le.PutUint32(b[8:], ifc)
	le.PutUint32(b[12:], uint32(uint64(ns)>>32))
	le.PutUint32(b[16:], uint32(ns))
	le.PutUint32(b[20:], uint32(len(data)))
	le.PutUint32(b[24:], origLen)
	copy(b[28:], data)
	n.block = l
	n.buf = n.buf[:l+28+p]
}

// endPacket adds the direction flags and ends the block, as end does.
func (n *ngWriter) endPacket(flags uint32) error {
	l := len(n.buf)
	if cap(n.buf)-l < 16 {
		n.buf = slices.Grow(n.buf, 16)
	}
	b := n.buf[l : l+16]
	total := uint32(l + 16 - n.block)
	le := binary.LittleEndian
	le.PutUint32(b[0:], optFlags|4<<16)
	le.PutUint32(b[4:], flags)
	le.PutUint32(b[8:], optEnd)
	le.PutUint32(b[12:], total)
	le.PutUint32(n.buf[n.block+4:], total)
	n.buf = n.buf[:l+16]
	if len(n.buf) >= ngFlushAt {
		return n.flush()
	}
	return n.err
}
