package telemetry

import (
	"fmt"
	"strconv"

	"roce-fwd/daemon"
	"roce-fwd/dpdk"
	"roce-fwd/qos"
)

// DPDK telemetry commands. Each reply must fit DPDK 22.11's 16 KiB and
// 256 entries per dict, so per-TC and per-priority counters are arrays
// indexed by TC or priority, and /roce/qos and /roce/pfc take a port name
// to narrow the reply to one port.
var dpdkCommands = []struct {
	cmd, help string
	fn        func(r daemon.Report, params string) (any, error)
}{
	{"/roce/stats", "roce-fwd port counters, drops, RoCE summary", statsReply},
	{"/roce/qos", "roce-fwd QoS per port, arrays by TC. Param: port", qosReply},
	{"/roce/pfc", "roce-fwd PFC per port, arrays by priority. Param: port", pfcReply},
	{"/roce/lcores", "roce-fwd worker lcores: packets, cycles, polls", lcoresReply},
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
			"flows": r.RoCE.QPFlows, "slots": r.RoCE.QPTable.Slots, "used": r.RoCE.QPTable.Used,
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
		for i, t := range tcs {
			enqP[i], enqB[i], txP[i], txB[i], ecn[i] = t.EnqueuedPackets, t.EnqueuedBytes, t.TxPackets, t.TxBytes, t.ECNMarked
			tail[i], wred[i], wd[i], overflow[i] = t.Dropped.Tail, t.Dropped.WRED, t.Dropped.Watchdog, t.Dropped.LosslessOverflow
			depth[i], maxDepth[i], paused[i] = t.DepthBytes, t.MaxDepthBytes, uint64(max(t.PausedNs, 0))
		}
		out[name] = dict{
			"enqueued_packets": enqP, "enqueued_bytes": enqB, "tx_packets": txP, "tx_bytes": txB,
			"ecn_marked": ecn, "drop_tail": tail, "drop_wred": wred, "drop_watchdog": wd,
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
		}
	}
	return out, nil
}

// lcoresReply is keyed by lcore id. Ratios are strings with one decimal:
// DPDK 22.11 telemetry has no floating-point type.
func lcoresReply(r daemon.Report, _ string) (any, error) {
	out := dict{}
	for _, l := range r.Lcores {
		polls := l.Bursts + l.EmptyPolls
		empty := 0.0
		if polls > 0 {
			empty = 100 * float64(l.EmptyPolls) / float64(polls)
		}
		out[strconv.Itoa(l.Lcore)] = dict{
			"socket": l.Socket, "queues": l.Queues, "packets": l.Packets,
			"busy_cycles": l.BusyCycles, "bursts": l.Bursts, "empty_polls": l.EmptyPolls,
			"cycles_per_packet": strconv.FormatFloat(l.CyclesPerPacket, 'f', 1, 64),
			"empty_poll_pct":    strconv.FormatFloat(empty, 'f', 1, 64),
			"mpps":              strconv.FormatFloat(l.Mpps, 'f', 3, 64),
		}
	}
	return out, nil
}
