// Package telemetry exports roce-fwd's statistics to monitoring systems:
// as Prometheus metrics over HTTP (NewCollector, Serve), and as commands of
// DPDK's own telemetry socket (RegisterDPDK), read by dpdk-telemetry.py.
//
// Both read a daemon.Report per request from a Source, and the flow rules
// through its Flows; neither keeps state of its own, so they never
// disagree with the console, "flow query" or the final stats.
package telemetry

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"roce-fwd/daemon"
	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
	"roce-fwd/qos"
	"roce-fwd/roce"
	"roce-fwd/rocestats"
)

// Source returns the current statistics, e.g. (*daemon.Daemon).Snapshot,
// which leaves the console's "since last show" rates alone.
type Source func() daemon.Report

const ns = "rocefwd"

type metric struct {
	desc *prometheus.Desc
	typ  prometheus.ValueType
}

func newMetric(name, help string, typ prometheus.ValueType, labels ...string) metric {
	return metric{prometheus.NewDesc(ns+"_"+name, help, labels, nil), typ}
}

func counter(name, help string, labels ...string) metric {
	return newMetric(name, help, prometheus.CounterValue, labels...)
}

func gauge(name, help string, labels ...string) metric {
	return newMetric(name, help, prometheus.GaugeValue, labels...)
}

// collector turns one Report per scrape into constant metrics.
type collector struct {
	src Source
	mu  sync.Mutex // one Report at a time, however many scrapers

	info, duration, queued, generated, drops metric

	portRxPackets, portRxBytes, portTxPackets, portTxBytes                metric
	portRxMissed, portRxErrors, portRxNoMbuf, portTxErrors, portTxDropped metric
	portLinkUp, portLinkSpeed                                             metric

	lcorePackets, lcoreBusy, lcoreBursts, lcoreEmpty, tscHz metric
	lcoreStalls, lcoreMaxGap                                metric

	qosEnqPackets, qosEnqBytes, qosTxPackets, qosTxBytes, qosECN metric
	qosDropped, qosDepth, qosMaxDepth, qosPaused                 metric

	pfcMode, pfcRxFrames, pfcRxXOFF, pfcRxXON, pfcPaused, pfcTxXOFF, pfcTxXON metric
	pfcTxPaused                                                               metric
	pfcRxPause, pfcTxFrames, pfcTxFailed                                      metric
	wdDetected, wdRestored, wdDropped, wdInStorm                              metric

	roceFrames, roceBytes, roceRoCEFrames, roceRoCEBytes, roceOther, roceIP   metric
	roceOpcode, roceCNP, roceECN, roceICRC, roceMalformed, rocePFC, rocePause metric
	roceTC                                                                    metric

	qpSlots, qpBytes, qpUsed, qpFlows, qpInserts, qpEvictions, qpAged metric
	qpPackets, qpFlowBytes                                            metric

	flowPackets, flowBytes, flowMeter, flowRules, flowBackend metric
	flowInserted, flowFailures, flowNotApplicable             metric

	routePackets, ecmpPackets, ecmpBytes, ecmpBuckets, fibRoutes, fibGroups, fibBytes, fibLookups, puntPackets, puntTxDropped metric

	impairMatched, impairActed, impairExpired metric

	pauseDurations *prometheus.Desc // a histogram
}

