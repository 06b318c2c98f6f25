package telemetry

import (
	"errors"
	"fmt"
	"strconv"

	"roce-fwd/daemon"
	"roce-fwd/dpdk"
	"roce-fwd/offload"
	"roce-fwd/qos"
)

// DPDK telemetry commands. Each reply must fit DPDK 22.11's 16 KiB and
// 256 entries per dict, so per-TC and per-priority counters are arrays
// indexed by TC or priority, and /roce/qos and /roce/pfc take a port name
// to narrow the reply to one port. /roce/flows takes the port always: a
// port's rules are what fills a reply.
var dpdkCommands = []struct {
	cmd, help string
	fn        func(r daemon.Report, params string) (any, error)
}{
	{"/roce/stats", "roce-fwd port counters, drops, RoCE summary", statsReply},
	{"/roce/qos", "roce-fwd QoS per port, arrays by TC. Param: port", qosReply},
	{"/roce/pfc", "roce-fwd PFC per port, arrays by priority. Param: port", pfcReply},
	{"/roce/lcores", "roce-fwd worker lcores: packets, cycles, polls", lcoresReply},
	{"/roce/flows", "roce-fwd flow rules of a port with their hits. Param: port", flowsReply},
	{"/roce/offload", "roce-fwd flow rule backend and counts per port. Param: port", offloadReply},
	{"/roce/route", "roce-fwd routed path: packets per route class, FIB sizes and IPv6 lookups by answer, ECMP members' packets and bytes", routeReply},
	{"/roce/impair", "roce-fwd impairment rules: line, packets matched and acted on, expired", impairReply},
}

func impairReply(r daemon.Report, _ string) (any, error) {
	rules := []any{}
	for _, ir := range r.Impair {
		rules = append(rules, dict{"id": ir.Rule.ID, "rule": ir.Rule.String(), "action": ir.Rule.Action.String(),
			"matched": ir.Matched, "acted": ir.Acted, "expired": ir.Expired})
	}
	return dict{"rules": rules}, nil
}

func routeReply(r daemon.Report, _ string) (any, error) {
	if r.Route == nil {
		return dict{"routed": false}, nil
	}
	groups := []any{}
	for _, g := range r.Route.ECMP {
		var members []any
		for _, m := range g.Members {
			members = append(members, dict{"port": m.Port, "gateway": m.Gateway, "weight": m.Weight, "buckets": m.Buckets,
				"packets": m.Packets, "bytes": m.Bytes})
		}
		groups = append(groups, dict{"id": g.ID, "buckets": g.Buckets, "routes": g.Routes, "members": members})
	}
	fibs := dict{}
	for fam, st := range r.Route.FIB {
		f := dict{"routes": st.Routes, "groups_used": st.GroupsUsed, "groups_free": st.GroupsFree, "bytes": st.Bytes}
		if fam == "ipv6" && r.Route.IPv6Lookups != nil {
			f["lookups_memo"], f["lookups_walk"] = r.Route.IPv6Lookups["memo"], r.Route.IPv6Lookups["walk"]
		}
		fibs[fam] = f
	}
	classes := dict{}
	for k, v := range r.Route.Classes {
		classes[k] = v
	}
	return dict{"routed": true, "classes": classes, "fib": fibs, "ecmp": groups}, nil
}

// DPDKCommands lists the /roce/* commands RegisterDPDK adds.
func DPDKCommands() []string {
	out := make([]string, len(dpdkCommands))
	for i, c := range dpdkCommands {
		out[i] = c.cmd
	}
	return out
}

