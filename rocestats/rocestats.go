// Package rocestats counts classified frames the way an operator reads a
// RoCE fabric: RoCEv2 against everything else, opcodes, CNPs, ECN
// codepoints, ICRC failures, malformed frames by reason, and PFC/PAUSE
// frames. The dataplane keeps one Counters per port per worker lcore and
// `roce-fwd inspect` one per file, with the same Add, so their figures
// agree by construction.
package rocestats

import (
	"roce-fwd/roce"
)

// Counters for one port (or one capture). Plain fields: one writer.
type Counters struct {
	RoCEBytes   uint64
	OtherBytes  uint64      // of every frame that is not RoCEv2, malformed ones included
	Other       uint64      // well-formed frames that are not RoCEv2
	IPv6        uint64      // RoCEv2 over IPv6
	Opcodes     [256]uint64 // RoCEv2 frames by BTH opcode
	ECN         [4]uint64   // RoCEv2 frames by ECN codepoint: Not-ECT, ECT(1), ECT(0), CE
	ICRCOK      uint64
	ICRCBad     uint64
	Malformed   [roce.NumReasons]uint64 // by reason; ICRC failures are in ICRCBad
	PFC         uint64
	Pause       uint64
	MACCtlOther uint64    // untagged 0x8808 frames that are neither PFC nor PAUSE
	TC          [8]uint64 // every frame by traffic class
}

// Add counts one classified frame of frameLen bytes. What can be derived
// (frames, RoCEv2 frames, bytes, IPv4, CNPs) is derived when read. Only r
// is read, never frame: Classify has sorted PFC and PAUSE frames already
// (r.MACCtl), so a stage that consumes them parses each once.
func (c *Counters) Add(frame []byte, r *roce.Result, frameLen int) {
	switch {
	case r.RoCE && r.Err == roce.ReasonNone:
		c.AddRoCE(r, frameLen)
		return
	case r.Err == roce.ErrBadICRC:
		c.ICRCBad++
		c.AddRoCE(r, frameLen) // r.ICRC is bad: ICRCOK stays
		return
	}
	c.OtherBytes += uint64(frameLen)
	c.TC[r.TC&7]++
	switch {
	case r.Err != roce.ReasonNone:
		c.Malformed[r.Err]++
	case r.MACCtl == roce.MACCtlPFC:
		c.Other++
		c.PFC++
	case r.MACCtl == roce.MACCtlPause:
		c.Other++
		c.Pause++
	case r.MACCtl == roce.MACCtlOther:
		c.Other++
		c.MACCtlOther++
	default:
		c.Other++
	}
}

// AddRoCE is Add for a RoCEv2 frame without error, the per-packet common
// case: small enough for the compiler to inline into the data path's
// loop, where a call would cost as much as the counting.
func (c *Counters) AddRoCE(r *roce.Result, frameLen int) {
	c.RoCEBytes += uint64(frameLen)
	c.TC[r.TC&7]++
	c.Opcodes[r.Opcode]++
	c.ECN[r.ECN&3]++
	if r.ICRC == roce.ICRCOK {
		c.ICRCOK++
	}
	if r.IPVersion == 6 {
		c.IPv6++
	}
}

// RoCE is the RoCEv2 frames: each is counted under its opcode.
func (c *Counters) RoCE() uint64 {
	var n uint64
	for _, v := range c.Opcodes {
		n += v
	}
	return n
}

// Bytes is the bytes of every frame counted.
func (c *Counters) Bytes() uint64 { return c.RoCEBytes + c.OtherBytes }

// Frames is every frame counted: each is RoCEv2, other, or malformed.
func (c *Counters) Frames() uint64 { return c.RoCE() + c.Other + c.MalformedTotal() }

// IPv4 is the RoCEv2 frames over IPv4.
func (c *Counters) IPv4() uint64 { return c.RoCE() - c.IPv6 }

// CNPs is the RoCEv2 congestion notification packets (opcode 0x81).
func (c *Counters) CNPs() uint64 { return c.Opcodes[roce.OpCNP] }

// MalformedTotal is the number of malformed frames of any reason.
func (c *Counters) MalformedTotal() uint64 {
	var n uint64
	for _, v := range c.Malformed {
		n += v
	}
	return n
}

// Merge adds o into c.
func (c *Counters) Merge(o *Counters) { c.each(o, func(a *uint64, b uint64) { *a += b }) }

// Sub takes o's counts away from c: what was counted since o was copied
// from the same counters (the baseline of a "clear").
func (c *Counters) Sub(o *Counters) { c.each(o, func(a *uint64, b uint64) { *a -= b }) }

// each calls f on every counter of c with the same counter of o.
func (c *Counters) each(o *Counters, f func(a *uint64, b uint64)) {
	f(&c.RoCEBytes, o.RoCEBytes)
	f(&c.OtherBytes, o.OtherBytes)
	f(&c.Other, o.Other)
	f(&c.IPv6, o.IPv6)
	for i := range c.Opcodes {
		f(&c.Opcodes[i], o.Opcodes[i])
	}
	for i := range c.ECN {
		f(&c.ECN[i], o.ECN[i])
	}
	f(&c.ICRCOK, o.ICRCOK)
	f(&c.ICRCBad, o.ICRCBad)
	for i := range c.Malformed {
		f(&c.Malformed[i], o.Malformed[i])
	}
	f(&c.PFC, o.PFC)
	f(&c.Pause, o.Pause)
	f(&c.MACCtlOther, o.MACCtlOther)
	for i := range c.TC {
		f(&c.TC[i], o.TC[i])
	}
}

// ECNNames name the ECN codepoints.
var ECNNames = [4]string{"not_ect", "ect1", "ect0", "ce"}
