package daemon

import (
	"fmt"

	"path/filepath"
	"roce-fwd/config"
	"slices"
	"strings"
	"sync"
	"time"

	"roce-fwd/dpdk"
	"roce-fwd/hwpfc"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/qos"
	"roce-fwd/roce"
)

// fallbackPFCSpeed times pause quanta on a port that reports no link
// speed and has no configured rate (a virtual device): 100 Gbit/s, the
// common RoCE port speed.
const fallbackPFCSpeed = 100e9

// A PFC frame pool per socket: a few frames per port in flight at most.
const (
	pfcPoolSize = 511
	pfcDataRoom = 128 + 64 // RTE_PKTMBUF_HEADROOM + a 60-byte frame
)

// minFrame is the smallest Ethernet frame without FCS, which holds a
// whole mbuf however few bytes it has.
const minFrame = 64

// qosSpec builds the QoS stage from [qos] and [pfc]: per port its egress
// configuration with the shaper rate (the configured rate, else the link
// speed of a NIC; a virtual device's made-up speed is not a limit), and
// its PFC mode (NIC, kernel or software).
func (d *Daemon) qosSpec(set *ports.Set, sysRoot string) (*pipeline.QoSSpec, error) {
	cfg := d.Cfg
	// PFC frames come from pools of their own: XOFF is needed most when
	// the queues hold every mbuf of the data pools.
	spec := &pipeline.QoSSpec{Ports: map[uint16]pipeline.QoSPort{}, Pools: map[int]*dpdk.Mempool{}, Mbufs: cfg.Mempool.Mbufs}
	for sock := range set.Pools {
		pool, err := dpdk.NewPktmbufPool(fmt.Sprintf("rf_pfc_s%d", sock), pfcPoolSize, 0, pfcDataRoom, sock, "")
		if err != nil {
			return nil, fmt.Errorf("PFC frame pool on socket %d: %w", sock, err)
		}
		d.pfcPools = append(d.pfcPools, pool)
		spec.Pools[sock] = pool
	}
	for _, p := range set.Ports {
		qc := portQoS(cfg, p)
		link, err := p.ID.Link(false)
		if err != nil {
			d.log.Warn("link status", "port", p.Name, "err", err)
		}
		linkBps := uint64(link.SpeedMbps) * 1e6
		speed := qc.Rate
		if speed == 0 {
			speed = linkBps
		}
		if speed == 0 {
			speed = fallbackPFCSpeed
		}
		res, err := hwpfc.Resolve(hwpfc.Input{Mode: cfg.PFCMode(), Port: p.Name, Driver: p.Info.Driver, PCI: p.Cfg.PCI,
			Lossless: qc.PFCPriorities(), QoS: qc, HW: p.ID, SysfsRoot: filepath.Join(sysRoot, "sys")})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cfg.File, err)
		}
		d.logPFC(res)
		var mac roce.MAC
		copy(mac[:], p.MAC)
		spec.Ports[uint16(p.ID)] = pipeline.QoSPort{Config: qc, Speed: speed, MAC: mac, Mode: res.Mode}
		rate := "unlimited"
		if qc.Rate != 0 {
			rate = qos.FormatRate(qc.Rate)
		}
		if xoff := qc.PFC.Xoff; qc.PFCPriorities() != 0 && xoff/minFrame > uint64(cfg.Mempool.Mbufs) {
			d.log.Warn("the mbuf pool runs out before PFC pauses a sender of small frames: rx starves (rx_nombuf, rx_missed) instead of XOFF being sent; raise [mempool] mbufs or lower [pfc] xoff",
				"port", p.Name, "xoff", qos.FormatSize(xoff), "mbufs", cfg.Mempool.Mbufs, "xoff_in_64B_frames", xoff/minFrame)
		}
		d.log.Info("egress QoS", "port", p.Name, "preset", qc.Name, "rate", rate, "lossless_tcs", qos.MaskList(qc.LosslessTCs()),
			"pfc", res.Mode, "ecn", ecnSummary(&qc))
	}
	return spec, nil
}

