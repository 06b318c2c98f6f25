package daemon

import (
	"fmt"

	"roce-fwd/offload"
	"roce-fwd/ports"
)

// probeFlows is called on each port between queue set-up and start.
func (d *Daemon) probeFlows(p *ports.Port) error {
	return d.Flows.AddPort(offload.PortInfo{ID: uint16(p.ID), Name: p.Name, Driver: p.Info.Driver, Devargs: p.Cfg.Devargs}, offload.NIC(p.ID))
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
