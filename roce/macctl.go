package roce

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// MAC control opcodes.
const (
	MACControlPause = 0x0001 // 802.3x PAUSE
	MACControlPFC   = 0x0101 // 802.1Qbb priority-based flow control
)

// MACControlDst is the reserved multicast address PAUSE and PFC frames go
// to; bridges never forward it.
var MACControlDst = MAC{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

// MAC control field offsets, counted from the end of the Ethernet header
// (the byte after EtherType 0x8808).
const (
	MACControlOpcodeOffset = 0
	PauseQuantaOffset      = 2
	// PFCClassEnableOffset is a 16-bit field: a reserved byte, then the
	// class-enable vector.
	PFCClassEnableOffset = 2
	PFCQuantaOffset      = 4 // 8 x 16 bits, priority 0 first
)

const (
	pauseLen = PauseQuantaOffset + 2 // opcode + quanta
	pfcLen   = PFCQuantaOffset + 16  // opcode + class-enable vector + 8 quanta
)

// MACControl is a view of a MAC control payload: what follows EtherType
// 0x8808.
type MACControl []byte

func (b MACControl) Opcode() uint16 { return binary.BigEndian.Uint16(b[MACControlOpcodeOffset:]) }

// PauseQuanta is the PAUSE time in units of 512 bit times; 0 resumes.
func (b MACControl) PauseQuanta() uint16 { return binary.BigEndian.Uint16(b[PauseQuantaOffset:]) }

// ClassEnable is the PFC class-enable vector, bit n for priority n. The
// upper byte of the field is reserved.
func (b MACControl) ClassEnable() uint8 { return b[PFCClassEnableOffset+1] }

// Quanta is the PFC pause time of priority prio (0-7); 0 means XON.
func (b MACControl) Quanta(prio int) uint16 {
	return binary.BigEndian.Uint16(b[PFCQuantaOffset+2*(prio&7):])
}

func (b MACControl) SetOpcode(op uint16) {
	binary.BigEndian.PutUint16(b[MACControlOpcodeOffset:], op)
}
func (b MACControl) SetPauseQuanta(q uint16) {
	binary.BigEndian.PutUint16(b[PauseQuantaOffset:], q)
}
func (b MACControl) SetClassEnable(v uint8) {
	b[PFCClassEnableOffset], b[PFCClassEnableOffset+1] = 0, v
}
func (b MACControl) SetQuanta(prio int, q uint16) {
	binary.BigEndian.PutUint16(b[PFCQuantaOffset+2*(prio&7):], q)
}

// MACCtl is what Classify makes of an untagged MAC control frame
// (EtherType 0x8808 right after the addresses; such frames are never
// tagged, and a tagged one is left as MACCtlNone).
type MACCtl uint8

// MACCtl values.
const (
	MACCtlNone  MACCtl = iota // not an untagged MAC control frame
	MACCtlPFC                 // an 802.1Qbb PFC frame, long enough for all 8 quanta
	MACCtlPause               // an 802.3x PAUSE frame, long enough for its quanta
	MACCtlOther               // any other opcode, or too short for its fields
)

var macCtlNames = [...]string{"none", "pfc", "pause", "other"}

func (k MACCtl) String() string {
	if int(k) < len(macCtlNames) {
		return macCtlNames[k]
	}
	return "macctl-" + strconv.Itoa(int(k))
}

// MACCtlOf sorts an Ethernet frame as Classify does: MACCtlNone unless
// EtherType 0x8808 follows the addresses.
func MACCtlOf(frame []byte) MACCtl {
	if len(frame) < EthernetHeaderLen || binary.BigEndian.Uint16(frame[12:]) != EtherTypeMACControl {
		return MACCtlNone
	}
	return macCtlKind(frame[EthernetHeaderLen:])
}

// macCtlKind sorts the MAC control payload p of an untagged frame.
func macCtlKind(p []byte) MACCtl {
	if len(p) < MACControlOpcodeOffset+2 {
		return MACCtlOther
	}
	switch op := MACControl(p).Opcode(); {
	case op == MACControlPFC && len(p) >= pfcLen:
		return MACCtlPFC
	case op == MACControlPause && len(p) >= pauseLen:
		return MACCtlPause
	}
	return MACCtlOther
}

// PauseRequest is what a PFC or PAUSE frame asks of the port that
// receives it.
type PauseRequest struct {
	// ClassEnable is the priorities the frame addresses, bit n for
	// priority n: the PFC class-enable vector, or 0xFF for a PAUSE.
	ClassEnable uint8
	// Quanta is the pause time of each priority in units of 512 bit
	// times; 0 resumes (XON). A PAUSE's single value is in all eight.
	Quanta [8]uint16
}

// ParseMACControl reads the request of the PFC or PAUSE frame that
// Classify described in r (r.MACCtl is MACCtlPFC or MACCtlPause); ok is
// false for any other frame. Classify has checked the EtherType, the
// opcode and the length, so this only reads the fields: a stage that
// consumes PFC and PAUSE frames and one that counts them share one parse.
func ParseMACControl(frame []byte, r *Result) (req PauseRequest, ok bool) {
	switch r.MACCtl {
	case MACCtlPFC:
		if len(frame) < EthernetHeaderLen+pfcLen {
			return req, false
		}
		b := MACControl(frame[EthernetHeaderLen : EthernetHeaderLen+pfcLen])
		req.ClassEnable = b.ClassEnable()
		for i := range req.Quanta {
			req.Quanta[i] = b.Quanta(i)
		}
		return req, true
	case MACCtlPause:
		if len(frame) < EthernetHeaderLen+pauseLen {
			return req, false
		}
		q := MACControl(frame[EthernetHeaderLen:]).PauseQuanta()
		req.ClassEnable = 0xff
		for i := range req.Quanta {
			req.Quanta[i] = q
		}
		return req, true
	}
	return req, false
}

// macControl returns the MAC control payload of an untagged frame.
func macControl(frame []byte, op uint16, need int) (MACControl, bool) {
	if len(frame) < EthernetHeaderLen+need ||
		Ethernet(frame).EtherType() != EtherTypeMACControl ||
		MACControl(frame[EthernetHeaderLen:]).Opcode() != op {
		return nil, false
	}
	return MACControl(frame[EthernetHeaderLen:]), true
}

// ParsePFC decodes an 802.1Qbb PFC frame. A stage holding the frame's
// Classify result uses ParseMACControl instead.
func ParsePFC(frame []byte) (classEnable uint8, quanta [8]uint16, ok bool) {
	b, ok := macControl(frame, MACControlPFC, pfcLen)
	if !ok {
		return 0, quanta, false
	}
	for i := range quanta {
		quanta[i] = b.Quanta(i)
	}
	return b.ClassEnable(), quanta, true
}

// ParsePause decodes an 802.3x PAUSE frame. A stage holding the frame's
// Classify result uses ParseMACControl instead.
func ParsePause(frame []byte) (quanta uint16, ok bool) {
	b, ok := macControl(frame, MACControlPause, pauseLen)
	if !ok {
		return 0, false
	}
	return b.PauseQuanta(), true
}

var errShortBuf = errors.New("roce: buffer shorter than a minimum frame")

func buildMACControl(buf []byte, src MAC, op uint16) (MACControl, error) {
	if len(buf) < MinFrameLen {
		return nil, errShortBuf
	}
	clear(buf[:MinFrameLen])
	Ethernet(buf).Encode(&EthernetFields{Dst: MACControlDst, Src: src, EtherType: EtherTypeMACControl})
	b := MACControl(buf[EthernetHeaderLen:MinFrameLen])
	b.SetOpcode(op)
	return b, nil
}

// BuildPFC writes a 60-byte PFC frame (no FCS) into buf and returns its
// length.
func BuildPFC(buf []byte, src MAC, classEnable uint8, quanta [8]uint16) (int, error) {
	b, err := buildMACControl(buf, src, MACControlPFC)
	if err != nil {
		return 0, err
	}
	b.SetClassEnable(classEnable)
	for i, q := range quanta {
		b.SetQuanta(i, q)
	}
	return MinFrameLen, nil
}

// BuildPause writes a 60-byte PAUSE frame (no FCS) into buf and returns its
// length.
func BuildPause(buf []byte, src MAC, quanta uint16) (int, error) {
	b, err := buildMACControl(buf, src, MACControlPause)
	if err != nil {
		return 0, err
	}
	b.SetPauseQuanta(quanta)
	return MinFrameLen, nil
}
