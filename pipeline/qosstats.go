package pipeline

import (
	"sort"

	"roce-fwd/qos"
)

// egressStats is a copy of one worker's counters of one egress port.
type egressStats struct {
	port      uint16
	tc        [qos.NumTC]qos.TCStats
	wdFlushed [qos.NumTC]uint64
	wd        [qos.NumTC]qos.WDStats
	paused    [qos.NumTC]int64 // ns each TC spent paused
	depth     [qos.NumTC]uint64
	packets   int
}

// ingressStats is a copy of one worker's PFC counters of a port it
// receives from.
type ingressStats struct {
	port         uint16
	rx           qos.PFCRxStats
	paused       [qos.NumTC]int64 // ns per priority the partner paused us
	tx           qos.PFCTxStats
	owner        bool
	sent, failed uint64
}

// publish copies the worker's QoS counters; the worker calls it (from
// a mailbox job) or the control plane does when the worker is stopped.
func (qs *qosStage) publish(now int64) {
	for i := range qs.eg {
		e := &qs.eg[i]
		p := &qs.pub[i]
		p.port = e.port
		for tc := range uint8(qos.NumTC) {
			p.tc[tc] = e.sched.Stats(tc)
			p.wd[tc] = e.wd.Stats(tc)
			p.paused[tc] = e.rx.PausedNanos(e.tcToPrio[tc], now)
			p.depth[tc] = e.sched.Queue(tc).Bytes()
		}
		p.wdFlushed = e.wdFlushed
		_, p.packets = e.sched.Backlog()
	}
	for j := range qs.in {
		in := &qs.in[j]
		p := &qs.pubIn[j]
		p.port = in.port
		in.rx.Settle(now)
		p.rx = in.rx.Stats()
		for prio := range uint8(qos.NumTC) {
			p.paused[prio] = in.rx.PausedNanos(prio, now)
		}
		p.owner = in.pfcTx != nil
		if p.owner {
			p.tx = in.pfcTx.Stats()
			for prio := range uint8(qos.NumTC) {
				p.tx.PausedNs[prio] = in.pfcTx.PausedNanos(prio, now)
			}
		}
		p.sent, p.failed = in.sent, in.failed
	}
}

// TCQoS is one traffic class of one egress port, summed over workers.
type TCQoS struct {
	TC              int      `json:"tc"`
	EnqueuedPackets uint64   `json:"enqueued_packets"`
	EnqueuedBytes   uint64   `json:"enqueued_bytes"`
	TxPackets       uint64   `json:"tx_packets"`
	TxBytes         uint64   `json:"tx_bytes"`
	ECNMarked       uint64   `json:"ecn_marked"`
	Dropped         QoSDrops `json:"dropped"`
	MaxDepthBytes   uint64   `json:"max_depth_bytes"`
	DepthBytes      uint64   `json:"depth_bytes"`
	PausedNs        int64    `json:"paused_ns"`
}

// QoSDrops are a TC's drops by reason.
type QoSDrops struct {
	Tail             uint64 `json:"tail"`
	WRED             uint64 `json:"wred"`
	Watchdog         uint64 `json:"watchdog"`
	LosslessOverflow uint64 `json:"lossless_overflow"`
}

// PortPFC is a port's flow control: what its link partner sent it, what
// roce-fwd sent the partner, and the watchdog of its egress queues.
type PortPFC struct {
	Mode     string            `json:"mode"`
	RxFrames [qos.NumTC]uint64 `json:"rx_frames"` // PFC frames naming each priority
	RxXOFF   [qos.NumTC]uint64 `json:"rx_xoff"`
	RxXON    [qos.NumTC]uint64 `json:"rx_xon"`
	RxPause  uint64            `json:"rx_pause"` // 802.3x PAUSE frames
	PausedNs [qos.NumTC]int64  `json:"paused_ns"`
	// Pauses counts ended pauses per priority by duration (upper bounds
	// qos.PauseBuckets, then longer); PauseNs is their total time.
	Pauses  [qos.NumTC][len(qos.PauseBuckets) + 1]uint64 `json:"pause_durations"`
	PauseNs [qos.NumTC]int64                             `json:"pause_ns_ended"`
	TxXOFF  [qos.NumTC]uint64                            `json:"tx_xoff"`
	// TxPausedNs is the time roce-fwd's XOFFs kept the link partner
	// paused, per priority (from each pause's first XOFF to its XON).
	TxPausedNs [qos.NumTC]int64    `json:"tx_paused_ns"`
	TxXON      [qos.NumTC]uint64   `json:"tx_xon"`
	TxFrames   uint64              `json:"tx_frames"`
	TxFailed   uint64              `json:"tx_failed"` // frames that found no mbuf or tx room
	Watchdog   [qos.NumTC]Watchdog `json:"watchdog"`
}

// Watchdog is one TC's PFC watchdog.
type Watchdog struct {
	StormsDetected uint64 `json:"storms_detected"`
	StormsRestored uint64 `json:"storms_restored"`
	Dropped        uint64 `json:"dropped"`
	InStorm        bool   `json:"in_storm"`
}

// QoSCounters is what the QoS stage counts, summed over the workers from
// one snapshot of each: a report needs all of it, and each snapshot is a
// round trip to every worker.
type QoSCounters struct {
	// Every egress port's TCs and every port's PFC, keyed by port id; nil
	// when the QoS stage is off.
	TCs map[uint16][]TCQoS
	PFC map[uint16]*PortPFC
	// Queued is the packets the QoS queues hold and the impairment rules
	// hold back; Generated, the frames the workers built and sent
	// themselves (PFC, PFC storms, duplicates), which the PMD counts as
	// transmitted.
	Queued, Generated uint64
}

