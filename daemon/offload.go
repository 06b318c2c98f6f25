package daemon

import (
	"errors"
	"fmt"

	"roce-fwd/dpdk"
	"roce-fwd/offload"
	"roce-fwd/ports"
)

// probeFlows is called on each port between queue set-up and start.
func (d *Daemon) probeFlows(p *ports.Port) error {
	return d.Flows.AddPort(offload.PortInfo{ID: uint16(p.ID), Name: p.Name, Driver: p.Info.Driver, Devargs: p.Cfg.Devargs,
		KeepsRules: p.Info.DevCapa&dpdk.DevCapaFlowRuleKeep != 0}, offload.NIC(p.ID))
}

// flowsStarted puts back the NIC rules of ports that start again after a
// stop that took them off (see offload.Manager.Stopping).
func (d *Daemon) flowsStarted() error {
	if d.Flows == nil {
		return nil
	}
	var errs []error
	for _, p := range d.Ports.Ports {
		if p.Started {
			if err := d.Flows.Started(uint16(p.ID)); err != nil {
				errs = append(errs, fmt.Errorf("port %s: flow rules after start: %w", p.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// installFlows finishes the probe on the started ports and installs the
// configured rule sets, before the workers start: the first packet
// already meets every rule.
func (d *Daemon) installFlows() error {
	d.Flows.Start(d.Pipe)
	for _, st := range d.Flows.Ports() {
		args := []any{"port", st.Name, "driver", st.Caps.Driver, "engine", st.Caps.Engine, "backend", st.Backend.String()}
		if st.Caps.Note != "" {
			args = append(args, "why", st.Caps.Note)
		}
		d.log.Info("flow offload", args...)
	}
	sets, err := offload.ConfigRules(d.Cfg)
	if err != nil {
		return err
	}
	for _, ps := range sets {
		p, _ := d.Ports.ByName(ps.Port)
		entries, err := d.Flows.CreateAll(uint16(p.ID), ps.Rules)
		if err != nil {
			return fmt.Errorf("%s: offload rules of port %s: %w", d.Cfg.File, ps.Port, err)
		}
		hw, sw := 0, 0
		for _, e := range entries {
			if e.Where == offload.InHardware {
				hw++
			} else {
				sw++
				d.log.Debug("flow rule in software", "port", ps.Port, "rule", e.Rule.ID, "why", e.Why)
			}
		}
		d.log.Info("flow rules installed", "port", ps.Port, "hw", hw, "sw", sw)
	}
	return nil
}
