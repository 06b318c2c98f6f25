package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"roce-fwd/capture"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
	"roce-fwd/rocestats"
)

// Report is the final (or current) statistics, in the documented
// --stats-json format; fields beyond the documented ones are additions.
type Report struct {
	DurationS float64           `json:"duration_s"`
	Mode      string            `json:"mode"`
	Ports     []PortReport      `json:"ports"`
	Lcores    []LcoreReport     `json:"lcores"`
	Drops     map[string]uint64 `json:"drops"`
	// "roce" mode only.
	// Queued is what the QoS queues and the impairment rules hold (0
	// after a clean stop): packets received + generated = transmitted +
	// drops + queued. Generated is the frames roce-fwd built and sent
	// itself (PFC, an impairment's storms and duplicates), which the
	// ports count as transmitted too.
	Queued    uint64                       `json:"queued"`
	Generated uint64                       `json:"generated"`
	QoS       map[string][]pipeline.TCQoS  `json:"qos,omitempty"`
	PFC       map[string]*pipeline.PortPFC `json:"pfc,omitempty"`
	RoCE      *RoCEReport                  `json:"roce,omitempty"`
	TopQPs    []qpstats.FlowReport         `json:"top_qps,omitempty"`
	Route     *RouteReport                 `json:"route,omitempty"` // routed configs only
	// Impair is the impairment rules with their counters, if any.
	Impair []ImpairRule `json:"impair,omitempty"`
	// Capture is the capture running or last run, if any: its packets
	// written and lost (selected while its rings were full).
	Capture *capture.Status `json:"capture,omitempty"`
	// Flows reads the flow rules on demand rather than copying them: a
	// NIC rule's counter is a query to the PMD, which only the exports
	// that show rules should pay for.
	Flows FlowRules `json:"-"`
}

// FlowRules is what the exports read of the flow rules manager
// (*offload.Manager).
type FlowRules interface {
	Ports() []offload.PortStatus
	List(port uint16, groups []uint32) ([]offload.Entry, error)
	NotApplicable(port uint16) uint64
}

// RoCEReport is the classification counters per rx port and the state of
// the per-QP tables.
type RoCEReport struct {
	Ports   []PortRoCE         `json:"ports"`
	QPTable qpstats.TableStats `json:"qp_table"`
	QPFlows int                `json:"qp_flows"`
}

// PortRoCE is one rx port's RoCE counters.
type PortRoCE struct {
	Name string `json:"name"`
	rocestats.Report
}

// TopQPs is how many QP flows the report lists.
const TopQPs = 20

