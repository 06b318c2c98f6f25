package console

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"roce-fwd/config"
	"roce-fwd/daemon"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
)

// New returns the shell of a running daemon.
func New(d *daemon.Daemon) *Shell {
	s := &Shell{d: d}
	s.ports = func() []Port {
		var out []Port
		d.Do(func() {
			for _, p := range d.Ports.Ports {
				out = append(out, Port{ID: int(p.ID), Name: p.Name})
			}
		})
		return out
	}
	s.flows = func() (m *offload.Manager) {
		d.Do(func() { m = d.Flows })
		return m
	}
	s.add(commands()...)
	s.add(routeCommands()...)
	s.add(captureCommands()...)
	s.add(impairCommands()...)
	return s
}

// newGrammar is the shell without a daemon: enough to parse, complete
// and explain command lines.
func newGrammar(ports []Port) *Shell {
	s := &Shell{ports: func() []Port { return ports }}
	s.add(commands()...)
	s.add(routeCommands()...)
	s.add(captureCommands()...)
	s.add(impairCommands()...)
	return s
}

// portIDs turns "<port>|all" words into ids (nil: all).
func portIDs(w string) []int {
	if w == "all" {
		return nil
	}
	id, _ := strconv.Atoi(w)
	return []int{id}
}

// ok is what a command that changes something prints on success.
func ok(jsonOut bool, msg string) (string, error) {
	if jsonOut {
		return asJSON(map[string]any{"ok": true, "message": msg})
	}
	return msg + "\n", nil
}

func commands() []*Command {
	return []*Command{
		// Control.
		{Syntax: "help [<rest>]", Section: "control", Help: "sections, a section's commands, or a command's grammar",
			Run: func(s *Shell, w []string, _ bool) (string, error) { return s.help(w), nil }},
		{Syntax: "quit|exit", Section: "control", Help: "leave the console (a daemon keeps running)",
			Run: func(*Shell, []string, bool) (string, error) { return "", ErrQuit }},
		{Syntax: "start", Section: "control", Help: "start forwarding",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				if err := s.d.Start(); err != nil {
					return "", err
				}
				return ok(j, "Forwarding started in "+s.mode()+" mode")
			}},
		{Syntax: "stop", Section: "control", Help: "stop forwarding (ports keep running); prints the forwarding stats",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				if err := s.d.Stop(); err != nil {
					return "", err
				}
				return s.showFwdStats(j)
			}},
		{Syntax: "reload", Section: "control", Help: "re-read the config file and apply what can change live (tables, QoS); list what needs a restart",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				changes, err := s.d.Reload()
				if err != nil {
					return "", err
				}
				return changesText(j, changes)
			}},

		// Display.
		{Syntax: "show fwd stats all", Section: "display", Help: "per-port forwarding counters, lcores, drops by reason",
			Run: func(s *Shell, _ []string, j bool) (string, error) { return s.showFwdStats(j) }},
		{Syntax: "clear fwd stats all", Section: "display", Help: "start the forwarding counters over",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				s.d.ClearFwdStats()
				return ok(j, "Forwarding statistics cleared")
			}},
		{Syntax: "show port info|stats|xstats|summary <port>|all", Section: "display", Help: "port information, counters (rates since last show), extended counters, or a one-line summary",
			Run: (*Shell).showPort},
		{Syntax: "clear port stats|xstats <port>|all", Section: "display", Help: "reset a port's counters",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.ClearPortStats(portIDs(w[3]), w[2] == "xstats"); err != nil {
					return "", err
				}
				return ok(j, fmt.Sprintf("NIC %s cleared for port %s", map[string]string{"stats": "statistics", "xstats": "extended statistics"}[w[2]], w[3]))
			}},
		{Syntax: "show config fwd|cores|rxtx", Section: "display", Help: "forwarding streams, forwarding lcores, queue and descriptor setup",
			Run: (*Shell).showConfig},
		{Syntax: "show lcores", Section: "display", Help: "per worker lcore: queues, packets, Mpps and cycles/packet since last show, empty polls, burst sizes",
			Run: (*Shell).showLcores},
		{Syntax: "show errors", Section: "display", Help: "every drop and error counter by stage and reason, non-zero first",
			Run: (*Shell).showErrors},
		{Syntax: "show numa", Section: "display", Help: "NUMA topology and the lcore/queue placement in force",
			Run: (*Shell).showNUMA},
		{Syntax: "show hugepages", Section: "display", Help: "the memory plan EAL was started with",
			Run: (*Shell).showHugepages},
		{Syntax: "show running-config", Section: "display", Help: "the effective configuration as TOML (presets expanded)",
			Run: (*Shell).showRunningConfig},
		{Syntax: "show offload [<port>|all]", Section: "display", Help: "per port: flow rule backend and why, what the probe found (engine, validate matrix, trial rule), rules in hardware and software, insertion counts and time",
			Run: (*Shell).showOffload},

		// RoCE.
		{Syntax: "show roce stats [<port>]", Section: "roce", Help: "RoCEv2 classification counters per rx port",
			Run: (*Shell).showRoCEStats},
		{Syntax: "show roce qp [top <n>] [by bytes|packets|naks|cnp|gaps|marked|held|qos_drops]", Section: "roce", Help: "the busiest queue pairs (default top 20 by bytes)",
			Run: (*Shell).showRoCEQP},
		{Syntax: "clear roce stats", Section: "roce", Help: "start the RoCE counters over and empty the QP tables",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				s.d.ClearRoCEStats()
				return ok(j, "RoCE statistics and QP tables cleared")
			}},

		// QoS.
		{Syntax: "show qos [<port>]", Section: "qos", Help: "per TC: scheduler, weight, ECN profile, depth, enqueued, tx, ECN-marked, drops, paused time",
			Run: (*Shell).showQoS},
		{Syntax: "show pfc [<port>]", Section: "qos", Help: "per priority: PFC frames received and sent, paused time; watchdog state; who does PFC",
			Run: (*Shell).showPFC},
		{Syntax: "show pfc victims [top <n>]", Section: "qos", Help: "the QPs whose packets waited in a queue paused by PFC, and how many, with what else QoS did to them",
			Run: func(s *Shell, w []string, j bool) (string, error) { return s.showVictims(w, j, "held") }},
		{Syntax: "show ecn marks [top <n>]", Section: "qos", Help: "the QPs whose packets roce-fwd's WRED-ECN marked CE, and how many",
			Run: func(s *Shell, w []string, j bool) (string, error) { return s.showVictims(w, j, "marked") }},
		{Syntax: "show pfc history [<port>|all]", Section: "qos", Help: "the link partner's last pauses (priority, TC, start, duration, XOFF frames, ended by XON or run out) and the watchdog's storms",
			Run: (*Shell).showPFCHistory},
		{Syntax: "set qos ecn <port> <tc> min <size> max <size> prob <p>", Section: "qos", Help: "set a TC's WRED-ECN profile (sizes like 150KB, 1.5MB)",
			Run: (*Shell).setQoSECN},
		{Syntax: "set qos dscp <dscp> tc <tc>", Section: "qos", Help: "map a DSCP value to a traffic class",
			Run: (*Shell).setQoSDSCP},
		{Syntax: "set pfc watchdog <port> <tc> on|off", Section: "qos", Help: "turn the PFC watchdog on or off for one TC",
			Run: (*Shell).setPFCWatchdog},
		{Syntax: "set pfc watchdog <port> <tc> action drop|forward|alert", Section: "qos", Help: "what the watchdog does in a storm on one TC",
			Run: (*Shell).setPFCWatchdog},

		// Flow rules.
		{Syntax: "flow [<rest>]", Section: "flow", Help: flowHelp,
			Run: (*Shell).flow, CompleteRest: (*Shell).completeFlow},

		// Configuration.
		{Syntax: "port start|stop <port>|all", Section: "config", Help: "start or stop ports (stop forwarding before stopping a port)",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				var err error
				if w[1] == "start" {
					err = s.d.PortStart(portIDs(w[2]))
				} else {
					err = s.d.PortStop(portIDs(w[2]))
				}
				if err != nil {
					return "", err
				}
				return ok(j, fmt.Sprintf("Port %s %s", w[2], map[string]string{"start": "started", "stop": "stopped"}[w[1]]))
			}},
		{Syntax: "set promisc <port>|all on|off", Section: "config", Help: "promiscuous mode",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.SetPromisc(portIDs(w[2]), w[3] == "on"); err != nil {
					return "", err
				}
				return ok(j, fmt.Sprintf("Promiscuous mode %s on port %s", w[3], w[2]))
			}},
		{Syntax: "set fwd io|mac|roce", Section: "config", Help: "forwarding mode (forwarding must be stopped)",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.SetFwdMode(w[2]); err != nil {
					return "", err
				}
				return ok(j, "Set "+w[2]+" packet forwarding mode")
			}},
	}
}

