package dpdk

/*
#include <stdlib.h>
#include <string.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"strings"
	"unsafe"
)

// ProbeDevice attaches a device from a devargs string such as
// "net_pcap0,rx_pcap=in.pcap" or "0000:3b:00.0,dv_flow_en=1"
// (rte_dev_probe) and returns its ethdev port id.
func ProbeDevice(devargs string) (Port, error) {
	name := devargs
	if i := strings.IndexByte(name, ','); i >= 0 {
		name = name[:i]
	}
	if p, err := PortByName(name); err == nil {
		return p, nil // probed by EAL from its own arguments
	}
	cargs := C.CString(devargs)
	defer C.free(unsafe.Pointer(cargs))
	var rc C.int
	OnMain(func() { rc = C.rte_dev_probe(cargs) })
	if err := errRC(fmt.Sprintf("probing %q", devargs), rc); err != nil {
		return 0, err
	}
	p, err := PortByName(name)
	if err != nil {
		return 0, fmt.Errorf("device %q was probed but has no ethdev port named %q", devargs, name)
	}
	return p, nil
}

// PortByName finds an ethdev by its device name.
func PortByName(name string) (Port, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var id C.uint16_t
	if err := errRC("no ethdev named "+name, C.rte_eth_dev_get_port_by_name(cname, &id)); err != nil {
		return 0, err
	}
	return Port(id), nil
}

// Ports lists every ethdev port id.
func Ports() []Port {
	var ids []Port
	for p := C.rte_eth_find_next(0); p < C.RTE_MAX_ETHPORTS; p = C.rte_eth_find_next(p + 1) {
		ids = append(ids, Port(p))
	}
	return ids
}

// Port is an ethdev port id.
type Port uint16

func (p Port) op(what string) string { return fmt.Sprintf("port %d: %s", p, what) }

// Name is the device name (vdev name or PCI address).
func (p Port) Name() string {
	var buf [C.RTE_ETH_NAME_MAX_LEN]C.char
	if C.rte_eth_dev_get_name_by_port(C.uint16_t(p), &buf[0]) != 0 {
		return ""
	}
	return C.GoString(&buf[0])
}

// Socket is the NUMA socket of the device, -1 when unknown (vdevs).
func (p Port) Socket() int { return int(C.rte_eth_dev_socket_id(C.uint16_t(p))) }

// DevInfo is the part of rte_eth_dev_info roce-fwd uses.
type DevInfo struct {
	Driver             string
	IfIndex            int
	MinMTU, MaxMTU     int
	MaxRxPktLen        int
	MaxRxQueues        int
	MaxTxQueues        int
	RxDescMin          int
	RxDescMax          int
	TxDescMin          int
	TxDescMax          int
	RxOffloadCapa      uint64
	TxOffloadCapa      uint64
	RSSHashes          uint64 // flow_type_rss_offloads: the RTE_ETH_RSS_* it can hash on
	SpeedCapa          uint32
	ConfiguredRxQueues int
	ConfiguredTxQueues int
	DevCapa            uint64 // RTE_ETH_DEV_CAPA_*
}

// DevCapaFlowRuleKeep is RTE_ETH_DEV_CAPA_FLOW_RULE_KEEP: the port keeps
// its flow rules across a stop and start. Without it they may be gone.
const DevCapaFlowRuleKeep = uint64(C.RTE_ETH_DEV_CAPA_FLOW_RULE_KEEP)

// Info is rte_eth_dev_info_get.
func (p Port) Info() (DevInfo, error) {
	var di C.struct_rte_eth_dev_info
	if err := errRC(p.op("dev_info"), C.rte_eth_dev_info_get(C.uint16_t(p), &di)); err != nil {
		return DevInfo{}, err
	}
	return DevInfo{
		Driver:             C.GoString(di.driver_name),
		IfIndex:            int(di.if_index),
		MinMTU:             int(di.min_mtu),
		MaxMTU:             int(di.max_mtu),
		MaxRxPktLen:        int(di.max_rx_pktlen),
		MaxRxQueues:        int(di.max_rx_queues),
		MaxTxQueues:        int(di.max_tx_queues),
		RxDescMin:          int(di.rx_desc_lim.nb_min),
		RxDescMax:          int(di.rx_desc_lim.nb_max),
		TxDescMin:          int(di.tx_desc_lim.nb_min),
		TxDescMax:          int(di.tx_desc_lim.nb_max),
		RxOffloadCapa:      uint64(di.rx_offload_capa),
		TxOffloadCapa:      uint64(di.tx_offload_capa),
		RSSHashes:          uint64(di.flow_type_rss_offloads),
		SpeedCapa:          uint32(di.speed_capa),
		ConfiguredRxQueues: int(di.nb_rx_queues),
		ConfiguredTxQueues: int(di.nb_tx_queues),
		DevCapa:            uint64(di.dev_capa),
	}, nil
}

// PortConf is what Configure sets.
type PortConf struct {
	RxQueues, TxQueues int
	MTU                int    // 0 keeps the PMD default
	RSSHashes          uint64 // RTE_ETH_RSS_* to spread the rx queues by; 0: no RSS
	RxOffloads         uint64 // RTE_ETH_RX_OFFLOAD_*
}

// RSS hash types and rx offloads the ports use.
const (
	RSSIP              = uint64(C.RTE_ETH_RSS_IP)
	RSSUDP             = uint64(C.RTE_ETH_RSS_UDP)
	RxOffloadIPv4Cksum = uint64(C.RTE_ETH_RX_OFFLOAD_IPV4_CKSUM)
)

// Configure sets the queue counts, MTU, RSS and rx offloads.
func (p Port) Configure(c PortConf) error {
	return errRC(p.op(fmt.Sprintf("configure %d rx / %d tx queues, mtu %d, rss %#x, rx offloads %#x", c.RxQueues, c.TxQueues, c.MTU, c.RSSHashes, c.RxOffloads)),
		C.rf_port_configure(C.uint16_t(p), C.uint16_t(c.RxQueues), C.uint16_t(c.TxQueues), C.uint16_t(c.MTU),
			C.uint64_t(c.RSSHashes), C.uint64_t(c.RxOffloads)))
}

// RSSHashConf is the RTE_ETH_RSS_* the port spreads its rx queues by
// (rte_eth_dev_rss_hash_conf_get).
func (p Port) RSSHashConf() (uint64, error) {
	var hf C.uint64_t
	err := errRC(p.op("rss hash conf get"), C.rf_port_rss_hf(C.uint16_t(p), &hf))
	return uint64(hf), err
}

// RxQueueSetup sets up rx queue q with desc descriptors on socket, filled from pool.
func (p Port) RxQueueSetup(q, desc, socket int, pool *Mempool) error {
	return errRC(p.op(fmt.Sprintf("rx queue %d setup (%d descriptors, socket %d)", q, desc, socket)),
		C.rf_rx_queue_setup(C.uint16_t(p), C.uint16_t(q), C.uint16_t(desc), C.int(socket), pool.p))
}

// TxQueueSetup sets up tx queue q with desc descriptors on socket.
func (p Port) TxQueueSetup(q, desc, socket int) error {
	return errRC(p.op(fmt.Sprintf("tx queue %d setup (%d descriptors, socket %d)", q, desc, socket)),
		C.rf_tx_queue_setup(C.uint16_t(p), C.uint16_t(q), C.uint16_t(desc), C.int(socket)))
}

// Start is rte_eth_dev_start.
func (p Port) Start() error { return errRC(p.op("start"), C.rte_eth_dev_start(C.uint16_t(p))) }

// Stop is rte_eth_dev_stop.
func (p Port) Stop() error { return errRC(p.op("stop"), C.rte_eth_dev_stop(C.uint16_t(p))) }

// Close is rte_eth_dev_close; the port id is invalid afterwards.
func (p Port) Close() error { return errRC(p.op("close"), C.rte_eth_dev_close(C.uint16_t(p))) }

// Reset is rte_eth_dev_reset: the port must be reconfigured afterwards.
func (p Port) Reset() error { return errRC(p.op("reset"), C.rte_eth_dev_reset(C.uint16_t(p))) }

// SetPromiscuous turns promiscuous mode on or off.
func (p Port) SetPromiscuous(on bool) error {
	if on {
		return errRC(p.op("promiscuous on"), C.rte_eth_promiscuous_enable(C.uint16_t(p)))
	}
	return errRC(p.op("promiscuous off"), C.rte_eth_promiscuous_disable(C.uint16_t(p)))
}

// Promiscuous reports promiscuous mode.
func (p Port) Promiscuous() bool { return C.rte_eth_promiscuous_get(C.uint16_t(p)) == 1 }

// SetMTU is rte_eth_dev_set_mtu.
func (p Port) SetMTU(mtu int) error {
	return errRC(p.op(fmt.Sprintf("set mtu %d", mtu)), C.rte_eth_dev_set_mtu(C.uint16_t(p), C.uint16_t(mtu)))
}

// MTU is rte_eth_dev_get_mtu.
func (p Port) MTU() (int, error) {
	var mtu C.uint16_t
	err := errRC(p.op("get mtu"), C.rte_eth_dev_get_mtu(C.uint16_t(p), &mtu))
	return int(mtu), err
}

// MAC is the port's primary MAC address.
func (p Port) MAC() (net.HardwareAddr, error) {
	var a C.struct_rte_ether_addr
	if err := errRC(p.op("mac address"), C.rte_eth_macaddr_get(C.uint16_t(p), &a)); err != nil {
		return nil, err
	}
	return C.GoBytes(unsafe.Pointer(&a.addr_bytes[0]), 6), nil
}

// SetMAC makes mac the port's primary MAC address (for net_tap, the
// kernel interface's too).
func (p Port) SetMAC(mac net.HardwareAddr) error {
	if len(mac) != 6 {
		return fmt.Errorf("port %d: MAC %v: want 6 bytes", p, mac)
	}
	var a C.struct_rte_ether_addr
	for i, b := range mac {
		a.addr_bytes[i] = C.uint8_t(b)
	}
	return errRC(p.op("set mac address"), C.rte_eth_dev_default_mac_addr_set(C.uint16_t(p), &a))
}

// Link is the link state.
type Link struct {
	SpeedMbps  uint32 // 0 when unknown
	FullDuplex bool
	Autoneg    bool
	Up         bool
}

func (l Link) String() string {
	if !l.Up {
		return "down"
	}
	d := "half-duplex"
	if l.FullDuplex {
		d = "full-duplex"
	}
	if l.SpeedMbps == 0 || l.SpeedMbps == uint32(C.RTE_ETH_SPEED_NUM_UNKNOWN) {
		return "up, speed unknown, " + d
	}
	if l.SpeedMbps%1000 == 0 {
		return fmt.Sprintf("up, %d Gbps, %s", l.SpeedMbps/1000, d)
	}
	return fmt.Sprintf("up, %d Mbps, %s", l.SpeedMbps, d)
}

// Link reads the link state; wait lets the PMD wait up to 9 s for it.
func (p Port) Link(wait bool) (Link, error) {
	var l C.struct_rf_link
	w := C.int(0)
	if wait {
		w = 1
	}
	if err := errRC(p.op("link status"), C.rf_link_get(C.uint16_t(p), &l, w)); err != nil {
		return Link{}, err
	}
	return Link{SpeedMbps: uint32(l.speed), FullDuplex: l.duplex_full != 0, Autoneg: l.autoneg != 0, Up: l.up != 0}, nil
}

// Stats are the basic ethdev counters.
type Stats struct {
	RxPackets, TxPackets uint64
	RxBytes, TxBytes     uint64
	RxMissed             uint64 // dropped by the NIC: no room in the rx ring
	RxErrors, TxErrors   uint64
	RxNoMbuf             uint64
}

// Stats is rte_eth_stats_get.
func (p Port) Stats() (Stats, error) {
	var s C.struct_rte_eth_stats
	if err := errRC(p.op("stats"), C.rte_eth_stats_get(C.uint16_t(p), &s)); err != nil {
		return Stats{}, err
	}
	return Stats{
		RxPackets: uint64(s.ipackets), TxPackets: uint64(s.opackets),
		RxBytes: uint64(s.ibytes), TxBytes: uint64(s.obytes),
		RxMissed: uint64(s.imissed), RxErrors: uint64(s.ierrors), TxErrors: uint64(s.oerrors),
		RxNoMbuf: uint64(s.rx_nombuf),
	}, nil
}

// ResetStats is rte_eth_stats_reset.
func (p Port) ResetStats() error {
	return errRC(p.op("stats reset"), C.rte_eth_stats_reset(C.uint16_t(p)))
}

// XStat is one extended statistic.
type XStat struct {
	Name  string
	Value uint64
}

// XStats returns every extended statistic with its name.
func (p Port) XStats() ([]XStat, error) {
	n := C.rte_eth_xstats_get_names(C.uint16_t(p), nil, 0)
	if n < 0 {
		return nil, errRC(p.op("xstats names"), n)
	}
	if n == 0 {
		return nil, nil
	}
	names := make([]C.struct_rte_eth_xstat_name, n)
	vals := make([]C.struct_rte_eth_xstat, n)
	// Go-heap arrays are fine here: control plane, and the arrays hold no pointers.
	if m := C.rte_eth_xstats_get_names(C.uint16_t(p), &names[0], C.uint(n)); m < 0 {
		return nil, errRC(p.op("xstats names"), m)
	} else if m < n {
		n = m
	}
	m := C.rte_eth_xstats_get(C.uint16_t(p), &vals[0], C.uint(n))
	if m < 0 {
		return nil, errRC(p.op("xstats"), m)
	}
	if m < n {
		n = m
	}
	out := make([]XStat, 0, n)
	for i := 0; i < int(n); i++ {
		id := int(vals[i].id)
		if id >= len(names) {
			continue
		}
		out = append(out, XStat{Name: C.GoString(&names[id].name[0]), Value: uint64(vals[i].value)})
	}
	return out, nil
}

// ResetXStats is rte_eth_xstats_reset.
func (p Port) ResetXStats() error {
	return errRC(p.op("xstats reset"), C.rte_eth_xstats_reset(C.uint16_t(p)))
}
