package pipeline

import "roce-fwd/dpdk"

// Reason is a named cause for a packet the pipeline did not transmit.
// Every packet that enters a worker is either handed to a PMD for
// transmission or counted under exactly one Reason.
type Reason uint8

const (
	DropTxFull Reason = iota
	DropRunt
	DropBadICRC
	DropMalformed
	DropMACControl
	DropQoSTail
	DropQoSWRED
	DropPFCWatchdog
	DropLosslessOverflow
	DropStopDiscard
	DropFlowRule
	DropFlowMeter
	DropIPHeader
	DropIPOptions
	DropIPChecksum
	DropTTLExpired
	DropARP
	DropNotIP
	DropNoRoute
	DropRouteDrop
	DropForUs
	DropNeighborUnresolved
	DropPuntLimit
	DropLinkLocal
	DropMACControlOther
	DropImpair
	DropImpairRate
	DropImpairHoldFull
	NumReasons
)

// ReasonInfo describes a Reason for everything that shows drops: the
// counters' name (snake_case, as Prometheus labels and JSON keys), the
// stage of the pipeline that drops for it, and what it means.
type ReasonInfo struct {
	Name  string
	Stage string
	Help  string
}

// Reasons is the one table of drop reasons: the stats JSON, the console
// (show errors), Prometheus, DPDK telemetry and the README read it.
var Reasons = [NumReasons]ReasonInfo{
	DropTxFull:             {"tx_full", "tx", "the PMD took no more after every retry: its tx ring stayed full"},
	DropRunt:               {"runt", "classify", "too short for an Ethernet header (mac mode rewrites it)"},
	DropBadICRC:            {"bad_icrc", "classify", "a RoCEv2 frame whose ICRC is wrong ([roce] bad_icrc = \"drop\")"},
	DropMalformed:          {"malformed", "classify", "a frame the classifier rejects ([roce] malformed = \"drop\")"},
	DropMACControl:         {"mac_control", "classify", "an 802.3x PAUSE or 802.1Qbb PFC frame: consumed by the port, never forwarded"},
	DropQoSTail:            {"qos_tail", "qos", "a lossy TC queue was at its byte limit (or out of slots)"},
	DropQoSWRED:            {"qos_wred", "qos", "WRED dropped a Not-ECT packet of a lossy TC"},
	DropPFCWatchdog:        {"pfc_watchdog", "qos", "the PFC watchdog (action drop) flushed or refused it during a storm"},
	DropLosslessOverflow:   {"lossless_overflow", "qos", "a lossless TC queue was full: PFC did not hold the sender back"},
	DropStopDiscard:        {"stop_discard", "qos", "still queued when a stopping worker's drain time ran out"},
	DropFlowRule:           {"flow_drop", "flow", "a software flow rule's drop action"},
	DropFlowMeter:          {"flow_meter", "flow", "a software flow rule's meter: the policy of the packet's colour drops it"},
	DropIPHeader:           {"ip_header", "route", "an IP header a router must not forward: truncated, wrong version or header length, total length beyond the frame"},
	DropIPOptions:          {"ip_options", "route", "an IPv4 header with options (the slow path's, not forwarded in the data path)"},
	DropIPChecksum:         {"ip_checksum", "route", "an IPv4 header whose checksum is wrong"},
	DropTTLExpired:         {"ttl_expired", "route", "TTL or hop limit 1 or 0: it would expire at this hop"},
	DropARP:                {"arp", "route", "an ARP frame on a routed port (for the kernel's exception path)"},
	DropNotIP:              {"not_ip", "route", "neither IPv4, IPv6 nor ARP on a routed port"},
	DropNoRoute:            {"no_route", "route", "no route to the destination"},
	DropRouteDrop:          {"route_drop", "route", "matched a drop route"},
	DropForUs:              {"for_us", "route", "addressed to one of the box's own addresses (for the kernel's exception path)"},
	DropNeighborUnresolved: {"neighbor_unresolved", "route", "the next hop's (or a connected destination's) MAC address is not known"},
	DropPuntLimit:          {"punt_limit", "route", "for the kernel's exception path, over its reason's [kernel] punt_rate"},
	DropLinkLocal:          {"link_local", "route", "to an IPv6 link-local or multicast, or IPv4 multicast or broadcast address (for the kernel's exception path)"},
	DropImpair:             {"impair_drop", "impair", "an impairment rule's drop action (impair add ... action drop): not a fault of the fabric"},
	DropImpairRate:         {"impair_rate", "impair", "over an impairment rule's rate_limit"},
	DropImpairHoldFull:     {"impair_hold_full", "impair", "a delay or reorder rule would have held it, but the worker already held [impair] hold packets"},
	DropMACControlOther:    {"mac_control_other", "classify", "an untagged 0x8808 MAC control frame that is neither PAUSE nor PFC (another opcode, or too short): never forwarded, as no MAC control frame is"},
}

func (r Reason) String() string {
	if r < NumReasons {
		return Reasons[r].Name
	}
	return "unknown"
}

// ReasonNamed returns the Reason called name.
func ReasonNamed(name string) (Reason, bool) {
	for r := range Reasons {
		if Reasons[r].Name == name {
			return Reason(r), true
		}
	}
	return 0, false
}

// drop frees m at the next step and counts it under reason: the one way a
// stage drops a packet.
func (w *Worker) drop(m *dpdk.Mbuf, reason Reason) {
	w.step.Drop(m)
	w.c.drops[reason]++
}