// portQoS is port p's egress QoS under cfg, its shaper at the
// configured rate, else at a NIC's link speed; a virtual device's made-up
// speed is not a limit.
func portQoS(cfg *config.Config, p *ports.Port) qos.Config {
	qc := cfg.PortQoS(p.Name)
	if !cfg.PortRateSet(p.Name) {
		qc.Rate = 0
		if p.Cfg.PCI != "" {
			if link, err := p.ID.Link(false); err == nil {
				qc.Rate = uint64(link.SpeedMbps) * 1e6
			}
		}
	}
	return qc
}

func (d *Daemon) logPFC(r hwpfc.Result) {
	switch r.Mode {
	case hwpfc.Kernel:
		d.log.Warn("PFC on this port belongs to the kernel netdev: apply these commands there", "port", r.Port,
			"netdev", r.Netdev, "detail", r.Detail, "commands", strings.Join(r.Commands, "; "))
	default:
		d.log.Info("PFC mode", "port", r.Port, "mode", r.Mode, "detail", r.Detail)
	}
}

func ecnSummary(c *qos.Config) string {
	var s []string
	for i, t := range c.TC {
		if t.ECN.Enabled() {
			s = append(s, fmt.Sprintf("TC%d %s-%s p=%g", i, qos.FormatSize(t.ECN.Min), qos.FormatSize(t.ECN.Max), t.ECN.Probability))
		}
	}
	return strings.Join(s, "; ")
}

// eventPeriod is how often QoS events are collected from the workers.
const eventPeriod = 100 * time.Millisecond

// logEvents logs the workers' QoS events (PFC storms, lossless
// overflows); d.events calls it every eventPeriod while forwarding.
func (d *Daemon) logEvents() {
	ev, lost := d.Pipe.Events()
	for _, e := range ev {
		port := fmt.Sprint(e.Port)
		if p, ok := d.Pipe.Spec.Ports[e.Port]; ok {
			port = p.Name
		}
		at := time.Unix(0, e.At).UTC().Format(time.RFC3339Nano)
		switch e.Kind {
		case pipeline.EventLosslessOverflow:
			d.log.Error("lossless queue overflow: PFC did not hold the sender back; packets dropped (lossless_overflow)",
				"port", port, "tc", e.TC, "lcore", e.Lcore, "at", at)
		case pipeline.EventStormDetected:
			d.log.Warn("PFC storm detected", "port", port, "tc", e.TC, "action", e.Action.String(), "lcore", e.Lcore, "at", at)
			d.storms.record(e, port)
		default:
			d.log.Info("PFC storm restored", "port", port, "tc", e.TC, "action", e.Action.String(), "lcore", e.Lcore, "at", at)
			d.storms.record(e, port)
		}
	}
	if lost > 0 {
		d.log.Warn("QoS events lost (their counters are exact)", "events", lost)
	}
}

// StormEpisode is one PFC storm the watchdog declared on a TC: when it
// was detected and when restored (0: still on).
type StormEpisode struct {
	Port     string `json:"port"`
	TC       uint8  `json:"tc"`
	Action   string `json:"action"`
	Lcore    int    `json:"lcore"`
	Detected int64  `json:"detected_ns"` // unix ns
	Restored int64  `json:"restored_ns,omitempty"`
}

// stormLog keeps the last storms, for show pfc history.
type stormLog struct {
	mu   sync.Mutex
	list []StormEpisode
}

const stormLogLen = 256

func (s *stormLog) record(e pipeline.Event, port string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Kind == pipeline.EventStormDetected {
		if len(s.list) == stormLogLen {
			s.list = slices.Delete(s.list, 0, 1)
		}
		s.list = append(s.list, StormEpisode{Port: port, TC: e.TC, Action: e.Action.String(), Lcore: e.Lcore, Detected: e.At})
		return
	}
	for i := len(s.list) - 1; i >= 0; i-- {
		if st := &s.list[i]; st.Port == port && st.TC == e.TC && st.Lcore == e.Lcore && st.Restored == 0 {
			st.Restored = e.At
			return
		}
	}
}

// of returns the storms of port, oldest first.
func (s *stormLog) of(port string) []StormEpisode {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []StormEpisode
	for _, st := range s.list {
		if st.Port == port {
			out = append(out, st)
		}
	}
	return out
}
