package daemon

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"roce-fwd/config"
	"roce-fwd/pipeline"
	"roce-fwd/ports"
	"roce-fwd/qos"
	"roce-fwd/rocestats"
)

// What the console and reload change on a running daemon. Every exported
// method here takes the daemon's lock: console clients, SIGHUP and the
// scrapers may call them concurrently.

// baseline is the counters at the last "clear": reports show what was
// counted since.
type baseline struct {
	lcores    map[int]pipeline.LcoreStats
	txDropped map[uint16]uint64
	roce      map[uint16]rocestats.Counters
}

// Do runs f with the daemon locked, for readers of its fields (plan,
// ports, config) that must not see them change halfway.
func (d *Daemon) Do(f func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f()
}

// ClearFwdStats starts the workers' counters (packets, cycles, drops)
// and the duration over from now, like testpmd's "clear fwd stats all".
func (d *Daemon) ClearFwdStats() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.base.lcores = map[int]pipeline.LcoreStats{}
	for _, s := range d.Pipe.Stats() {
		d.base.lcores[s.Lcore] = s
	}
	d.base.txDropped = map[uint16]uint64{}
	for _, w := range d.Pipe.Workers {
		for _, t := range w.TxQueues() {
			d.base.txDropped[t.Port] += t.Dropped
		}
	}
	d.Started = time.Now()
	if !d.Pipe.Running() {
		d.Stopped = d.Started
	}
}

// ClearPortStats resets the ethdev counters of the ports given (all when
// none), like testpmd's "clear port stats".
func (d *Daemon) ClearPortStats(ids []int, xstats bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.selectPorts(ids) {
		if xstats {
			errs = append(errs, p.ID.ResetXStats())
		} else {
			errs = append(errs, p.ID.ResetStats())
		}
	}
	return errors.Join(errs...)
}

// ClearRoCEStats starts the RoCE counters over and empties the QP tables.
func (d *Daemon) ClearRoCEStats() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.base.roce = map[uint16]rocestats.Counters{}
	for id, c := range d.Pipe.RoCEByPort() {
		d.base.roce[id] = *c
	}
	d.Pipe.ResetQPTables()
}

func (d *Daemon) selectPorts(ids []int) []*ports.Port {
	if len(ids) == 0 {
		return d.Ports.Ports
	}
	var out []*ports.Port
	for _, p := range d.Ports.Ports {
		for _, id := range ids {
			if int(p.ID) == id {
				out = append(out, p)
			}
		}
	}
	return out
}

// Start starts forwarding (testpmd "start").
func (d *Daemon) Start() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe.Running() {
		return errors.New("forwarding is already started")
	}
	for _, p := range d.Ports.Ports {
		if !p.Started {
			return fmt.Errorf("port %d (%s) is stopped: start it first (port start %d)", p.ID, p.Name, p.ID)
		}
	}
	return d.startForwarding()
}

// Stop stops forwarding (testpmd "stop"); the ports keep running.
func (d *Daemon) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.Pipe.Running() {
		return errors.New("forwarding is not started")
	}
	d.stopForwarding()
	return nil
}

// PortStart starts the given ports (all when none).
func (d *Daemon) PortStart(ids []int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.selectPorts(ids) {
		errs = append(errs, p.Start())
	}
	errs = append(errs, d.flowsStarted())
	return errors.Join(errs...)
}