func (s *Shell) mode() string {
	var m string
	s.d.Do(func() { m = s.d.Cfg.Pipeline.Mode })
	return m
}

func changesText(jsonOut bool, changes []config.Change) (string, error) {
	if jsonOut {
		list := []string{}
		for _, c := range changes {
			list = append(list, c.String())
		}
		return asJSON(map[string]any{"ok": true, "applied": list})
	}
	if len(changes) == 0 {
		return "Config reloaded: no change\n", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Config reloaded: %d change(s) applied\n", len(changes))
	for _, c := range changes {
		fmt.Fprintf(&b, "  %s\n", c)
	}
	return b.String(), nil
}

func (s *Shell) showFwdStats(jsonOut bool) (string, error) {
	rep := s.d.Report()
	if jsonOut {
		return asJSON(rep)
	}
	var b strings.Builder
	rep.WriteText(&b)
	return b.String(), nil
}

func (s *Shell) showPort(w []string, jsonOut bool) (string, error) {
	ids := portIDs(w[3])
	var b strings.Builder
	switch w[2] {
	case "stats":
		rep := s.d.Report()
		var out []daemon.PortReport
		for _, p := range rep.Ports {
			if ids == nil || ids[0] == p.PortID {
				out = append(out, p)
			}
		}
		if jsonOut {
			return asJSON(out)
		}
		for _, p := range out {
			fmt.Fprintf(&b, "\n  ######################## NIC statistics for port %-2d ########################\n", p.PortID)
			fmt.Fprintf(&b, "  RX-packets: %-10d RX-missed: %-10d RX-bytes:  %d\n", p.RxPackets, p.RxMissed, p.RxBytes)
			fmt.Fprintf(&b, "  RX-errors: %d\n  RX-nombuf:  %-10d\n", p.RxErrors, p.RxNoMbuf)
			fmt.Fprintf(&b, "  TX-packets: %-10d TX-errors: %-10d TX-bytes:  %d\n", p.TxPackets, p.TxErrors, p.TxBytes)
			if p.IntervalS > 0 {
				fmt.Fprintf(&b, "\n  Throughput (since last show, %.3f s)\n", p.IntervalS)
			} else {
				fmt.Fprintf(&b, "\n  Throughput (first show: rates start from here)\n")
			}
			fmt.Fprintf(&b, "  Rx-pps: %12.0f          Rx-bps: %12.0f\n  Tx-pps: %12.0f          Tx-bps: %12.0f\n", p.RxPPS, p.RxBPS, p.TxPPS, p.TxBPS)
			fmt.Fprintf(&b, "  ############################################################################\n")
		}
	case "xstats":
		type xs struct {
			Port   int               `json:"port_id"`
			XStats map[string]uint64 `json:"xstats"`
		}
		var out []xs
		var err error
		s.d.Do(func() {
			for _, p := range s.d.Ports.Ports {
				if ids != nil && ids[0] != int(p.ID) {
					continue
				}
				list, e := p.ID.XStats()
				if e != nil {
					err = e
					return
				}
				x := xs{Port: int(p.ID), XStats: map[string]uint64{}}
				fmt.Fprintf(&b, "###### NIC extended statistics for port %-2d #########\n", p.ID)
				for _, st := range list {
					x.XStats[st.Name] = st.Value
					fmt.Fprintf(&b, "%s: %d\n", st.Name, st.Value)
				}
				b.WriteString("#################################################\n")
				out = append(out, x)
			}
		})
		if err != nil {
			return "", err
		}
		if jsonOut {
			return asJSON(out)
		}
	case "info", "summary":
		type info struct {
			ID       int    `json:"port_id"`
			Name     string `json:"name"`
			Device   string `json:"device"`
			Driver   string `json:"driver"`
			MAC      string `json:"mac"`
			Socket   int    `json:"socket"`
			Started  bool   `json:"started"`
			Link     string `json:"link"`
			MTU      int    `json:"mtu"`
			Promisc  bool   `json:"promiscuous"`
			RxQueues int    `json:"rx_queues"`
			TxQueues int    `json:"tx_queues"`
			RxDesc   int    `json:"rx_desc"`
			TxDesc   int    `json:"tx_desc"`
			MaxRxQ   int    `json:"max_rx_queues"`
			MaxTxQ   int    `json:"max_tx_queues"`
			RSS      string `json:"rss"`
			IPv4Cksm bool   `json:"rx_ipv4_checksum_offload"`
		}
		var out []info
		s.d.Do(func() {
			for _, p := range s.d.Ports.Ports {
				if ids != nil && ids[0] != int(p.ID) {
					continue
				}
				link, _ := p.ID.Link(false)
				mtu, _ := p.ID.MTU()
				rss, _ := p.RSS()
				out = append(out, info{ID: int(p.ID), Name: p.Name, Device: p.ID.Name(), Driver: p.Info.Driver, MAC: p.MAC.String(),
					Socket: p.DevSocket, Started: p.Started, Link: link.String(), MTU: mtu, Promisc: p.ID.Promiscuous(),
					RxQueues: p.Cfg.RxQueues, TxQueues: p.Cfg.TxQueues, RxDesc: p.Cfg.RxDesc, TxDesc: p.Cfg.TxDesc,
					MaxRxQ: p.Info.MaxRxQueues, MaxTxQ: p.Info.MaxTxQueues, RSS: rss, IPv4Cksm: p.IPv4ChecksumOffload()})
			}
		})
		if jsonOut {
			return asJSON(out)
		}
		if w[2] == "summary" {
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			fmt.Fprintf(&b, "Number of available ports: %d\n", len(s.ports()))
			fmt.Fprintln(tw, "Port\tMAC Address\tName\tDevice\tDriver\tStatus\tLink")
			for _, i := range out {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i.ID, i.MAC, i.Name, i.Device, i.Driver, upDown(i.Started), i.Link)
			}
			tw.Flush()
			break
		}
		for _, i := range out {
			fmt.Fprintf(&b, "\n********************* Infos for port %-2d  *********************\n", i.ID)
			fmt.Fprintf(&b, "MAC address: %s\nName: %s\nDevice name: %s\nDriver name: %s\nConnect to socket: %d\n",
				i.MAC, i.Name, i.Device, i.Driver, i.Socket)
			fmt.Fprintf(&b, "Port status: %s\nLink: %s\nMTU: %d\nPromiscuous mode: %s\n", upDown(i.Started), i.Link, i.MTU, onOff(i.Promisc))
			fmt.Fprintf(&b, "Current number of RX queues: %d (max %d), %d descriptors\nCurrent number of TX queues: %d (max %d), %d descriptors\n",
				i.RxQueues, i.MaxRxQ, i.RxDesc, i.TxQueues, i.MaxTxQ, i.TxDesc)
			fmt.Fprintf(&b, "RSS: %s\nRx IPv4 checksum offload: %s\n", i.RSS, onOff(i.IPv4Cksm))
		}
	}
	return b.String(), nil
}