// NewCollector returns a Prometheus collector that calls src once per
// scrape and reports it as rocefwd_* metrics.
func NewCollector(src Source) prometheus.Collector {
	port := []string{"port", "driver"}
	lcore := []string{"lcore", "socket"}
	tc := []string{"port", "tc"}
	prio := []string{"port", "priority"}
	rp := []string{"port"}
	qp := []string{"src", "dst", "qp"}
	rule := []string{"port", "rule", "group", "where"}
	return &collector{
		src: src,

		pauseDurations: prometheus.NewDesc(ns+"_pfc_pause_duration_seconds",
			"How long the link partner's pauses of a priority lasted, from the first XOFF to the XON or the quanta's end (ended pauses).", prio, nil),
		impairMatched: counter("impair_matched_packets_total", "Packets an impairment rule's match took (eligible for its action).", "rule", "action"),
		impairActed:   counter("impair_acted_packets_total", "Packets an impairment rule acted on (dropped, held back, changed).", "rule", "action"),
		impairExpired: gauge("impair_expired", "1 once an impairment rule's count or time ran out.", "rule", "action"),

		info:      gauge("info", "Forwarding mode, always 1.", "mode"),
		duration:  gauge("forwarding_duration_seconds", "Time since forwarding started (until it stopped)."),
		queued:    gauge("queued_packets", "Packets the QoS queues hold and impairment rules hold back: received = transmitted + dropped + queued."),
		generated: counter("pfc_generated_frames_total", "Frames roce-fwd built and sent itself (PFC, impairment storms and duplicates); the ports count them as transmitted too."),
		drops:     counter("drops_total", "Packets the workers did not forward, by reason.", "reason"),

		portRxPackets: counter("port_rx_packets_total", "Packets received by the port.", port...),
		portRxBytes:   counter("port_rx_bytes_total", "Bytes received by the port.", port...),
		portTxPackets: counter("port_tx_packets_total", "Packets transmitted by the port.", port...),
		portTxBytes:   counter("port_tx_bytes_total", "Bytes transmitted by the port.", port...),
		portRxMissed:  counter("port_rx_missed_packets_total", "Packets the port dropped because its rx queues were full (imissed).", port...),
		portRxErrors:  counter("port_rx_errors_total", "Erroneous packets received (ierrors).", port...),
		portRxNoMbuf:  counter("port_rx_nombuf_total", "Receive mbuf allocation failures (rx_nombuf).", port...),
		portTxErrors:  counter("port_tx_errors_total", "Failed transmissions (oerrors).", port...),
		portTxDropped: counter("port_tx_dropped_packets_total", "Packets the PMD refused after every retry.", port...),
		portLinkUp:    gauge("port_link_up", "1 when the link is up.", port...),
		portLinkSpeed: gauge("port_link_speed_bytes", "Link speed in bytes per second, when known.", port...),

		lcorePackets: counter("lcore_packets_total", "Packets the worker received.", lcore...),
		lcoreBusy:    counter("lcore_busy_cycles_total", "TSC cycles of polls that carried packets.", lcore...),
		lcoreBursts:  counter("lcore_bursts_total", "Polls that returned packets.", lcore...),
		lcoreEmpty:   counter("lcore_empty_polls_total", "Polls that returned no packet.", lcore...),
		lcoreStalls:  counter("lcore_stalls_total", "Polls that started longer than the bound after the worker's poll before: for that long it read none of its rx queues (cumulative: a 2 ms gap counts over 50us, 200us and 1ms).", "lcore", "socket", "over"),
		lcoreMaxGap:  gauge("lcore_poll_gap_max_seconds", "The longest time between the starts of two of the worker's polls since forwarding started.", lcore...),
		tscHz:        gauge("tsc_frequency_hertz", "TSC cycles per second, as EAL measured them: rate(rocefwd_lcore_busy_cycles_total) divided by it is a worker's busy share."),

		qosEnqPackets: counter("qos_enqueued_packets_total", "Packets queued in the traffic class.", tc...),
		qosEnqBytes:   counter("qos_enqueued_bytes_total", "Bytes queued in the traffic class.", tc...),
		qosTxPackets:  counter("qos_tx_packets_total", "Packets the scheduler sent from the traffic class.", tc...),
		qosTxBytes:    counter("qos_tx_bytes_total", "Bytes the scheduler sent from the traffic class.", tc...),
		qosECN:        counter("qos_ecn_marked_packets_total", "Packets WRED marked CE instead of dropping.", tc...),
		qosDropped:    counter("qos_dropped_packets_total", "Packets the traffic class dropped, by reason.", append(tc, "reason")...),
		qosDepth:      gauge("qos_depth_bytes", "Bytes queued in the traffic class now.", tc...),
		qosMaxDepth:   gauge("qos_max_depth_bytes", "Largest queue depth seen in the traffic class.", tc...),
		qosPaused:     counter("qos_paused_seconds_total", "Time the traffic class spent paused by PFC.", tc...),

		pfcMode:     gauge("pfc_mode_info", "The port's flow control mode, always 1.", "port", "mode"),
		pfcRxFrames: counter("pfc_rx_frames_total", "PFC frames received naming the priority.", prio...),
		pfcRxXOFF:   counter("pfc_rx_xoff_frames_total", "PFC frames received that paused the priority.", prio...),
		pfcRxXON:    counter("pfc_rx_xon_frames_total", "PFC frames received that resumed the priority.", prio...),
		pfcPaused:   counter("pfc_paused_seconds_total", "Time the link partner kept the priority paused.", prio...),
		pfcTxPaused: counter("pfc_tx_paused_seconds_total", "Time roce-fwd's XOFFs kept the link partner's priority paused.", prio...),
		pfcTxXOFF:   counter("pfc_tx_xoff_frames_total", "PFC frames sent to pause the priority.", prio...),
		pfcTxXON:    counter("pfc_tx_xon_frames_total", "PFC frames sent to resume the priority.", prio...),
		pfcRxPause:  counter("pfc_rx_pause_frames_total", "802.3x PAUSE frames received.", rp...),
		pfcTxFrames: counter("pfc_tx_frames_total", "PFC frames sent on the port.", rp...),
		pfcTxFailed: counter("pfc_tx_failed_frames_total", "PFC frames that found no mbuf or tx room.", rp...),
		wdDetected:  counter("pfc_watchdog_storms_detected_total", "PFC storms the watchdog detected.", tc...),
		wdRestored:  counter("pfc_watchdog_storms_restored_total", "PFC storms the watchdog saw end.", tc...),
		wdDropped:   counter("pfc_watchdog_dropped_packets_total", "Packets the watchdog dropped during storms.", tc...),
		wdInStorm:   gauge("pfc_watchdog_in_storm", "1 while the watchdog holds the traffic class in a storm.", tc...),

		roceFrames:     counter("roce_rx_frames_total", "Frames the classifier saw on the rx port.", rp...),
		roceBytes:      counter("roce_rx_bytes_total", "Bytes the classifier saw on the rx port.", rp...),
		roceRoCEFrames: counter("roce_rocev2_frames_total", "RoCEv2 frames (UDP 4791 with a valid BTH).", rp...),
		roceRoCEBytes:  counter("roce_rocev2_bytes_total", "Bytes of RoCEv2 frames.", rp...),
		roceOther:      counter("roce_other_frames_total", "Frames that are not RoCEv2.", rp...),
		roceIP:         counter("roce_ip_frames_total", "Frames by IP version.", "port", "version"),
		roceOpcode:     counter("roce_opcode_frames_total", "RoCEv2 frames by BTH opcode.", "port", "transport", "opcode", "code"),
		roceCNP:        counter("roce_cnp_frames_total", "Congestion notification packets.", rp...),
		roceECN:        counter("roce_ecn_frames_total", "RoCEv2 frames by ECN codepoint.", "port", "ecn"),
		roceICRC:       counter("roce_icrc_checks_total", "ICRC checks by result.", "port", "result"),
		roceMalformed:  counter("roce_malformed_frames_total", "Frames the classifier rejected, by reason.", "port", "reason"),
		rocePFC:        counter("roce_pfc_frames_total", "PFC frames the classifier saw.", rp...),
		rocePause:      counter("roce_pause_frames_total", "802.3x PAUSE frames the classifier saw.", rp...),
		roceTC:         counter("roce_tc_frames_total", "Frames by the traffic class they were given.", "port", "tc"),

		qpSlots:     gauge("qp_table_slots", "Slots of the per-QP flow tables."),
		qpBytes:     gauge("qp_table_bytes", "DPDK memory (hugepages unless EAL runs --no-huge) of the per-QP flow tables."),
		qpUsed:      gauge("qp_table_used_slots", "Slots in use."),
		qpFlows:     gauge("qp_flows", "QP flows tracked."),
		qpInserts:   counter("qp_table_inserts_total", "Flows added to the tables."),
		qpEvictions: counter("qp_table_evictions_total", "Live flows pushed out because their bucket was full."),
		qpAged:      counter("qp_table_aged_total", "Idle flows whose slot was reused."),
		qpPackets:   counter("qp_packets_total", "Packets of a QP flow; only the top flows by bytes, as the stats report lists them (a flow's series starts and ends as it enters and leaves the top).", qp...),
		qpFlowBytes: counter("qp_bytes_total", "Bytes of a QP flow; only the top flows by bytes, as the stats report lists them.", qp...),

		flowPackets:       counter("flow_rule_packets_total", "Packets the flow rule counted, on the NIC (hw) or in the software table (sw).", rule...),
		flowBytes:         counter("flow_rule_bytes_total", "Bytes the flow rule counted.", rule...),
		flowMeter:         counter("flow_meter_packets_total", "Packets the meter of a software flow rule coloured, by colour.", "port", "rule", "color"),
		flowRules:         gauge("flow_rules", "Flow rules of the port, by where they run.", "port", "where"),
		flowBackend:       gauge("flow_backend_info", "The port's flow rule backend and the flow engine its probe found, always 1.", "port", "backend", "engine", "driver"),
		flowInserted:      counter("flow_inserted_total", "Flow rules the NIC took.", rp...),
		flowFailures:      counter("flow_insert_failures_total", "Flow rules the NIC refused; each runs in software instead.", rp...),
		flowNotApplicable: counter("flow_not_applicable_packets_total", "Packets that hit a software rule's queue or rss action, which only a NIC carries out.", rp...),

		routePackets:  counter("route_packets_total", "Packets routed, by route class (forward: one next hop, ecmp: a group's member, fragment: IPv4 fragments among them).", "class"),
		ecmpPackets:   counter("ecmp_member_packets_total", "Packets sent to an ECMP group's member.", "group", "port", "gateway"),
		ecmpBytes:     counter("ecmp_member_bytes_total", "Bytes sent to an ECMP group's member.", "group", "port", "gateway"),
		ecmpBuckets:   gauge("ecmp_member_buckets", "Buckets of the group's table the member holds (its share of flows).", "group", "port", "gateway"),
		fibRoutes:     gauge("fib_routes", "Routes in the FIB.", "family"),
		fibLookups:    counter("fib_lookups_total", "IPv6 FIB lookups by answer (memo: a worker remembered the destination's subnet; walk: the trie was walked).", "family", "answer"),
		fibGroups:     gauge("fib_groups", "FIB groups of 256 entries by state (used, free, pending reuse).", "family", "state"),
		fibBytes:      gauge("fib_bytes", "Hugepage memory of the FIB.", "family"),
		puntPackets:   counter("punt_packets_total", "Packets handed to the kernel through the exception path, by reason.", "reason"),
		puntTxDropped: counter("punt_tx_dropped_packets_total", "Punted packets the exception paths' TAPs refused (kernel queue full, TAP down)."),
	}
}