// PortStop stops the given ports (all when none); forwarding must be
// stopped first, since the workers poll every port.
func (d *Daemon) PortStop(ids []int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe.Running() {
		return errors.New("forwarding is running: stop it first (stop)")
	}
	var errs []error
	for _, p := range d.selectPorts(ids) {
		if p.Started && d.Flows != nil {
			if err := d.Flows.Stopping(uint16(p.ID)); err != nil {
				errs = append(errs, fmt.Errorf("port %s: flow rules before stop: %w", p.Name, err))
			}
		}
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}

// SetPromisc turns promiscuous mode on or off on the given ports (all
// when none), and keeps it in the running config.
func (d *Daemon) SetPromisc(ids []int, on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	for _, p := range d.selectPorts(ids) {
		if err := p.ID.SetPromiscuous(on); err != nil {
			errs = append(errs, fmt.Errorf("port %d (%s): %w", p.ID, p.Name, err))
			continue
		}
		v := on
		p.Cfg.Promiscuous = &v
		if i, ok := d.Cfg.PortByName(p.Name); ok {
			d.Cfg.Ports[i].Promiscuous = &v
		}
	}
	return errors.Join(errs...)
}

// SetFwdMode changes the forwarding mode; forwarding must be stopped
// (testpmd's rule too).
func (d *Daemon) SetFwdMode(mode string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, err := pipeline.ParseMode(mode)
	if err != nil {
		return err
	}
	if err := d.Pipe.SetMode(m); err != nil {
		return err
	}
	d.Cfg.Pipeline.Mode = mode
	return nil
}

// Reload re-reads the config file and applies it (ApplyConfig). Under
// systemd it is bracketed by RELOADING=1 and READY=1 (notify.go).
func (d *Daemon) Reload() (changes []config.Change, err error) {
	d.mu.Lock()
	file := d.Cfg.File
	d.mu.Unlock()
	if n := d.sd.n.Load(); n != nil {
		n.reloading(file)
		defer func() { n.reloaded(changes, err) }()
	}
	if file == config.DefaultFile {
		return nil, errors.New("running the built-in default config: there is no file to reload (start with --config FILE)")
	}
	cfg, err := config.Load(file)
	if err != nil {
		return nil, err
	}
	return d.ApplyConfig(cfg)
}

// liveKey reports whether a config key may change on a running daemon:
// the classification, forward and QoS tables (swapped under the workers;
// pipeline.Update refuses, with the reason, what the running queues
// cannot take, such as a TC turning lossless), the RoCE policies,
// promiscuous mode, the impairment rules, and the forwarding mode while
// forwarding is stopped.
// The PFC mode is not: it decides at start who owns PFC on the NIC.
func liveKey(key string) bool {
	return liveKeys.MatchString(key) && key != "qos.pfc_mode" && key != "impair.hold"
}

var liveKeys = regexp.MustCompile(`^(forward\b|roce\.(verify_icrc|bad_icrc|malformed)$|qos\.|pfc\b|port\[\d+\]\.promiscuous$|pipeline\.mode$|route\b|neighbor\b|impair\b)`)

// ApplyConfig makes cfg the running configuration, or changes nothing
// and says why: every change that needs a restart is listed; the
// tables are swapped under the running workers without stopping a port
// or dropping a packet.
func (d *Daemon) ApplyConfig(cfg *config.Config) ([]config.Change, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applyConfig(cfg)
}

func (d *Daemon) applyConfig(cfg *config.Config) ([]config.Change, error) {
	changes := config.Diff(d.Cfg, cfg)
	var refused []string
	modeChange := false
	routes, impairs := false, false
	for _, c := range changes {
		switch {
		case !liveKey(c.Key):
			refused = append(refused, c.String())
		case strings.HasPrefix(c.Key, "impair"):
			impairs = true
		case strings.HasPrefix(c.Key, "route") || strings.HasPrefix(c.Key, "neighbor"):
			routes = true
			if d.route == nil || !cfg.Routed() {
				refused = append(refused, c.String()+" (routing is turned on or off only by a restart)")
			}
		case c.Key == "pipeline.mode":
			modeChange = true
			if d.Pipe.Running() {
				refused = append(refused, c.String()+" (stop forwarding first)")
			}
		}
	}
	if len(refused) > 0 {
		return nil, fmt.Errorf("%s: not applied, the running config is unchanged: these changes need a restart of roce-fwd:\n  %s",
			cfg.File, strings.Join(refused, "\n  "))
	}
	if len(changes) == 0 {
		return nil, nil
	}
	var mode pipeline.Mode
	if modeChange {
		m, err := pipeline.ParseMode(cfg.Pipeline.Mode)
		if err == nil {
			err = d.Pipe.CheckMode(m)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: pipeline.mode: %w", cfg.File, err)
		}
		mode = m
	}
	t, err := d.tables(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: not applied, the running config is unchanged: %w", cfg.File, err)
	}
	if err := d.Pipe.Update(t); err != nil {
		return nil, fmt.Errorf("%s: not applied, the running config is unchanged: %w", cfg.File, err)
	}
	if routes {
		if err := d.reloadRoutes(cfg); err != nil {
			return nil, fmt.Errorf("%s: routes: %w", cfg.File, err)
		}
	}
	if impairs {
		if err := d.reloadImpair(cfg); err != nil {
			return nil, fmt.Errorf("%s: impair: %w", cfg.File, err)
		}
	}
	if modeChange {
		// CheckMode passed under the same lock: this cannot fail.
		if err := d.Pipe.SetMode(mode); err != nil {
			return nil, fmt.Errorf("%s: pipeline.mode: %w", cfg.File, err)
		}
	}
	for _, p := range d.Ports.Ports {
		i, ok := cfg.PortByName(p.Name)
		if !ok {
			continue
		}
		on := cfg.Ports[i].Promiscuous == nil || *cfg.Ports[i].Promiscuous
		if was := p.Cfg.Promiscuous == nil || *p.Cfg.Promiscuous; on != was {
			if err := p.ID.SetPromiscuous(on); err != nil {
				d.log.Warn("promiscuous mode", "port", p.Name, "err", err)
			}
		}
		p.Cfg.Promiscuous = cfg.Ports[i].Promiscuous
	}
	d.Cfg = cfg
	for _, c := range changes {
		d.log.Info("config change applied", "change", c.String())
	}
	return changes, nil
}

// tables are the pipeline's live tables under cfg.
func (d *Daemon) tables(cfg *config.Config) (pipeline.Tables, error) {
	t := d.Pipe.Tables()
	rs := RoCESpec(cfg)
	rs.QPTable, rs.QPMaxAge = t.RoCE.QPTable, t.RoCE.QPMaxAge // not live; Diff refused a change
	t.RoCE = rs
	t.Forward = map[uint16]uint16{}
	for _, f := range cfg.Forward {
		from, ok1 := d.Ports.ByName(f.From)
		to, ok2 := d.Ports.ByName(f.To)
		if !ok1 || !ok2 {
			return t, fmt.Errorf("forward %s -> %s: unknown port", f.From, f.To)
		}
		t.Forward[uint16(from.ID)] = uint16(to.ID)
	}
	if t.QoS != nil {
		if !cfg.QoSEnabled() {
			return t, errors.New("turning egress QoS off needs a restart")
		}
		for _, p := range d.Ports.Ports {
			t.QoS[uint16(p.ID)] = portQoS(cfg, p)
		}
	} else if cfg.QoSEnabled() {
		return t, errors.New("turning egress QoS on needs a restart")
	}
	return t, nil
}

// QoSConfig is port name's egress QoS in force.
func (d *Daemon) QoSConfig(name string) (qos.Config, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.Ports.ByName(name)
	if !ok || d.Pipe.Spec.QoS == nil {
		return qos.Config{}, false
	}
	return d.Pipe.Spec.QoS.Ports[uint16(p.ID)].Config, true
}

// EditConfig applies edit to a copy of the running config and applies
// the result, checked like a file: the console's "set" commands. The
// daemon stays locked from copy to apply, so two clients' edits never
// undo each other.
func (d *Daemon) EditConfig(edit func(*config.Config) error) ([]config.Change, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cfg, err := d.Cfg.Copy()
	if err != nil {
		return nil, fmt.Errorf("the running config does not parse back: %w", err)
	}
	if err := edit(cfg); err != nil {
		return nil, err
	}
	if cfg, err = cfg.Copy(); err != nil {
		return nil, err
	}
	return d.applyConfig(cfg)
}