func upDown(b bool) string {
	if b {
		return "started"
	}
	return "stopped"
}

func onOff(b bool) string {
	if b {
		return "enabled"
	}
	return "disabled"
}

func (s *Shell) showConfig(w []string, jsonOut bool) (string, error) {
	var b strings.Builder
	type stream struct {
		Lcore  int    `json:"lcore"`
		Socket int    `json:"socket"`
		Rx     string `json:"rx"`
		Tx     string `json:"tx"`
	}
	var streams []stream
	var out any
	s.d.Do(func() {
		names := map[uint16]string{}
		for _, p := range s.d.Ports.Ports {
			names[uint16(p.ID)] = p.Name
		}
		spec := s.d.Pipe.Spec
		switch w[2] {
		case "fwd":
			fmt.Fprintf(&b, "%s packet forwarding%s - ports=%d - cores=%d - burst=%d\n", spec.Mode, map[bool]string{true: " with egress QoS"}[spec.QoS != nil],
				len(s.d.Ports.Ports), len(spec.Workers), spec.Burst)
			for _, ws := range spec.Workers {
				fmt.Fprintf(&b, "Logical Core %d (socket %d) forwards packets on %d streams:\n", ws.Lcore, ws.Socket, len(ws.Rx))
				for _, rx := range ws.Rx {
					st := stream{Lcore: ws.Lcore, Socket: ws.Socket, Rx: fmt.Sprintf("%d/%d", rx.Port, rx.Queue), Tx: strconv.Itoa(int(rx.To))}
					streams = append(streams, st)
					fmt.Fprintf(&b, "  RX P=%d/Q=%d (%s) -> TX P=%d (%s)\n", rx.Port, rx.Queue, names[rx.Port], rx.To, names[rx.To])
				}
			}
			out = map[string]any{"mode": spec.Mode.String(), "burst": spec.Burst, "qos": spec.QoS != nil, "streams": streams}
		case "cores":
			var cores []int
			b.WriteString("List of forwarding lcores:\n")
			for _, ws := range spec.Workers {
				cores = append(cores, ws.Lcore)
				fmt.Fprintf(&b, "  lcore %d (socket %d)\n", ws.Lcore, ws.Socket)
			}
			out = map[string]any{"main_lcore": s.d.Plan.Main.ID, "lcores": cores}
		case "rxtx":
			type q struct {
				Port     string `json:"port"`
				RxQueues int    `json:"rx_queues"`
				TxQueues int    `json:"tx_queues"`
				RxDesc   int    `json:"rx_desc"`
				TxDesc   int    `json:"tx_desc"`
				Pool     string `json:"mempool"`
			}
			var qs []q
			fmt.Fprintf(&b, "  %s packet forwarding packets/burst=%d, max bursts per poll=%d\n", spec.Mode, spec.Burst, max(spec.MaxBursts, 1))
			for _, p := range s.d.Ports.Ports {
				e := q{Port: p.Name, RxQueues: p.Cfg.RxQueues, TxQueues: p.Cfg.TxQueues, RxDesc: p.Cfg.RxDesc, TxDesc: p.Cfg.TxDesc, Pool: p.Pool.Name}
				qs = append(qs, e)
				fmt.Fprintf(&b, "  port %d (%s): RX queues=%d - RX desc=%d - TX queues=%d - TX desc=%d - mempool %s (socket %d)\n",
					p.ID, p.Name, e.RxQueues, e.RxDesc, e.TxQueues, e.TxDesc, e.Pool, p.Socket)
			}
			out = qs
		}
	})
	if jsonOut {
		return asJSON(out)
	}
	return b.String(), nil
}