func (c *collector) metrics() []metric {
	return []metric{c.info, c.duration, c.queued, c.generated, c.drops,
		c.portRxPackets, c.portRxBytes, c.portTxPackets, c.portTxBytes,
		c.portRxMissed, c.portRxErrors, c.portRxNoMbuf, c.portTxErrors, c.portTxDropped,
		c.portLinkUp, c.portLinkSpeed,
		c.lcorePackets, c.lcoreBusy, c.lcoreBursts, c.lcoreEmpty, c.lcoreStalls, c.lcoreMaxGap, c.tscHz,
		c.qosEnqPackets, c.qosEnqBytes, c.qosTxPackets, c.qosTxBytes, c.qosECN,
		c.qosDropped, c.qosDepth, c.qosMaxDepth, c.qosPaused,
		c.pfcMode, c.pfcRxFrames, c.pfcRxXOFF, c.pfcRxXON, c.pfcPaused, c.pfcTxXOFF, c.pfcTxXON, c.pfcTxPaused,
		c.pfcRxPause, c.pfcTxFrames, c.pfcTxFailed,
		c.wdDetected, c.wdRestored, c.wdDropped, c.wdInStorm,
		c.roceFrames, c.roceBytes, c.roceRoCEFrames, c.roceRoCEBytes, c.roceOther, c.roceIP,
		c.roceOpcode, c.roceCNP, c.roceECN, c.roceICRC, c.roceMalformed, c.rocePFC, c.rocePause, c.roceTC,
		c.qpSlots, c.qpBytes, c.qpUsed, c.qpFlows, c.qpInserts, c.qpEvictions, c.qpAged, c.qpPackets, c.qpFlowBytes,
		c.flowPackets, c.flowBytes, c.flowMeter, c.flowRules, c.flowBackend,
		c.flowInserted, c.flowFailures, c.flowNotApplicable,
		c.routePackets, c.ecmpPackets, c.ecmpBytes, c.ecmpBuckets, c.fibRoutes, c.fibGroups, c.fibBytes, c.fibLookups, c.puntPackets, c.puntTxDropped,
		c.impairMatched, c.impairActed, c.impairExpired}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.metrics() {
		ch <- m.desc
	}
	ch <- c.pauseDurations
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.src()
	c.mu.Unlock()
	emit := func(m metric, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, v, labels...)
	}
	u := func(m metric, v uint64, labels ...string) { emit(m, float64(v), labels...) }

	emit(c.info, 1, r.Mode)
	if rr := r.Route; rr != nil {
		for _, class := range pipeline.RouteClassNames {
			u(c.routePackets, rr.Classes[class], class)
		}
		for _, reason := range pipeline.Punted {
			u(c.puntPackets, rr.Punts[reason.String()], reason.String())
		}
		u(c.puntTxDropped, rr.PuntTxDropped)
		for _, g := range rr.ECMP {
			for _, m := range g.Members {
				l := []string{strconv.Itoa(int(g.ID)), m.Port, m.Gateway}
				u(c.ecmpPackets, m.Packets, l...)
				u(c.ecmpBytes, m.Bytes, l...)
				emit(c.ecmpBuckets, float64(m.Buckets), l...)
			}
		}
		for fam, st := range rr.FIB {
			emit(c.fibRoutes, float64(st.Routes), fam)
			emit(c.fibGroups, float64(st.GroupsUsed), fam, "used")
			emit(c.fibGroups, float64(st.GroupsFree), fam, "free")
			emit(c.fibGroups, float64(st.GroupsPending), fam, "pending")
			emit(c.fibBytes, float64(st.Bytes), fam)
		}
		for _, answer := range []string{"memo", "walk"} {
			if n, ok := rr.IPv6Lookups[answer]; ok {
				u(c.fibLookups, n, "ipv6", answer)
			}
		}
	}
	for _, ir := range r.Impair {
		l := []string{strconv.Itoa(ir.Rule.ID), ir.Rule.Action.String()}
		u(c.impairMatched, ir.Matched, l...)
		u(c.impairActed, ir.Acted, l...)
		if ir.Expired {
			emit(c.impairExpired, 1, l...)
		} else {
			emit(c.impairExpired, 0, l...)
		}
	}
	emit(c.duration, r.DurationS)
	u(c.queued, r.Queued)
	u(c.generated, r.Generated)
	// Every reason, zeros included, so rate() sees the series from the start.
	for i := pipeline.Reason(0); i < pipeline.NumReasons; i++ {
		u(c.drops, r.Drops[i.String()], i.String())
	}

	for _, p := range r.Ports {
		l := []string{p.Name, p.Driver}
		u(c.portRxPackets, p.RxPackets, l...)
		u(c.portRxBytes, p.RxBytes, l...)
		u(c.portTxPackets, p.TxPackets, l...)
		u(c.portTxBytes, p.TxBytes, l...)
		u(c.portRxMissed, p.RxMissed, l...)
		u(c.portRxErrors, p.RxErrors, l...)
		u(c.portRxNoMbuf, p.RxNoMbuf, l...)
		u(c.portTxErrors, p.TxErrors, l...)
		u(c.portTxDropped, p.TxDropped, l...)
		up, speed := parseLink(p.Link)
		if up {
			emit(c.portLinkUp, 1, l...)
		} else {
			emit(c.portLinkUp, 0, l...)
		}
		if speed > 0 {
			emit(c.portLinkSpeed, speed, l...)
		}
	}

	for _, lc := range r.Lcores {
		l := []string{strconv.Itoa(lc.Lcore), strconv.Itoa(lc.Socket)}
		u(c.lcorePackets, lc.Packets, l...)
		u(c.lcoreBusy, lc.BusyCycles, l...)
		u(c.lcoreBursts, lc.Bursts, l...)
		u(c.lcoreEmpty, lc.EmptyPolls, l...)
		for b := range pipeline.NumStallBounds {
			label := pipeline.StallBoundLabel(b)
			u(c.lcoreStalls, lc.Stalls[label], l[0], l[1], label)
		}
		emit(c.lcoreMaxGap, lc.MaxPollGapUS/1e6, l...)
	}
	if hz := tscHz(); hz > 0 {
		u(c.tscHz, hz)
	}

	for port, tcs := range r.QoS {
		for _, t := range tcs {
			l := []string{port, strconv.Itoa(t.TC)}
			u(c.qosEnqPackets, t.EnqueuedPackets, l...)
			u(c.qosEnqBytes, t.EnqueuedBytes, l...)
			u(c.qosTxPackets, t.TxPackets, l...)
			u(c.qosTxBytes, t.TxBytes, l...)
			u(c.qosECN, t.ECNMarked, l...)
			for reason, v := range qosDrops(t.Dropped) {
				u(c.qosDropped, v, port, l[1], reason)
			}
			u(c.qosDepth, t.DepthBytes, l...)
			u(c.qosMaxDepth, t.MaxDepthBytes, l...)
			emit(c.qosPaused, seconds(t.PausedNs), l...)
		}
	}

	for port, p := range r.PFC {
		if p == nil {
			continue
		}
		emit(c.pfcMode, 1, port, p.Mode)
		for i := range qos.NumTC {
			l := []string{port, strconv.Itoa(i)}
			u(c.pfcRxFrames, p.RxFrames[i], l...)
			u(c.pfcRxXOFF, p.RxXOFF[i], l...)
			u(c.pfcRxXON, p.RxXON[i], l...)
			emit(c.pfcPaused, seconds(p.PausedNs[i]), l...)
			emit(c.pfcTxPaused, seconds(p.TxPausedNs[i]), l...)
			u(c.pfcTxXOFF, p.TxXOFF[i], l...)
			u(c.pfcTxXON, p.TxXON[i], l...)
			wd := p.Watchdog[i]
			u(c.wdDetected, wd.StormsDetected, l...)
			u(c.wdRestored, wd.StormsRestored, l...)
			u(c.wdDropped, wd.Dropped, l...)
			emit(c.wdInStorm, boolf(wd.InStorm), l...)
			buckets := map[float64]uint64{}
			var n uint64
			for b, bound := range qos.PauseBuckets {
				n += p.Pauses[i][b]
				buckets[seconds(bound)] = n
			}
			n += p.Pauses[i][len(qos.PauseBuckets)]
			ch <- prometheus.MustNewConstHistogram(c.pauseDurations, n, seconds(p.PauseNs[i]), buckets, l...)
		}
		u(c.pfcRxPause, p.RxPause, port)
		u(c.pfcTxFrames, p.TxFrames, port)
		u(c.pfcTxFailed, p.TxFailed, port)
	}

	if r.Flows != nil {
		c.collectFlows(r.Flows, emit)
	}

	if r.RoCE == nil {
		return
	}
	for _, p := range r.RoCE.Ports {
		n := p.Name
		u(c.roceFrames, p.Frames, n)
		u(c.roceBytes, p.Bytes, n)
		u(c.roceRoCEFrames, p.RoCE, n)
		u(c.roceRoCEBytes, p.RoCEBytes, n)
		u(c.roceOther, p.Other, n)
		u(c.roceIP, p.IPv4, n, "4")
		u(c.roceIP, p.IPv6, n, "6")
		for name, v := range p.Opcodes {
			op, ok := opcodeByName[name]
			transport, code := "", ""
			if ok {
				transport, code = op.Transport().String(), "0x"+strconv.FormatUint(uint64(op), 16)
			}
			u(c.roceOpcode, v, n, transport, name, code)
		}
		u(c.roceCNP, p.CNPs, n)
		for _, ecn := range rocestats.ECNNames {
			u(c.roceECN, p.ECN[ecn], n, ecn)
		}
		u(c.roceICRC, p.ICRCOK, n, "ok")
		u(c.roceICRC, p.ICRCBad, n, "bad")
		for i := roce.Reason(1); i < roce.NumReasons; i++ { // 0 is "none"
			u(c.roceMalformed, p.Malformed[i.String()], n, i.String())
		}
		u(c.rocePFC, p.PFC, n)
		u(c.rocePause, p.Pause, n)
		for tc, v := range p.TC {
			u(c.roceTC, v, n, strconv.Itoa(tc))
		}
	}
	t := r.RoCE.QPTable
	emit(c.qpSlots, float64(t.Slots))
	emit(c.qpBytes, float64(t.Bytes))
	emit(c.qpUsed, float64(t.Used))
	emit(c.qpFlows, float64(r.RoCE.QPFlows))
	u(c.qpInserts, t.Inserts)
	u(c.qpEvictions, t.Evictions)
	u(c.qpAged, t.Aged)
	for _, f := range r.TopQPs {
		l := []string{f.Src, f.Dst, fmt.Sprintf("0x%06x", f.QP)} // as "show roce qp" prints it
		u(c.qpPackets, f.Packets, l...)
		u(c.qpFlowBytes, f.Bytes, l...)
	}
}