// PortReport is one port's ethdev counters plus what workers dropped
// on their way to it.
type PortReport struct {
	Name      string `json:"name"`
	PortID    int    `json:"port_id"`
	Driver    string `json:"driver"`
	Link      string `json:"link"`
	RxPackets uint64 `json:"rx_packets"`
	RxBytes   uint64 `json:"rx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxBytes   uint64 `json:"tx_bytes"`
	RxMissed  uint64 `json:"rx_missed"`
	RxErrors  uint64 `json:"rx_errors"`
	RxNoMbuf  uint64 `json:"rx_nombuf"`
	TxErrors  uint64 `json:"tx_errors"`
	TxDropped uint64 `json:"tx_dropped"` // the PMD refused them after every retry
	// Rates since the previous report (0 in the first).
	IntervalS float64 `json:"interval_s"`
	RxPPS     float64 `json:"rx_pps"`
	TxPPS     float64 `json:"tx_pps"`
	RxBPS     float64 `json:"rx_bps"`
	TxBPS     float64 `json:"tx_bps"`
}

// LcoreReport is one worker's counters.
type LcoreReport struct {
	Lcore           int               `json:"lcore"`
	Socket          int               `json:"socket"`
	Queues          []string          `json:"queues"`
	Packets         uint64            `json:"packets"`
	Mpps            float64           `json:"mpps"`
	CyclesPerPacket float64           `json:"cycles_per_packet"`
	BusyCycles      uint64            `json:"busy_cycles"` // TSC cycles of polls that carried packets
	Bursts          uint64            `json:"bursts"`
	EmptyPolls      uint64            `json:"empty_polls"`
	BurstHist       map[string]uint64 `json:"burst_hist"`
	// Stalls counts the polls that started longer than a bound ("50us",
	// "200us", "1ms", "10ms") after the one before: time in which the
	// worker read none of its rx queues. MaxPollGapUS is the longest gap
	// since forwarding started, in microseconds.
	Stalls       map[string]uint64 `json:"stalls"`
	MaxPollGapUS float64           `json:"max_poll_gap_us"`
}

// EmptyPollPct is the share of polls that returned nothing, in percent.
func (l *LcoreReport) EmptyPollPct() float64 {
	if polls := l.Bursts + l.EmptyPolls; polls > 0 {
		return 100 * float64(l.EmptyPolls) / float64(polls)
	}
	return 0
}

// Report collects the counters now, with port rates since the previous
// Report ("since last show"). The duration is since forwarding started.
func (d *Daemon) Report() Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.report(true)
}

// Snapshot is Report without rates and without moving the "since last
// show" mark: for Prometheus and DPDK telemetry.
func (d *Daemon) Snapshot() Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.report(false)
}

func (d *Daemon) report(rates bool) Report {
	end := time.Now()
	if !d.Pipe.Running() && !d.Stopped.IsZero() {
		end = d.Stopped
	}
	dur := end.Sub(d.Started)
	r := Report{DurationS: dur.Seconds(), Mode: d.Cfg.Pipeline.Mode, Drops: map[string]uint64{}}
	if d.Flows != nil { // a nil *Manager would make a non-nil FlowRules
		r.Flows = d.Flows
	}
	txDropped := map[uint16]uint64{}
	for _, w := range d.Pipe.Workers {
		for _, t := range w.TxQueues() {
			txDropped[t.Port] += t.Dropped
		}
	}
	for port, n := range d.base.txDropped {
		txDropped[port] -= n
	}
	for _, p := range d.Ports.Ports {
		var snap ports.Snapshot
		var err error
		if rates {
			snap, err = p.Snapshot()
		} else {
			snap, err = p.Peek()
		}
		if err != nil {
			d.log.Warn("port stats", "err", err)
		}
		st := snap.Stats
		r.Ports = append(r.Ports, PortReport{
			Name: p.Name, PortID: int(p.ID), Driver: p.Info.Driver, Link: snap.Link.String(),
			RxPackets: st.RxPackets, RxBytes: st.RxBytes, TxPackets: st.TxPackets, TxBytes: st.TxBytes,
			RxMissed: st.RxMissed, RxErrors: st.RxErrors, RxNoMbuf: st.RxNoMbuf, TxErrors: st.TxErrors,
			TxDropped: txDropped[uint16(p.ID)],
			IntervalS: snap.Interval.Seconds(), RxPPS: snap.RxPPS, TxPPS: snap.TxPPS, RxBPS: snap.RxBPS, TxBPS: snap.TxBPS,
		})
	}
	for i := pipeline.Reason(0); i < pipeline.NumReasons; i++ {
		r.Drops[i.String()] = 0
	}
	for _, s := range d.Pipe.Stats() {
		if b, ok := d.base.lcores[s.Lcore]; ok {
			s = s.Sub(b)
		}
		lr := LcoreReport{Lcore: s.Lcore, Socket: s.Socket, Queues: s.Queues, Packets: s.Packets,
			CyclesPerPacket: s.CyclesPerPacket(), BusyCycles: s.BusyCycles, Bursts: s.Bursts, EmptyPolls: s.EmptyPolls,
			BurstHist: map[string]uint64{}, Stalls: map[string]uint64{}, MaxPollGapUS: float64(s.MaxPollGap) / 1e3}
		if dur > 0 {
			lr.Mpps = float64(s.Packets) / dur.Seconds() / 1e6
		}
		for b, v := range s.Hist {
			if v != 0 {
				lr.BurstHist[pipeline.HistBucketLabel(b)] = v
			}
		}
		for b, v := range s.Stalls {
			lr.Stalls[pipeline.StallBoundLabel(b)] = v
		}
		for reason, v := range s.Drops {
			r.Drops[pipeline.Reason(reason).String()] += v
		}
		r.Lcores = append(r.Lcores, lr)
	}
	qc := d.Pipe.QoSCounters() // one snapshot per worker for all of it
	r.Queued, r.Generated = qc.Queued, qc.Generated
	if d.taps.capture != nil {
		st := d.taps.capture.Status()
		r.Capture = &st
	}
	if d.Pipe.Spec.QoS != nil {
		tcs, pfc := qc.TCs, qc.PFC
		r.QoS, r.PFC = map[string][]pipeline.TCQoS{}, map[string]*pipeline.PortPFC{}
		for id, t := range tcs {
			r.QoS[d.Pipe.Spec.Ports[id].Name] = t
		}
		for id, p := range pfc {
			r.PFC[d.Pipe.Spec.Ports[id].Name] = p
		}
	}
	if d.Cfg.Pipeline.Mode == "roce" {
		r.RoCE = &RoCEReport{}
		byPort := d.Pipe.RoCEByPort()
		for _, p := range d.Ports.Ports {
			if c, ok := byPort[uint16(p.ID)]; ok {
				if b, ok := d.base.roce[uint16(p.ID)]; ok {
					c.Sub(&b)
				}
				r.RoCE.Ports = append(r.RoCE.Ports, PortRoCE{Name: p.Name, Report: c.Report()})
			}
		}
		d.qpMu.Lock()
		flows, st := d.Pipe.QPFlowsInto(d.qpFlows)
		d.qpFlows = flows
		r.RoCE.QPTable, r.RoCE.QPFlows = st, len(flows)
		top, _ := qpstats.Top(flows, TopQPs, "bytes") // copies: safe past the unlock
		d.qpMu.Unlock()
		for i := range top {
			r.TopQPs = append(r.TopQPs, top[i].Report())
		}
	}
	r.Route = d.routeReport()
	r.Impair, _ = d.impairRules()
	return r
}

// WriteJSON writes the report as indented JSON.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report in testpmd's layout.
func (r Report) WriteText(w io.Writer) {
	for _, p := range r.Ports {
		title := fmt.Sprintf(" Forward statistics for port %d (%s) ", p.PortID, p.Name)
		fmt.Fprintf(w, "  %s%s%s\n", strings.Repeat("-", 22), title, strings.Repeat("-", max(2, 54-len(title))))
		fmt.Fprintf(w, "  RX-packets: %-14d RX-missed: %-14d RX-bytes:  %d\n", p.RxPackets, p.RxMissed, p.RxBytes)
		fmt.Fprintf(w, "  RX-errors:  %-14d RX-nombuf: %d\n", p.RxErrors, p.RxNoMbuf)
		fmt.Fprintf(w, "  TX-packets: %-14d TX-dropped: %-13d TX-bytes:  %d\n", p.TxPackets, p.TxDropped, p.TxBytes)
		if p.IntervalS >= 0.1 { // a shorter interval gives noise, not a rate
			fmt.Fprintf(w, "  Throughput (since last show, %.1f s): Rx-pps: %-12.0f Rx-bps: %-14.0f Tx-pps: %-12.0f Tx-bps: %.0f\n",
				p.IntervalS, p.RxPPS, p.RxBPS, p.TxPPS, p.TxBPS)
		}
		fmt.Fprintf(w, "  Link: %s, driver %s\n", p.Link, p.Driver)
	}
	fmt.Fprintf(w, "  %s\n", strings.Repeat("-", 78))
	for _, l := range r.Lcores {
		fmt.Fprintf(w, "  lcore %d (socket %d) polls %s: %d packets, %.2f Mpps, %.1f cycles/packet, %.1f%% empty polls\n",
			l.Lcore, l.Socket, strings.Join(l.Queues, " "), l.Packets, l.Mpps, l.CyclesPerPacket, l.EmptyPollPct())
		if polls := l.Bursts + l.EmptyPolls; polls > 0 {
			var parts []string
			for b := 0; b < pipeline.HistBuckets; b++ {
				label := pipeline.HistBucketLabel(b)
				if v := l.BurstHist[label]; v != 0 {
					parts = append(parts, fmt.Sprintf("%s: %.1f%%", label, 100*float64(v)/float64(polls)))
				}
			}
			fmt.Fprintf(w, "    packets per poll  %s\n", strings.Join(parts, "  "))
			var stalls []string
			for b := range pipeline.NumStallBounds {
				label := pipeline.StallBoundLabel(b)
				stalls = append(stalls, fmt.Sprintf("%s %d", label, l.Stalls[label]))
			}
			fmt.Fprintf(w, "    longest gap between polls %.1f us; gaps over %s\n", l.MaxPollGapUS, strings.Join(stalls, ", "))
		}
	}
	var drops []string
	for _, name := range slices.Sorted(maps.Keys(r.Drops)) {
		if v := r.Drops[name]; v != 0 {
			drops = append(drops, fmt.Sprintf("%s %d", name, v))
		}
	}
	if len(drops) == 0 {
		drops = []string{"none"}
	}
	fmt.Fprintf(w, "  Drops by reason: %s\n", strings.Join(drops, ", "))
	if r.RoCE != nil {
		r.RoCE.writeText(w, r.TopQPs)
	}
	r.writeQoSText(w)
	if c := r.Capture; c != nil {
		fmt.Fprintf(w, "  Capture to %s: %d packets written, %d lost (its rings were full)\n", c.File, c.Written, c.Lost)
	}
	fmt.Fprintf(w, "  Forwarded for %.1f s in %s mode\n", r.DurationS, r.Mode)
}

func (rr *RoCEReport) writeText(w io.Writer, top []qpstats.FlowReport) {
	for _, p := range rr.Ports {
		share := 0.0
		if p.Frames > 0 {
			share = 100 * float64(p.RoCE) / float64(p.Frames)
		}
		fmt.Fprintf(w, "  RoCE on port %s: %d of %d frames (%.1f%%), CNP %d, ECN ect0 %d ect1 %d ce %d not-ect %d, ICRC ok %d bad %d",
			p.Name, p.RoCE, p.Frames, share, p.CNPs, p.ECN["ect0"], p.ECN["ect1"], p.ECN["ce"], p.ECN["not_ect"], p.ICRCOK, p.ICRCBad)
		var mal []string
		for _, k := range slices.Sorted(maps.Keys(p.Malformed)) {
			mal = append(mal, fmt.Sprintf("%s %d", k, p.Malformed[k]))
		}
		if len(mal) > 0 {
			fmt.Fprintf(w, ", malformed: %s", strings.Join(mal, ", "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "  QP tables: %d flows in %d slots (%.1f MiB of DPDK memory), %d evictions, %d aged out\n",
		rr.QPFlows, rr.QPTable.Slots, float64(rr.QPTable.Bytes)/(1<<20), rr.QPTable.Evictions, rr.QPTable.Aged)
	for _, f := range top[:min(len(top), 5)] {
		naks := uint64(0)
		for _, n := range f.NAKs {
			naks += n
		}
		fmt.Fprintf(w, "    %s -> %s qp 0x%06x: %d packets, %d bytes, PSN gaps %d, out of order %d, NAKs %d, RNR %d, CNP %d, CE %d\n",
			f.Src, f.Dst, f.QP, f.Packets, f.Bytes, f.Gaps, f.OutOfOrder, naks, f.RNRNAKs, f.CNPs, f.CE)
	}
}

// writeQoSText prints the TCs that carried traffic and each port's PFC.
func (r Report) writeQoSText(w io.Writer) {
	for _, name := range slices.Sorted(maps.Keys(r.QoS)) {
		header := false
		for _, t := range r.QoS[name] {
			if t.EnqueuedPackets == 0 && t.PausedNs == 0 && t.Dropped == (pipeline.QoSDrops{}) {
				continue
			}
			if !header {
				header = true
				fmt.Fprintf(w, "  QoS on port %s:\n", name)
				fmt.Fprintf(w, "    %-3s %12s %12s %10s %8s %8s %8s %9s %12s %10s\n",
					"TC", "ENQUEUED", "TX", "ECN-MARKED", "TAIL", "WRED", "PFCWD", "OVERFLOW", "MAX-DEPTH", "PAUSED-MS")
			}
			fmt.Fprintf(w, "    %-3d %12d %12d %10d %8d %8d %8d %9d %12s %10.3f\n", t.TC, t.EnqueuedPackets, t.TxPackets,
				t.ECNMarked, t.Dropped.Tail, t.Dropped.WRED, t.Dropped.Watchdog, t.Dropped.LosslessOverflow,
				qos.FormatSize(t.MaxDepthBytes), float64(t.PausedNs)/1e6)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.PFC)) {
		p := r.PFC[name]
		var parts []string
		for i := range qos.NumTC {
			if p.RxFrames[i]+p.TxXOFF[i]+p.TxXON[i] != 0 || p.PausedNs[i] != 0 {
				parts = append(parts, fmt.Sprintf("prio %d rx %d (xoff %d xon %d) paused %.3f ms, tx xoff %d xon %d",
					i, p.RxFrames[i], p.RxXOFF[i], p.RxXON[i], float64(p.PausedNs[i])/1e6, p.TxXOFF[i], p.TxXON[i]))
			}
			if wd := p.Watchdog[i]; wd.StormsDetected != 0 {
				parts = append(parts, fmt.Sprintf("TC%d watchdog storms %d restored %d dropped %d", i, wd.StormsDetected, wd.StormsRestored, wd.Dropped))
			}
		}
		if p.RxPause != 0 {
			parts = append(parts, fmt.Sprintf("802.3x pause rx %d", p.RxPause))
		}
		if len(parts) == 0 {
			parts = []string{"no frames"}
		}
		fmt.Fprintf(w, "  PFC on port %s (%s): %s\n", name, p.Mode, strings.Join(parts, "; "))
	}
}
