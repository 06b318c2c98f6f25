package dpdk

/*
#include <string.h>
#include <rte_ethdev.h>

static int rf_pfc_set(uint16_t port, uint8_t prio, uint32_t high, uint32_t low,
		      uint16_t pause, uint16_t xon)
{
	struct rte_eth_pfc_conf c;

	memset(&c, 0, sizeof(c));
	c.fc.high_water = high;
	c.fc.low_water = low;
	c.fc.pause_time = pause;
	c.fc.send_xon = xon;
	c.fc.mode = RTE_ETH_FC_FULL;
	c.priority = prio;
	return rte_eth_dev_priority_flow_ctrl_set(port, &c);
}

struct rf_fc {
	uint32_t high, low;
	uint16_t pause, xon;
	int mode;
	uint8_t mac_ctrl_frame_fwd, autoneg;
};

static int rf_fc_get(uint16_t port, struct rf_fc *out)
{
	struct rte_eth_fc_conf c;
	int rc;

	memset(&c, 0, sizeof(c));
	rc = rte_eth_dev_flow_ctrl_get(port, &c);
	if (rc != 0)
		return rc;
	out->high = c.high_water;
	out->low = c.low_water;
	out->pause = c.pause_time;
	out->xon = c.send_xon;
	out->mode = (int)c.mode;
	out->mac_ctrl_frame_fwd = c.mac_ctrl_frame_fwd;
	out->autoneg = c.autoneg;
	return 0;
}
*/
import "C"

import "fmt"

// SetPriorityFlowCtrl enables 802.1Qbb priority flow control in the NIC
// for one priority, in both directions (rte_eth_dev_priority_flow_ctrl_set
// with RTE_ETH_FC_FULL): the NIC sends XOFF with pauseTime quanta when its
// receive buffer for the priority passes highWater, XON (if sendXON) when
// it drains below lowWater, and stops its own transmission of the
// priority when the link partner pauses it. The watermark units are the
// PMD's (ixgbe: KB of receive packet buffer).
//
// A PMD without the op returns ENOTSUP (errors.Is(err, syscall.ENOTSUP));
// some have a stub that returns ENOSYS (i40e in DPDK 22.11). mlx5 and
// ionic have neither in 22.11: their PFC is the kernel driver's or the
// firmware's.
func (p Port) SetPriorityFlowCtrl(prio uint8, highWater, lowWater uint32, pauseTime uint16, sendXON bool) error {
	xon := C.uint16_t(0)
	if sendXON {
		xon = 1
	}
	return errRC(p.op(fmt.Sprintf("priority flow control on priority %d", prio)),
		C.rf_pfc_set(C.uint16_t(p), C.uint8_t(prio), C.uint32_t(highWater), C.uint32_t(lowWater),
			C.uint16_t(pauseTime), xon))
}

// FCMode is rte_eth_fc_mode: which directions of link flow control are on.
type FCMode int

const (
	FCNone    FCMode = C.RTE_ETH_FC_NONE     // off
	FCRxPause FCMode = C.RTE_ETH_FC_RX_PAUSE // honour received pause frames
	FCTxPause FCMode = C.RTE_ETH_FC_TX_PAUSE // send pause frames
	FCFull    FCMode = C.RTE_ETH_FC_FULL     // both
)

func (m FCMode) String() string {
	switch m {
	case FCNone:
		return "none"
	case FCRxPause:
		return "rx_pause"
	case FCTxPause:
		return "tx_pause"
	case FCFull:
		return "full"
	}
	return fmt.Sprintf("fc-mode-%d", int(m))
}

// FlowCtrl is the link-level (802.3x) flow control state of a port.
type FlowCtrl struct {
	HighWater, LowWater uint32 // PMD units
	PauseTime           uint16 // quanta
	SendXON             bool
	Mode                FCMode
	MacCtrlFrameFwd     bool // MAC control frames are passed to the host
	Autoneg             bool
}

// FlowCtrl is rte_eth_dev_flow_ctrl_get. PMDs without the op return
// ENOTSUP.
func (p Port) FlowCtrl() (FlowCtrl, error) {
	var fc C.struct_rf_fc
	if err := errRC(p.op("flow control get"), C.rf_fc_get(C.uint16_t(p), &fc)); err != nil {
		return FlowCtrl{}, err
	}
	return FlowCtrl{
		HighWater: uint32(fc.high), LowWater: uint32(fc.low), PauseTime: uint16(fc.pause),
		SendXON: fc.xon != 0, Mode: FCMode(fc.mode),
		MacCtrlFrameFwd: fc.mac_ctrl_frame_fwd != 0, Autoneg: fc.autoneg != 0,
	}, nil
}