// tscHz is the TSC frequency, 0 before EAL starts; a variable for tests.
var tscHz = dpdk.TSCHz

// collectFlows reports every port's flow rules. Each NIC rule's counter
// is a query to the PMD, so a port's rules are listed once per scrape.
func (c *collector) collectFlows(f daemon.FlowRules, emit func(m metric, v float64, labels ...string)) {
	u := func(m metric, v uint64, labels ...string) { emit(m, float64(v), labels...) }
	for _, st := range f.Ports() {
		port := st.Name
		emit(c.flowBackend, 1, port, st.Backend.String(), st.Caps.Engine, st.Caps.Driver)
		emit(c.flowRules, float64(st.HW), port, offload.InHardware.String())
		emit(c.flowRules, float64(st.SW), port, offload.InSoftware.String())
		u(c.flowInserted, st.Inserted, port)
		u(c.flowFailures, st.Failed, port)
		u(c.flowNotApplicable, f.NotApplicable(st.ID), port)
		entries, err := f.List(st.ID, nil)
		if err != nil {
			continue // only a port the manager does not know fails
		}
		for _, e := range entries {
			// A NIC rule without a count action (or whose query failed)
			// has no number to give; a series would claim zero hits.
			if !e.Counted {
				continue
			}
			id := strconv.FormatUint(uint64(e.Rule.ID), 10)
			l := []string{port, id, strconv.FormatUint(uint64(e.Rule.Group), 10), e.Where.String()}
			u(c.flowPackets, e.Counter.Packets, l...)
			u(c.flowBytes, e.Counter.Bytes, l...)
			if swMeter(e) {
				u(c.flowMeter, e.Counter.Green, port, id, "green")
				u(c.flowMeter, e.Counter.Yellow, port, id, "yellow")
				u(c.flowMeter, e.Counter.Red, port, id, "red")
			}
		}
	}
}

