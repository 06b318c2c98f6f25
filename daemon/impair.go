package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"roce-fwd/config"
	"roce-fwd/impair"
	"roce-fwd/pipeline"
	"roce-fwd/qos"
)

// impairState is what the daemon keeps of the impairment rules besides
// the pipeline's copy: the ID the next rule gets and the seed.
type impairState struct {
	nextID int
	seed   uint64
}

// impairSpec reads [impair] into the pipeline's spec, rules numbered from
// 1 in the file's order. The ports are the opened ones.
func (d *Daemon) impairSpec(cfg *config.Config) (*pipeline.ImpairSpec, error) {
	d.imp.nextID = 1
	// Storm frames come from the data pools: a storm sends a frame every
	// so often, not a burst of them.
	spec := &pipeline.ImpairSpec{Pools: d.Ports.Pools}
	im := cfg.Impair
	if im == nil {
		return spec, nil
	}
	rules, err := d.parseImpair(cfg, nil)
	if err != nil {
		return nil, err
	}
	d.imp.seed = im.Seed
	spec.Rules, spec.Seed, spec.Hold = rules, im.Seed, im.Hold
	return spec, nil
}

// StartStorm starts the PFC or PAUSE storm in words (impair.StormSyntax).
func (d *Daemon) StartStorm(words []string) (impair.Storm, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return impair.Storm{}, errors.New("not forwarding")
	}
	s, err := impair.ParseStorm(words, d.portID)
	if err != nil {
		return s, err
	}
	if err := d.Pipe.StartStorm(s); err != nil {
		return s, err
	}
	d.log.Warn("PFC storm started", "storm", s.String())
	return s, nil
}

// StopStorm ends the storm of a port ("all": every storm).
func (d *Daemon) StopStorm(port string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return errors.New("not forwarding")
	}
	id := -1
	if port != "all" {
		p, err := d.portID(port)
		if err != nil {
			return err
		}
		id = int(p)
	}
	d.log.Info("PFC storm stopped", "port", port)
	return d.Pipe.StopStorm(id)
}

// Storms reports the storms started, the ended ones too.
func (d *Daemon) Storms() []pipeline.StormStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return nil
	}
	return d.Pipe.Storms()
}

// parseImpair parses cfg's rules. A rule the same as one of running
// keeps its ID (and so its counters); the others are numbered from
// d.imp.nextID.
func (d *Daemon) parseImpair(cfg *config.Config, running []impair.Rule) ([]impair.Rule, error) {
	var rules []impair.Rule
	for i, line := range cfg.Impair.Rules {
		r, err := impair.Parse(strings.Fields(line), d.portID)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: impair.rules[%d]: %w", cfg.File, cfg.Impair.Lines[i], i, err)
		}
		if k := slices.IndexFunc(running, func(o impair.Rule) bool { return o.String() == r.String() }); k >= 0 {
			r.ID = running[k].ID
			running = slices.Delete(slices.Clone(running), k, k+1) // one running rule per config rule
		} else {
			r.ID = d.imp.nextID
			d.imp.nextID++
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// reloadImpair makes cfg's [impair] rules the running ones: a reload
// replaces the rules, those added from the console too; a rule that stays
// keeps its counters.
func (d *Daemon) reloadImpair(cfg *config.Config) error {
	var rules []impair.Rule
	var seed uint64
	if cfg.Impair != nil {
		var err error
		if rules, err = d.parseImpair(cfg, d.Pipe.ImpairRules()); err != nil {
			return err
		}
		seed = cfg.Impair.Seed
	}
	if err := d.Pipe.SetImpair(rules, seed); err != nil {
		return err
	}
	d.imp.seed = seed
	return nil
}

// AddImpair adds the rule in words (impair.Syntax) after the running ones
// and returns it with its ID.
func (d *Daemon) AddImpair(words []string) (impair.Rule, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return impair.Rule{}, errors.New("not forwarding")
	}
	r, err := impair.Parse(words, d.portID)
	if err != nil {
		return r, err
	}
	r.ID = max(d.imp.nextID, 1)
	if err := d.Pipe.SetImpair(append(d.Pipe.ImpairRules(), r), d.imp.seed); err != nil {
		return r, err
	}
	d.imp.nextID = r.ID + 1
	d.log.Info("impairment rule added", "id", r.ID, "rule", r.String())
	return r, nil
}

// DelImpair removes the rule with ID id ("all": every rule).
func (d *Daemon) DelImpair(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil {
		return errors.New("not forwarding")
	}
	rules := d.Pipe.ImpairRules()
	if id == "all" {
		rules = nil
	} else {
		n, err := strconv.Atoi(id)
		i := slices.IndexFunc(rules, func(r impair.Rule) bool { return r.ID == n })
		if err != nil || i < 0 {
			return fmt.Errorf("impair rule %q: no such rule (impair list shows them)", id)
		}
		rules = slices.Delete(rules, i, i+1)
	}
	if err := d.Pipe.SetImpair(rules, d.imp.seed); err != nil {
		return err
	}
	d.log.Info("impairment rules deleted", "id", id)
	return nil
}

// ImpairRule is a running rule with its counters summed over the workers.
type ImpairRule struct {
	Rule impair.Rule `json:"rule"`
	impair.Counter
}

// ImpairRules are the running rules and their counters, and the packets
// the workers hold back.
func (d *Daemon) ImpairRules() ([]ImpairRule, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.impairRules()
}

func (d *Daemon) impairRules() ([]ImpairRule, int) {
	if d.Pipe == nil {
		return nil, 0
	}
	rules := d.Pipe.ImpairRules()
	counts, held := d.Pipe.ImpairStats()
	out := make([]ImpairRule, len(rules))
	for i, r := range rules {
		out[i] = ImpairRule{Rule: r}
		if i < len(counts) {
			out[i].Counter = counts[i]
		}
	}
	return out, held
}

// PortPauses is a port's pause history: the link partner's pauses and the
// storms the watchdog declared on its egress TCs.
type PortPauses struct {
	Port   string             `json:"port"`
	Pauses []qos.PauseEpisode `json:"pauses"`
	Storms []StormEpisode     `json:"storms"`
}

// PFCHistory is the pause history of the ports the QoS stage watches
// (ports nil: all), by port name.
func (d *Daemon) PFCHistory(ports []int) ([]PortPauses, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.Pipe == nil || d.Pipe.Spec.QoS == nil {
		return nil, errors.New("PFC is off: egress QoS with a lossless TC turns it on")
	}
	var out []PortPauses
	for _, p := range d.Ports.Ports {
		if ports != nil && !slices.Contains(ports, int(p.ID)) {
			continue
		}
		out = append(out, PortPauses{Port: p.Name, Pauses: d.Pipe.PFCHistory(uint16(p.ID)), Storms: d.storms.of(p.Name)})
	}
	return out, nil
}