// lcoreMark is the previous "show lcores", for rates since last show.
type lcoreMark struct {
	at    time.Time
	stats map[int]daemon.LcoreReport
}

func (s *Shell) showLcores(_ []string, jsonOut bool) (string, error) {
	rep := s.d.Snapshot()
	now := time.Now()
	s.mu.Lock()
	prev := s.lastLcores
	s.lastLcores = lcoreMark{at: now, stats: map[int]daemon.LcoreReport{}}
	for _, l := range rep.Lcores {
		s.lastLcores.stats[l.Lcore] = l
	}
	s.mu.Unlock()
	type row struct {
		daemon.LcoreReport
		IntervalS       float64 `json:"interval_s"`
		IntervalMpps    float64 `json:"interval_mpps"`
		IntervalCycles  float64 `json:"interval_cycles_per_packet"`
		EmptyPollsShare float64 `json:"empty_poll_share"`
	}
	var rows []row
	for _, l := range rep.Lcores {
		r := row{LcoreReport: l}
		p, had := prev.stats[l.Lcore] // zero on the first show: since start
		iv := now.Sub(prev.at).Seconds()
		if !had {
			iv = rep.DurationS
		}
		r.IntervalS = iv
		dp := l.Packets - p.Packets
		if iv > 0 {
			r.IntervalMpps = float64(dp) / iv / 1e6
		}
		if dp > 0 {
			r.IntervalCycles = float64(l.BusyCycles-p.BusyCycles) / float64(dp)
		}
		polls := (l.Bursts + l.EmptyPolls) - (p.Bursts + p.EmptyPolls)
		if polls > 0 {
			r.EmptyPollsShare = float64(l.EmptyPolls-p.EmptyPolls) / float64(polls)
		}
		rows = append(rows, r)
	}
	if jsonOut {
		return asJSON(rows)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "lcore\tsocket\tqueues\tpackets\tMpps\tcycles/pkt\tempty polls\tbursts: 0\t1-7\t8-15\t16-31\t32+\tmax gap us\tstalls>50us\t>1ms\t")
	for _, r := range rows {
		h := func(keys ...string) string {
			var n uint64
			for _, k := range keys {
				n += r.BurstHist[k]
			}
			return strconv.FormatUint(n, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%.3f\t%.1f\t%.1f%%\t%s\t%s\t%s\t%s\t%s\t%.1f\t%d\t%d\t\n", r.Lcore, r.Socket, strings.Join(r.Queues, ","), r.Packets,
			r.IntervalMpps, r.IntervalCycles, 100*r.EmptyPollsShare, h("0"), h(histLabels(1, 7)...), h(histLabels(8, 15)...), h(histLabels(16, 31)...), h(histLabels(32, 1<<20)...),
			r.MaxPollGapUS, r.Stalls[pipeline.StallBoundLabel(0)], r.Stalls[pipeline.StallBoundLabel(2)])
	}
	tw.Flush()
	iv := 0.0
	if len(rows) > 0 {
		iv = rows[0].IntervalS
	}
	fmt.Fprintf(&b, "(Mpps, cycles/packet and empty polls since last show, %.3f s; packets, bursts and stalls since start; max gap: the longest between two polls, since start)\n", iv)
	return b.String(), nil
}

// histLabels lists the burst histogram labels whose range falls in lo..hi.
func histLabels(lo, hi int) []string {
	var out []string
	for bkt := 0; bkt < pipeline.HistBuckets; bkt++ {
		l := pipeline.HistBucketLabel(bkt)
		first, _, _ := strings.Cut(strings.TrimSuffix(l, "+"), "-")
		n, err := strconv.Atoi(first)
		if err == nil && n >= lo && n <= hi && l != "0" {
			out = append(out, l)
		}
	}
	return out
}

// errorRow is one counter of "show errors".
type errorRow struct {
	Stage  string `json:"stage"`
	Where  string `json:"where"`
	Reason string `json:"reason"`
	Count  uint64 `json:"count"`
}

func (s *Shell) showErrors(_ []string, jsonOut bool) (string, error) {
	rep := s.d.Snapshot()
	var rows []errorRow
	for _, p := range rep.Ports {
		for _, e := range []struct {
			r string
			n uint64
		}{{"rx_missed", p.RxMissed}, {"rx_errors", p.RxErrors}, {"rx_nombuf", p.RxNoMbuf}, {"tx_errors", p.TxErrors}} {
			rows = append(rows, errorRow{"nic", p.Name, e.r, e.n})
		}
	}
	for _, r := range slices.Sorted(maps.Keys(rep.Drops)) {
		rows = append(rows, errorRow{dropStage(r), "all lcores", r, rep.Drops[r]})
	}
	if rep.RoCE != nil {
		for _, p := range rep.RoCE.Ports {
			rows = append(rows, errorRow{"classify", p.Name, "icrc_bad", p.ICRCBad})
			for _, k := range slices.Sorted(maps.Keys(p.Malformed)) {
				rows = append(rows, errorRow{"classify", p.Name, "malformed_" + k, p.Malformed[k]})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rep.QoS)) {
		for _, t := range rep.QoS[name] {
			where := fmt.Sprintf("%s TC%d", name, t.TC)
			for _, e := range []struct {
				r string
				n uint64
			}{{"qos_tail", t.Dropped.Tail}, {"qos_wred", t.Dropped.WRED}, {"pfc_watchdog", t.Dropped.Watchdog}, {"lossless_overflow", t.Dropped.LosslessOverflow}} {
				if e.n != 0 {
					rows = append(rows, errorRow{"qos", where, e.r, e.n})
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rep.PFC)) {
		rows = append(rows, errorRow{"pfc", name, "pfc_tx_failed", rep.PFC[name].TxFailed})
	}
	// Non-zero first, each group in its order.
	slices.SortStableFunc(rows, func(a, b errorRow) int {
		switch {
		case (a.Count != 0) == (b.Count != 0):
			return 0
		case a.Count != 0:
			return -1
		}
		return 1
	})
	if jsonOut {
		return asJSON(rows)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "COUNT\tSTAGE\tWHERE\tREASON")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", r.Count, r.Stage, r.Where, r.Reason)
	}
	tw.Flush()
	return b.String(), nil
}

// dropStage names the pipeline stage a drop reason belongs to.
func dropStage(reason string) string {
	if r, ok := pipeline.ReasonNamed(reason); ok {
		return pipeline.Reasons[r].Stage
	}
	return "pipeline"
}

func (s *Shell) showNUMA(_ []string, jsonOut bool) (string, error) {
	var b strings.Builder
	var out map[string]any
	s.d.Do(func() {
		if s.d.Topo != nil {
			b.WriteString(s.d.Topo.String())
		} else {
			b.WriteString("NUMA topology: unknown (could not be read)\n")
		}
		b.WriteString(s.d.Plan.String())
		out = map[string]any{"topology": s.d.Topo, "plan": s.d.Plan}
	})
	if jsonOut {
		return asJSON(out)
	}
	return b.String(), nil
}

func (s *Shell) showHugepages(_ []string, jsonOut bool) (string, error) {
	var b strings.Builder
	var out any
	s.d.Do(func() {
		if s.d.HugePlan == nil {
			fmt.Fprintf(&b, "Memory set by [eal] args: %s\n", strings.Join(s.d.EALArgs, " "))
			out = map[string]any{"eal_args": s.d.EALArgs}
			return
		}
		b.WriteString(s.d.HugePlan.String())
		out = s.d.HugePlan
	})
	if jsonOut {
		return asJSON(out)
	}
	return b.String(), nil
}

func (s *Shell) showRunningConfig(_ []string, jsonOut bool) (string, error) {
	var b strings.Builder
	var err error
	var cfg *config.Config
	s.d.Do(func() {
		cfg = s.d.Cfg
		err = cfg.Encode(&b)
	})
	if err != nil {
		return "", err
	}
	if jsonOut {
		return asJSON(map[string]string{"file": cfg.File, "toml": b.String()})
	}
	return b.String(), nil
}

func (s *Shell) showRoCEStats(w []string, jsonOut bool) (string, error) {
	rep := s.d.Snapshot()
	if rep.RoCE == nil {
		return "", fmt.Errorf("RoCE classification runs in roce mode only (now %s): set fwd roce", rep.Mode)
	}
	name := ""
	if len(w) > 3 {
		name = s.portName(w[3])
	}
	var out []daemon.PortRoCE
	for _, p := range rep.RoCE.Ports {
		if name == "" || p.Name == name {
			out = append(out, p)
		}
	}
	if jsonOut {
		return asJSON(out)
	}
	var b strings.Builder
	for _, p := range out {
		fmt.Fprintf(&b, "RoCE on port %s: %d frames, %d RoCEv2 (%d IPv4, %d IPv6), %d other, %d bytes\n", p.Name, p.Frames, p.RoCE, p.IPv4, p.IPv6, p.Other, p.Bytes)
		fmt.Fprintf(&b, "  CNP %d  ECN not-ect %d ect0 %d ect1 %d ce %d  ICRC ok %d bad %d  PFC %d PAUSE %d\n",
			p.CNPs, p.ECN["not_ect"], p.ECN["ect0"], p.ECN["ect1"], p.ECN["ce"], p.ICRCOK, p.ICRCBad, p.PFC, p.Pause)
		fmt.Fprintf(&b, "  TC %v\n", p.TC)
		for _, k := range slices.Sorted(maps.Keys(p.Opcodes)) {
			fmt.Fprintf(&b, "  %-36s %d\n", k, p.Opcodes[k])
		}
		for _, k := range slices.Sorted(maps.Keys(p.Malformed)) {
			fmt.Fprintf(&b, "  malformed %-26s %d\n", k, p.Malformed[k])
		}
	}
	return b.String(), nil
}

func (s *Shell) portName(id string) string {
	for _, p := range s.ports() {
		if strconv.Itoa(p.ID) == id {
			return p.Name
		}
	}
	return id
}

// qpFlows are the workers' QP tables merged.
func (s *Shell) qpFlows() ([]qpstats.Flow, qpstats.TableStats, error) {
	var flows []qpstats.Flow
	var st qpstats.TableStats
	roce := false
	s.d.Do(func() {
		roce = s.d.Pipe.Spec.Mode == pipeline.ModeRoCE
		flows, st = s.d.Pipe.QPFlows()
	})
	if !roce {
		return nil, st, fmt.Errorf("per-QP telemetry runs in roce mode only: set fwd roce")
	}
	if st.Slots == 0 {
		return nil, st, fmt.Errorf("the QP tables are off: [roce] qp_table = 0")
	}
	return flows, st, nil
}

// showVictims lists the QPs the QoS stage held behind a pause (by
// "held") or marked CE (by "marked"), the ones it never did left out.
func (s *Shell) showVictims(w []string, jsonOut bool, by string) (string, error) {
	n := 20
	if len(w) > 4 && w[3] == "top" {
		n, _ = strconv.Atoi(w[4])
	}
	flows, _, err := s.qpFlows()
	if err != nil {
		return "", err
	}
	top, _ := qpstats.Top(flows, 0, by)
	var reps []qpstats.FlowReport
	for i := range top {
		if r := top[i].Report(); len(reps) < n && (by == "held" && r.HeldPaused > 0 || by == "marked" && r.MarkedCE > 0) {
			reps = append(reps, r)
		}
	}
	if jsonOut {
		return asJSON(reps)
	}
	if len(reps) == 0 {
		return map[string]string{"held": "no QP had packets held by a PFC pause\n", "marked": "no QP had packets marked CE by roce-fwd\n"}[by], nil
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SRC\tDST\tQP\tPACKETS\tHELD-BY-PAUSE\tMARKED-CE\tQOS-DROPS\tCNP")
	for _, f := range reps {
		fmt.Fprintf(tw, "%s\t%s\t0x%06x\t%d\t%d\t%d\t%d\t%d\n", f.Src, f.Dst, f.QP, f.Packets, f.HeldPaused, f.MarkedCE, f.QoSDropped, f.CNPs)
	}
	tw.Flush()
	return b.String(), nil
}

func (s *Shell) showRoCEQP(w []string, jsonOut bool) (string, error) {
	n, by := 20, "bytes"
	for i := 3; i < len(w); i++ {
		switch w[i] {
		case "top":
			n, _ = strconv.Atoi(w[i+1])
			i++
		case "by":
			by = w[i+1]
			i++
		}
	}
	flows, st, err := s.qpFlows()
	if err != nil {
		return "", err
	}
	top, err := qpstats.Top(flows, n, by)
	if err != nil {
		return "", err
	}
	reps := make([]qpstats.FlowReport, len(top))
	for i := range top {
		reps[i] = top[i].Report()
	}
	if jsonOut {
		return asJSON(map[string]any{"qp_table": st, "flows": len(flows), "top": reps})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "QP tables: %d flows in %d slots (%d bytes each, %.1f MiB), %d evictions, %d aged out; top %d by %s\n",
		len(flows), st.Slots, qpstats.SlotBytes, float64(st.Bytes)/(1<<20), st.Evictions, st.Aged, len(reps), by)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SRC\tDST\tQP\tPACKETS\tBYTES\tPSN-GAPS\tOUT-OF-ORDER\tNAKS\tRNR\tCNP\tCE")
	for _, f := range reps {
		naks := uint64(0)
		for _, v := range f.NAKs {
			naks += v
		}
		fmt.Fprintf(tw, "%s\t%s\t0x%06x\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", f.Src, f.Dst, f.QP, f.Packets, f.Bytes, f.Gaps, f.OutOfOrder, naks, f.RNRNAKs, f.CNPs, f.CE)
	}
	tw.Flush()
	return b.String(), nil
}

// qosRow is one TC of "show qos".
type qosRow struct {
	Port      string  `json:"port"`
	TC        int     `json:"tc"`
	Scheduler string  `json:"scheduler"`
	Weight    uint32  `json:"weight"`
	Lossless  bool    `json:"lossless"`
	Limit     uint64  `json:"limit_bytes"`
	ECNMin    uint64  `json:"ecn_min_bytes"`
	ECNMax    uint64  `json:"ecn_max_bytes"`
	ECNProb   float64 `json:"ecn_probability"`
	pipeline.TCQoS
}

func (s *Shell) showQoS(w []string, jsonOut bool) (string, error) {
	rep := s.d.Snapshot()
	if rep.QoS == nil {
		return "", fmt.Errorf("egress QoS is off: set [qos] preset (or [[qos.port]], [pfc]) with mode roce")
	}
	var rows []qosRow
	for _, name := range slices.Sorted(maps.Keys(rep.QoS)) {
		if len(w) > 2 && s.portName(w[2]) != name {
			continue
		}
		cfg, _ := s.d.QoSConfig(name)
		for _, t := range rep.QoS[name] {
			tc := cfg.TC[t.TC]
			rows = append(rows, qosRow{Port: name, TC: t.TC, Scheduler: tc.Mode.String(), Weight: tc.Weight, Lossless: tc.Lossless,
				Limit: tc.Limit, ECNMin: tc.ECN.Min, ECNMax: tc.ECN.Max, ECNProb: tc.ECN.Probability, TCQoS: t})
		}
	}
	if jsonOut {
		return asJSON(rows)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PORT\tTC\tSCHED\tWEIGHT\tLOSSLESS\tLIMIT\tECN MIN/MAX/PROB\tDEPTH\tENQUEUED\tTX\tECN-MARKED\tTAIL\tWRED\tPFCWD\tOVERFLOW\tPAUSED-MS")
	for _, r := range rows {
		ecn := "off"
		if r.ECNMax != 0 {
			ecn = fmt.Sprintf("%s/%s/%g", qos.FormatSize(r.ECNMin), qos.FormatSize(r.ECNMax), r.ECNProb)
		}
		weight := "-"
		if r.Scheduler == "dwrr" {
			weight = strconv.Itoa(int(r.Weight))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%v\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\n", r.Port, r.TC, r.Scheduler, weight, r.Lossless,
			qos.FormatSize(r.Limit), ecn, qos.FormatSize(r.DepthBytes), r.EnqueuedPackets, r.TxPackets, r.ECNMarked,
			r.Dropped.Tail, r.Dropped.WRED, r.Dropped.Watchdog, r.Dropped.LosslessOverflow, float64(r.PausedNs)/1e6)
	}
	tw.Flush()
	return b.String(), nil
}

func (s *Shell) showPFC(w []string, jsonOut bool) (string, error) {
	rep := s.d.Snapshot()
	if rep.PFC == nil {
		return "", fmt.Errorf("PFC is off: egress QoS with a lossless TC turns it on")
	}
	type prio struct {
		Priority  int               `json:"priority"`
		RxFrames  uint64            `json:"rx_frames"`
		RxXOFF    uint64            `json:"rx_xoff"`
		RxXON     uint64            `json:"rx_xon"`
		PausedNs  int64             `json:"paused_ns"`
		TxXOFF    uint64            `json:"tx_xoff"`
		TxXON     uint64            `json:"tx_xon"`
		TxPaused  int64             `json:"tx_paused_ns"` // time our XOFFs paused the partner
		Watchdog  pipeline.Watchdog `json:"watchdog"`
		WDEnabled bool              `json:"watchdog_enabled"`
		WDAction  string            `json:"watchdog_action"`
	}
	type port struct {
		Port     string `json:"port"`
		Mode     string `json:"mode"`
		RxPause  uint64 `json:"rx_pause"`
		TxFrames uint64 `json:"tx_frames"`
		TxFailed uint64 `json:"tx_failed"`
		Prios    []prio `json:"priorities"`
	}
	var out []port
	for _, name := range slices.Sorted(maps.Keys(rep.PFC)) {
		if len(w) > 2 && s.portName(w[2]) != name {
			continue
		}
		p := rep.PFC[name]
		cfg, _ := s.d.QoSConfig(name)
		po := port{Port: name, Mode: p.Mode, RxPause: p.RxPause, TxFrames: p.TxFrames, TxFailed: p.TxFailed}
		tcToPrio := cfg.TCToPrio()
		for i := range qos.NumTC {
			tc := cfg.PrioToTC[i]
			watched := cfg.Watchdog.Enabled && cfg.TC[tc].Lossless && cfg.Watchdog.Off&(1<<tc) == 0 && tcToPrio[tc] == uint8(i)
			po.Prios = append(po.Prios, prio{Priority: i, RxFrames: p.RxFrames[i], RxXOFF: p.RxXOFF[i], RxXON: p.RxXON[i], PausedNs: p.PausedNs[i],
				TxXOFF: p.TxXOFF[i], TxXON: p.TxXON[i], TxPaused: p.TxPausedNs[i], Watchdog: p.Watchdog[tc], WDEnabled: watched, WDAction: cfg.Watchdog.ActionOf(tc).String()})
		}
		out = append(out, po)
	}
	if jsonOut {
		return asJSON(out)
	}
	var b strings.Builder
	for _, po := range out {
		fmt.Fprintf(&b, "PFC on port %s: %s; 802.3x PAUSE received %d; PFC frames sent %d (failed %d)\n", po.Port, po.Mode, po.RxPause, po.TxFrames, po.TxFailed)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PRIO\tRX\tRX-XOFF\tRX-XON\tPAUSED-MS\tTX-XOFF\tTX-XON\tTX-PAUSED-MS\tWATCHDOG\tSTORMS\tRESTORED\tDROPPED\tSTATE")
		for _, p := range po.Prios {
			wd := "off"
			if p.WDEnabled {
				wd = "on, " + p.WDAction
			}
			state := "-"
			if p.WDEnabled {
				state = map[bool]string{true: "storm", false: "ok"}[p.Watchdog.InStorm]
			}
			fmt.Fprintf(tw, "  %d\t%d\t%d\t%d\t%.3f\t%d\t%d\t%.3f\t%s\t%d\t%d\t%d\t%s\n", p.Priority, p.RxFrames, p.RxXOFF, p.RxXON, float64(p.PausedNs)/1e6,
				p.TxXOFF, p.TxXON, float64(p.TxPaused)/1e6, wd, p.Watchdog.StormsDetected, p.Watchdog.StormsRestored, p.Watchdog.Dropped, state)
		}
		tw.Flush()
	}
	return b.String(), nil
}

// qosTC finds (or adds) the [[qos.port]] of port name and its
// [[qos.port.tc]] for tc.
func qosTC(cfg *config.Config, name string, tc int) *config.QoSTC {
	pi := slices.IndexFunc(cfg.QoS.Ports, func(p config.QoSPort) bool { return p.Name == name })
	if pi < 0 {
		cfg.QoS.Ports = append(cfg.QoS.Ports, config.QoSPort{Name: name})
		pi = len(cfg.QoS.Ports) - 1
	}
	qp := &cfg.QoS.Ports[pi]
	ti := slices.IndexFunc(qp.TC, func(t config.QoSTC) bool { return t.TC != nil && *t.TC == tc })
	if ti < 0 {
		n := tc
		qp.TC = append(qp.TC, config.QoSTC{TC: &n})
		ti = len(qp.TC) - 1
	}
	return &qp.TC[ti]
}

func (s *Shell) requireQoS() error {
	var on bool
	s.d.Do(func() { on = s.d.Pipe.Spec.QoS != nil })
	if !on {
		return fmt.Errorf("egress QoS is off: set [qos] preset (or [[qos.port]], [pfc]) in the config with mode roce, and restart")
	}
	return nil
}

func (s *Shell) setQoSECN(w []string, jsonOut bool) (string, error) {
	// set qos ecn <port> <tc> min <size> max <size> prob <p>
	if err := s.requireQoS(); err != nil {
		return "", err
	}
	name, tc := s.portName(w[3]), atoi(w[4])
	prob, _ := strconv.ParseFloat(w[10], 64)
	min, max := w[6], w[8]
	enabled := true
	changes, err := s.d.EditConfig(func(c *config.Config) error {
		t := qosTC(c, name, tc)
		t.ECN = &config.QoSECN{Enabled: &enabled, Min: &min, Max: &max, Probability: &prob}
		return nil
	})
	if err != nil {
		return "", err
	}
	return changesText(jsonOut, changes)
}

func (s *Shell) setQoSDSCP(w []string, jsonOut bool) (string, error) {
	// set qos dscp <dscp> tc <tc>
	changes, err := s.d.EditConfig(func(c *config.Config) error {
		if c.QoS.DSCPToTC == nil {
			c.QoS.DSCPToTC = map[string]int{}
		}
		c.QoS.DSCPToTC[w[3]] = atoi(w[5])
		return nil
	})
	if err != nil {
		return "", err
	}
	return changesText(jsonOut, changes)
}

func (s *Shell) setPFCWatchdog(w []string, jsonOut bool) (string, error) {
	// set pfc watchdog <port> <tc> on|off | action drop|forward|alert
	if err := s.requireQoS(); err != nil {
		return "", err
	}
	name, tc := s.portName(w[3]), atoi(w[4])
	if cfg, _ := s.d.QoSConfig(name); !cfg.TC[tc].Lossless {
		return "", fmt.Errorf("TC %d of port %s is lossy: the PFC watchdog watches lossless TCs only (lossless: %s)", tc, name, qos.MaskList(cfg.LosslessTCs()))
	}
	changes, err := s.d.EditConfig(func(c *config.Config) error {
		t := qosTC(c, name, tc)
		if w[5] == "action" {
			a := w[6]
			t.WatchdogAction = &a
		} else {
			on := w[5] == "on"
			t.Watchdog = &on
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return changesText(jsonOut, changes)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