// RegisterDPDK adds the /roce/* commands to EAL's telemetry socket
// (dpdk-telemetry.py -f <file-prefix>). src is called on DPDK's telemetry
// thread, once per command.
func RegisterDPDK(src Source) error {
	for _, c := range dpdkCommands {
		fn := c.fn
		err := dpdk.RegisterTelemetry(c.cmd, c.help, func(params string) (any, error) {
			return fn(src(), params)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

type dict = map[string]any

func statsReply(r daemon.Report, _ string) (any, error) {
	ports := dict{}
	for _, p := range r.Ports {
		ports[p.Name] = dict{
			"port_id": p.PortID, "driver": p.Driver, "link": p.Link,
			"rx_packets": p.RxPackets, "rx_bytes": p.RxBytes, "tx_packets": p.TxPackets, "tx_bytes": p.TxBytes,
			"rx_missed": p.RxMissed, "rx_errors": p.RxErrors, "rx_nombuf": p.RxNoMbuf,
			"tx_errors": p.TxErrors, "tx_dropped": p.TxDropped,
		}
	}
	out := dict{
		"mode": r.Mode, "duration_ms": uint64(r.DurationS * 1000),
		"ports": ports, "drops": r.Drops, "queued": r.Queued, "pfc_generated": r.Generated,
	}
	if r.RoCE != nil {
		rp := dict{}
		for _, p := range r.RoCE.Ports {
			rp[p.Name] = dict{
				"frames": p.Frames, "bytes": p.Bytes, "roce": p.RoCE, "roce_bytes": p.RoCEBytes, "other": p.Other,
				"cnp": p.CNPs, "ecn": p.ECN, "icrc_ok": p.ICRCOK, "icrc_bad": p.ICRCBad,
				"malformed": p.Malformed, "pfc": p.PFC, "pause": p.Pause,
			}
		}
		out["roce"] = rp
		out["qp_table"] = dict{
			"flows": r.RoCE.QPFlows, "slots": r.RoCE.QPTable.Slots, "bytes": r.RoCE.QPTable.Bytes, "used": r.RoCE.QPTable.Used,
			"inserts": r.RoCE.QPTable.Inserts, "evictions": r.RoCE.QPTable.Evictions, "aged": r.RoCE.QPTable.Aged,
		}
	}
	return out, nil
}

// onePort narrows a per-port reply to the port named by params, if any.
func onePort[T any](m map[string]T, params string) (map[string]T, error) {
	if params == "" {
		return m, nil
	}
	v, ok := m[params]
	if !ok {
		return nil, fmt.Errorf("no port %q", params)
	}
	return map[string]T{params: v}, nil
}

func qosReply(r daemon.Report, params string) (any, error) {
	ports, err := onePort(r.QoS, params)
	if err != nil {
		return nil, err
	}
	out := dict{}
	for name, tcs := range ports {
		n := len(tcs)
		a := func() []uint64 { return make([]uint64, n) }
		enqP, enqB, txP, txB, ecn := a(), a(), a(), a(), a()
		tail, wred, wd, overflow, depth, maxDepth, paused := a(), a(), a(), a(), a(), a(), a()
		share := make([]float64, n) // of the packets queued, the share marked CE, since the start
		for i, t := range tcs {
			if t.EnqueuedPackets > 0 {
				share[i] = float64(t.ECNMarked) / float64(t.EnqueuedPackets)
			}
			enqP[i], enqB[i], txP[i], txB[i], ecn[i] = t.EnqueuedPackets, t.EnqueuedBytes, t.TxPackets, t.TxBytes, t.ECNMarked
			tail[i], wred[i], wd[i], overflow[i] = t.Dropped.Tail, t.Dropped.WRED, t.Dropped.Watchdog, t.Dropped.LosslessOverflow
			depth[i], maxDepth[i], paused[i] = t.DepthBytes, t.MaxDepthBytes, uint64(max(t.PausedNs, 0))
		}
		out[name] = dict{
			"enqueued_packets": enqP, "enqueued_bytes": enqB, "tx_packets": txP, "tx_bytes": txB,
			"ecn_marked": ecn, "ce_marked_share": share, "drop_tail": tail, "drop_wred": wred, "drop_watchdog": wd,
			"drop_lossless_overflow": overflow, "depth_bytes": depth, "max_depth_bytes": maxDepth, "paused_ns": paused,
		}
	}
	return out, nil
}

func pfcReply(r daemon.Report, params string) (any, error) {
	ports, err := onePort(r.PFC, params)
	if err != nil {
		return nil, err
	}
	out := dict{}
	for name, p := range ports {
		if p == nil {
			continue
		}
		var paused, detected, restored, wdDropped, inStorm [qos.NumTC]uint64
		for i := range qos.NumTC {
			paused[i] = uint64(max(p.PausedNs[i], 0))
			w := p.Watchdog[i]
			detected[i], restored[i], wdDropped[i] = w.StormsDetected, w.StormsRestored, w.Dropped
			if w.InStorm {
				inStorm[i] = 1
			}
		}
		out[name] = dict{
			"mode": p.Mode, "rx_frames": p.RxFrames, "rx_xoff": p.RxXOFF, "rx_xon": p.RxXON, "rx_pause": p.RxPause,
			"paused_ns": paused, "tx_xoff": p.TxXOFF, "tx_xon": p.TxXON, "tx_frames": p.TxFrames, "tx_failed": p.TxFailed,
			"watchdog_storms_detected": detected, "watchdog_storms_restored": restored,
			"watchdog_dropped": wdDropped, "watchdog_in_storm": inStorm,
			"tx_paused_ns": p.TxPausedNs, "pause_durations": p.Pauses, "pause_duration_bounds_ns": qos.PauseBuckets, "pause_ns_ended": p.PauseNs,
		}
	}
	return out, nil
}

// lcoresReply is keyed by lcore id. Ratios are strings with one decimal:
// DPDK 22.11 telemetry has no floating-point type.
func lcoresReply(r daemon.Report, _ string) (any, error) {
	out := dict{}
	for _, l := range r.Lcores {
		out[strconv.Itoa(l.Lcore)] = dict{
			"socket": l.Socket, "queues": l.Queues, "packets": l.Packets,
			"busy_cycles": l.BusyCycles, "bursts": l.Bursts, "empty_polls": l.EmptyPolls,
			"cycles_per_packet": strconv.FormatFloat(l.CyclesPerPacket, 'f', 1, 64),
			"empty_poll_pct":    strconv.FormatFloat(l.EmptyPollPct(), 'f', 1, 64),
			"mpps":              strconv.FormatFloat(l.Mpps, 'f', 3, 64),
			"stalls":            l.Stalls,
			"max_poll_gap_us":   strconv.FormatFloat(l.MaxPollGapUS, 'f', 1, 64),
		}
	}
	return out, nil
}

// flowPort finds a port of the flow rules manager by name, or by id as the
// console's flow commands accept it.
func flowPort(f daemon.FlowRules, param string) (offload.PortStatus, error) {
	if f == nil {
		return offload.PortStatus{}, errors.New("no flow rules")
	}
	ports := f.Ports()
	for _, st := range ports {
		if st.Name == param {
			return st, nil
		}
	}
	if id, err := strconv.ParseUint(param, 10, 16); err == nil {
		for _, st := range ports {
			if st.ID == uint16(id) {
				return st, nil
			}
		}
	}
	return offload.PortStatus{}, fmt.Errorf("no port %q", param)
}

// flowsReply is one port's rules keyed by rule id, as "flow list" shows
// them. packets and bytes are absent when nothing counts the rule (a NIC
// rule without a count action); green, yellow and red come with software
// meters. DPDK leaves out the rules that do not fit its 16 KiB reply
// (some 160 or more); /metrics and the console have them all.
func flowsReply(r daemon.Report, params string) (any, error) {
	if params == "" {
		return nil, errors.New("/roce/flows needs a port: /roce/flows,<port>")
	}
	st, err := flowPort(r.Flows, params)
	if err != nil {
		return nil, err
	}
	entries, err := r.Flows.List(st.ID, nil)
	if err != nil {
		return nil, err
	}
	rules := dict{}
	for _, e := range entries {
		rule := dict{"id": e.Rule.ID, "group": e.Rule.Group, "priority": e.Rule.Priority, "where": e.Where.String()}
		if e.Counted {
			rule["packets"], rule["bytes"] = e.Counter.Packets, e.Counter.Bytes
		}
		if e.CountErr != nil {
			rule["count_error"] = e.CountErr.Error()
		}
		if swMeter(e) {
			rule["green"], rule["yellow"], rule["red"] = e.Counter.Green, e.Counter.Yellow, e.Counter.Red
		}
		rules[strconv.FormatUint(uint64(e.Rule.ID), 10)] = rule
	}
	return dict{st.Name: rules}, nil
}

// offloadReply is "show offload" in brief, per port.
func offloadReply(r daemon.Report, params string) (any, error) {
	if r.Flows == nil {
		return dict{}, nil
	}
	var ports []offload.PortStatus
	if params == "" {
		ports = r.Flows.Ports()
	} else {
		st, err := flowPort(r.Flows, params)
		if err != nil {
			return nil, err
		}
		ports = []offload.PortStatus{st}
	}
	out := dict{}
	for _, st := range ports {
		out[st.Name] = dict{
			"port_id": st.ID, "driver": st.Caps.Driver, "backend": st.Backend.String(), "engine": st.Caps.Engine,
			"rules_hw": st.HW, "rules_sw": st.SW, "inserted": st.Inserted, "failed": st.Failed, "destroyed": st.Destroyed,
			"not_applicable": r.Flows.NotApplicable(st.ID),
		}
	}
	return out, nil
}
