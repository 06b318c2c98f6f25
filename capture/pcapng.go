package capture

import (
	"bufio"
	"encoding/binary"
)

// ngWriter writes pcapng (the blocks a capture needs: a section header,
// an interface description per port, an enhanced packet block per packet
// with its comment and direction flags) into a buffered writer, reusing
// one scratch buffer: no allocation per packet, which the capture writer
// needs to keep up with a worker.
type ngWriter struct {
	w   *bufio.Writer
	buf []byte
}

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
)

func (n *ngWriter) u16(v uint16) { n.buf = binary.LittleEndian.AppendUint16(n.buf, v) }
func (n *ngWriter) u32(v uint32) { n.buf = binary.LittleEndian.AppendUint32(n.buf, v) }

func (n *ngWriter) pad() {
	for len(n.buf)%4 != 0 {
		n.buf = append(n.buf, 0)
	}
}

func (n *ngWriter) option(code uint16, v []byte) {
	n.u16(code)
	n.u16(uint16(len(v)))
	n.buf = append(n.buf, v...)
	n.pad()
}

// begin starts a block of type t in the scratch buffer; end finishes it
// (total length at both ends) and writes it.
func (n *ngWriter) begin(t uint32) {
	n.buf = n.buf[:0]
	n.u32(t)
	n.u32(0) // the length, set by end
}

func (n *ngWriter) end() error {
	n.pad()
	total := uint32(len(n.buf) + 4)
	binary.LittleEndian.PutUint32(n.buf[4:], total)
	n.u32(total)
	_, err := n.w.Write(n.buf)
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

// packet writes an enhanced packet block.
func (n *ngWriter) packet(ifc uint32, ns int64, data []byte, origLen uint32, flags uint32, comment []byte) error {
	n.begin(ngEPB)
	n.u32(ifc)
	n.u32(uint32(uint64(ns) >> 32))
	n.u32(uint32(ns))
	n.u32(uint32(len(data)))
	n.u32(origLen)
	n.buf = append(n.buf, data...)
	n.pad()
	if len(comment) > 0xFFFF {
		comment = comment[:0xFFFF]
	}
	n.option(optComment, comment)
	n.u16(optFlags)
	n.u16(4)
	n.u32(flags)
	n.option(optEnd, nil)
	return n.end()
}