// QoSCounters takes every worker's QoS counters once.
func (p *Pipeline) QoSCounters() QoSCounters {
	var c QoSCounters
	_, made := p.impairCounts()
	c.Queued, c.Generated = uint64(p.heldPackets()), made
	port := func(id uint16) *PortPFC {
		if c.PFC[id] == nil {
			c.PFC[id] = &PortPFC{Mode: p.Spec.QoS.Ports[id].Mode}
		}
		return c.PFC[id]
	}
	for _, w := range p.Workers {
		eg, in := w.qosStats()
		if eg == nil && in == nil {
			continue
		}
		for _, e := range eg {
			c.Queued += uint64(e.packets)
		}
		for _, s := range in {
			c.Generated += s.sent
		}
		if c.TCs == nil {
			c.TCs, c.PFC = map[uint16][]TCQoS{}, map[uint16]*PortPFC{}
		}
		tcs := c.TCs
		for _, e := range eg {
			t := tcs[e.port]
			if t == nil {
				t = make([]TCQoS, qos.NumTC)
				for i := range t {
					t[i].TC = i
				}
				tcs[e.port] = t
			}
			pp := port(e.port)
			cfg := p.Spec.QoS.Ports[e.port].Config
			lossless := cfg.LosslessTCs()
			for i := range t {
				s := &e.tc[i]
				t[i].EnqueuedPackets += s.Queue.EnqPackets
				t[i].EnqueuedBytes += s.Queue.EnqBytes
				t[i].TxPackets += s.Queue.DeqPackets
				t[i].TxBytes += s.Queue.DeqBytes
				t[i].ECNMarked += s.WRED.Marked
				full := s.Queue.DropFull + s.Queue.DropSlots
				if lossless&(1<<i) != 0 {
					t[i].Dropped.LosslessOverflow += full
				} else {
					t[i].Dropped.Tail += full
				}
				t[i].Dropped.WRED += s.WRED.Dropped
				t[i].Dropped.Watchdog += s.DropPFCWD + e.wdFlushed[i]
				t[i].MaxDepthBytes = max(t[i].MaxDepthBytes, s.Queue.MaxBytes)
				t[i].DepthBytes += e.depth[i]
				t[i].PausedNs = max(t[i].PausedNs, e.paused[i])
				wd := &pp.Watchdog[i]
				wd.StormsDetected += e.wd[i].Detected
				wd.StormsRestored += e.wd[i].Restored
				wd.Dropped += s.DropPFCWD + e.wdFlushed[i]
				wd.InStorm = wd.InStorm || e.wd[i].InStorm
			}
		}
		for _, s := range in {
			pp := port(s.port)
			for i := range qos.NumTC {
				pp.RxFrames[i] += s.rx.Frames[i]
				pp.RxXOFF[i] += s.rx.XOFF[i]
				pp.RxXON[i] += s.rx.XON[i]
				for b, n := range s.rx.Pauses[i] {
					pp.Pauses[i][b] += n
				}
				pp.PauseNs[i] += s.rx.PauseNs[i]
				pp.PausedNs[i] = max(pp.PausedNs[i], s.paused[i])
				pp.TxXOFF[i] += s.tx.XOFF[i]
				pp.TxPausedNs[i] += s.tx.PausedNs[i]
				pp.TxXON[i] += s.tx.XON[i]
			}
			pp.RxPause += s.rx.Pause
			pp.TxFrames += s.sent
			pp.TxFailed += s.failed
		}
	}
	return c
}

// QoS reports every egress port's TCs and every port's PFC (QoSCounters).
func (p *Pipeline) QoS() (map[uint16][]TCQoS, map[uint16]*PortPFC) {
	c := p.QoSCounters()
	return c.TCs, c.PFC
}

// qosStats returns copies of the worker's QoS counters.
func (w *Worker) qosStats() ([]egressStats, []ingressStats) {
	qs := w.qs
	if qs == nil {
		return nil, nil
	}
	// Sized here: a job allocates nothing on the worker.
	eg, in := make([]egressStats, len(qs.pub)), make([]ingressStats, len(qs.pubIn))
	w.do("QoS counters snapshot", func() bool {
		qs.publish(w.clockNow())
		copy(eg, qs.pub)
		copy(in, qs.pubIn)
		return true
	})
	sort.Slice(eg, func(i, j int) bool { return eg[i].port < eg[j].port })
	return eg, in
}

// PFCHistory is port's last pauses per priority as its link partner
// imposed them (up to 256 ended ones per worker that receives from the
// port, and the ones still open), oldest first.
func (p *Pipeline) PFCHistory(port uint16) []qos.PauseEpisode {
	var out []qos.PauseEpisode
	for _, w := range p.Workers {
		if w.qs == nil {
			continue
		}
		for j := range w.qs.in {
			if w.qs.in[j].port != port {
				continue
			}
			buf := make([]qos.PauseEpisode, 0, qos.HistoryCap) // sized here: the job allocates nothing
			w.do("PFC history", func() bool {
				buf = w.qs.in[j].rx.History(w.clockNow(), buf)
				return true
			})
			out = append(out, buf...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}
