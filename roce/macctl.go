package roce

import (
	"encoding/binary"
	"errors"
)

// MAC control opcodes.
const (
	MACControlPause = 0x0001 // 802.3x PAUSE
	MACControlPFC   = 0x0101 // 802.1Qbb priority-based flow control
)

// MACControlDst is the reserved multicast address PAUSE and PFC frames go
// to; bridges never forward it.
var MACControlDst = MAC{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01}

const (
	pauseLen = 4      // opcode + quanta
	pfcLen   = 4 + 16 // opcode + class-enable vector + 8 quanta
)

// MACControl is a view of a MAC control payload: what follows EtherType
// 0x8808.
type MACControl []byte

func (b MACControl) Opcode() uint16 { return binary.BigEndian.Uint16(b) }

// PauseQuanta is the PAUSE time in units of 512 bit times; 0 resumes.
func (b MACControl) PauseQuanta() uint16 { return binary.BigEndian.Uint16(b[2:]) }

// ClassEnable is the PFC class-enable vector, bit n for priority n. The
// upper byte of the field is reserved.
func (b MACControl) ClassEnable() uint8 { return b[3] }

// Quanta is the PFC pause time of priority prio (0-7); 0 means XON.
func (b MACControl) Quanta(prio int) uint16 { return binary.BigEndian.Uint16(b[4+2*(prio&7):]) }

func (b MACControl) SetOpcode(op uint16)     { binary.BigEndian.PutUint16(b, op) }
func (b MACControl) SetPauseQuanta(q uint16) { binary.BigEndian.PutUint16(b[2:], q) }
func (b MACControl) SetClassEnable(v uint8)  { b[2], b[3] = 0, v }
func (b MACControl) SetQuanta(prio int, q uint16) {
	binary.BigEndian.PutUint16(b[4+2*(prio&7):], q)
}

// macControl returns the MAC control payload of an untagged frame.
func macControl(frame []byte, op uint16, need int) (MACControl, bool) {
	if len(frame) < EthernetHeaderLen+need ||
		binary.BigEndian.Uint16(frame[12:]) != EtherTypeMACControl ||
		binary.BigEndian.Uint16(frame[EthernetHeaderLen:]) != op {
		return nil, false
	}
	return MACControl(frame[EthernetHeaderLen:]), true
}

// ParsePFC decodes an 802.1Qbb PFC frame.
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

// ParsePause decodes an 802.3x PAUSE frame.
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