// swMeter says whether the entry's colour counters mean something: only
// the software table counts colours; a NIC meter's are not queried.
func swMeter(e offload.Entry) bool {
	if e.Where != offload.InSoftware {
		return false
	}
	for _, a := range e.Rule.Actions {
		if a.Type == flowrule.ActMeter {
			return true
		}
	}
	return false
}

// opcodeByName recovers the opcode from the names the Report uses.
var opcodeByName = func() map[string]roce.Opcode {
	m := make(map[string]roce.Opcode, 256)
	for op := 255; op >= 0; op-- { // reserved opcodes may share a name: keep the lowest
		m[roce.Opcode(op).String()] = roce.Opcode(op)
	}
	return m
}()

func qosDrops(d pipeline.QoSDrops) map[string]uint64 {
	return map[string]uint64{"tail": d.Tail, "wred": d.WRED, "watchdog": d.Watchdog, "lossless_overflow": d.LosslessOverflow}
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// parseLink reads dpdk.Link.String(): "down", "up, speed unknown, ...",
// "up, 100 Gbps, full-duplex" or "up, 100 Mbps, ...". The speed is in
// bytes per second, 0 when unknown.
func parseLink(s string) (up bool, speed float64) {
	f := strings.Split(s, ", ")
	if len(f) == 0 || f[0] != "up" {
		return false, 0
	}
	if len(f) < 2 {
		return true, 0
	}
	num, unit, ok := strings.Cut(f[1], " ")
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil {
		return true, 0
	}
	switch unit {
	case "Gbps":
		return true, n * 1e9 / 8
	case "Mbps":
		return true, n * 1e6 / 8
	}
	return true, 0
}
