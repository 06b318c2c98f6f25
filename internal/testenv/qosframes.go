package testenv

import (
	"testing"

	"roce-fwd/roce"
)

// RoCEv2 flows of the QoS tests, told apart by destination QP; their
// DSCPs map to TCs as the nvidia-roce preset does.
const (
	QPECT    = 0x100 // DSCP 26 → TC3 (lossless), ECT(0): may be marked CE
	QPNotECT = 0x101 // DSCP 26, Not-ECT: never marked, never dropped by WRED (lossless)
	QPCNP    = 0x102 // a CNP, DSCP 48 → TC6 (strict)
	QPLossy  = 0x103 // DSCP 0 → TC0 (lossy), Not-ECT
)

// QoSFrame builds an RC RDMA WRITE Only of payload bytes (a CNP for
// QPCNP) on flow qp with PSN psn, ICRC included.
func QoSFrame(t testing.TB, qp, psn uint32, payload int) []byte {
	t.Helper()
	s := roce.FrameSpec{Src: roce.MAC{2, 0, 0, 0, 0, 0xa}, Dst: roce.MAC{2, 0, 0, 0, 0, 0xb},
		BTH:     roce.BTHFields{Opcode: roce.OpRC | roce.OpWriteOnly, DestQP: qp, PSN: psn, PKey: 0xffff},
		Ext:     roce.ExtFields{VA: 0x1000, RKey: 7, DMALength: uint32(payload)},
		Payload: make([]byte, payload)}
	switch qp {
	case QPECT:
		s.DSCP, s.ECN = 26, roce.ECNECT0
	case QPNotECT:
		s.DSCP = 26
	case QPCNP:
		s.DSCP = 48
		s.BTH = roce.BTHFields{Opcode: roce.OpCNP, DestQP: qp, PSN: psn, PKey: 0xffff, BECN: true}
		s.Ext, s.Payload = roce.ExtFields{}, make([]byte, 16)
	}
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// PFCFrame is an XOFF (or XON, quanta 0) for priority prio.
func PFCFrame(t testing.TB, prio uint8, quanta uint16) []byte {
	t.Helper()
	f := make([]byte, 60)
	var q [8]uint16
	q[prio&7] = quanta
	if _, err := roce.BuildPFC(f, roce.MAC{2, 0, 0, 0, 0, 0xee}, 1<<(prio&7), q); err != nil {
		t.Fatal(err)
	}
	return f
}
