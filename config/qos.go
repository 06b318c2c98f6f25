package config

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"roce-fwd/qos"
	"roce-fwd/roce"
)

// QoS is the [qos] section. Its first keys classify packets into traffic
// classes (used by the "roce" mode whether or not QoS scheduling is on);
// the rest configure the egress QoS of package qos, which is on when
// Config.QoSEnabled: a preset, per-port overrides in [[qos.port]], and
// the PFC thresholds and watchdog in [pfc].
//
// Unlisted DSCP and PCP values keep the preset's map or, without a preset,
// the built-in one: TC = DSCP >> 3 (the mlx5 firmware default), PCP n → TC n.
//
// The egress keys override the preset's values one by one; a key that is
// absent keeps them. Optional keys are pointers (nil = absent) or, for
// the top-level ones, are filled with their effective value by validation
// so that Encode prints what is in force. Maps and slices have no
// omitempty: the encoder skips nil ones, and an empty one written as {} or
// [] must come back non-nil for Encode to round-trip.
type QoS struct {
	Preset   string         `toml:"preset,omitempty"` // one of qos.PresetNames(); "" = none
	Trust    string         `toml:"trust"`            // "dscp" (default), "pcp" or "none"; a preset's when unset
	DSCPToTC map[string]int `toml:"dscp_to_tc"`       // e.g. { 26 = 3, 48 = 6 }
	PCPToTC  map[string]int `toml:"pcp_to_tc"`        // e.g. { 3 = 3 }
	// Lossless lists the lossless TCs (PFC on the priorities mapped to
	// them), replacing the preset's set; without a preset it defaults to
	// [3]. nil means unset, [] means no lossless TC; it has no omitempty
	// so that [] survives Encode (the encoder skips nil on its own).
	Lossless        []int          `toml:"lossless"`
	PFCMode         string         `toml:"pfc_mode,omitempty"` // one of PFCModes; "" = "auto"
	PFCPriorityToTC map[string]int `toml:"pfc_priority_to_tc"` // PFC priority → TC; unlisted: the identity
	Ports           []QoSPort      `toml:"port"`               // [[qos.port]]
}

// PFCModes lists the values of qos.pfc_mode: "hardware" leaves PFC to the
// NIC, "software" has roce-fwd send and honour PFC frames itself, "auto"
// lets the daemon pick per port.
var PFCModes = []string{"auto", "hardware", "software"}

// QoSPort is one [[qos.port]]: overrides for the egress port Name (which
// must name a [[port]]). Ports without one use the global configuration.
type QoSPort struct {
	Name  string  `toml:"name"`
	Rate  *string `toml:"rate"`  // port shaper, "25Gbps" or "unlimited"; nil: the link speed (the daemon's to find)
	Burst *string `toml:"burst"` // port shaper burst; nil keeps the base (0 = qos.DefaultBurst(rate))
	TC    []QoSTC `toml:"tc"`    // [[qos.port.tc]]
}

// QoSTC is one [[qos.port.tc]]: overrides for traffic class TC.
type QoSTC struct {
	TC        *int    `toml:"tc"`        // required, 0..7
	Scheduler *string `toml:"scheduler"` // "strict" or "dwrr"
	Weight    *int    `toml:"weight"`    // DWRR weight, 1..255; dwrr only
	Limit     *string `toml:"limit"`     // queue limit, a size; "0" = bounded by queue slots only
	ECN       *QoSECN `toml:"ecn"`       // WRED-ECN; only the keys given override
	MaxRate   *string `toml:"max_rate"`  // per-TC shaper, a rate or "unlimited"
	MaxBurst  *string `toml:"max_burst"` // per-TC shaper burst
	// Watchdog turns the PFC watchdog off (false) or back on for this TC
	// alone; WatchdogAction overrides [pfc] watchdog's action for it.
	Watchdog       *bool   `toml:"watchdog"`
	WatchdogAction *string `toml:"watchdog_action"`
}

// QoSECN is a TC's WRED-ECN profile, qos.ECN as sizes in the file.
// A TC without a profile in its base config needs min, max and probability.
type QoSECN struct {
	Enabled     *bool    `toml:"enabled"`     // false turns the profile off; other keys are then ignored
	Min         *string  `toml:"min"`         // a size
	Max         *string  `toml:"max"`         // a size
	Probability *float64 `toml:"probability"` // marking probability reached at max, 0..1
	Weight      *float64 `toml:"weight"`      // EWMA weight of the depth average, [0, 1); 0 = instantaneous
}

// PFC is the [pfc] section: the thresholds at which an ingress port is
// paused for its lossless priorities, and the PFC watchdog. Its presence
// turns QoS scheduling on.
type PFC struct {
	Xoff     *string      `toml:"xoff"`     // bytes held in egress queues that send XOFF
	Xon      *string      `toml:"xon"`      // ... and XON again; below xoff
	Quanta   *int         `toml:"quanta"`   // pause time an XOFF asks for, 1..65535 × 512 bit times
	Watchdog *PFCWatchdog `toml:"watchdog"` // present: on unless enabled = false
}

// PFCWatchdog configures the PFC watchdog of the lossless TCs.
type PFCWatchdog struct {
	Enabled         *bool   `toml:"enabled"`
	DetectionTime   *string `toml:"detection_time"`   // a duration, "200ms"
	RestorationTime *string `toml:"restoration_time"` // a duration
	Action          *string `toml:"action"`           // "drop", "forward" or "alert"
}

// Defaults for what neither the preset nor the file says.
//
// Without a preset, QoS starts from qos.DefaultConfig with TC3 lossless
// (where RoCE traffic goes: DSCP 26 >> 3 under the firmware map, and PCP
// 3). A lossless TC needs PFC thresholds, which "default" does not have;
// they come from the nvidia-roce preset, which documents them: XOFF 2 MB
// and XON 1.5 MB per ingress port, quanta 0xFFFF, and the PFC watchdog on
// with SONiC's defaults (200 ms detection and restoration, drop). A TC
// made lossless whose queue limit is below qos.DefaultLosslessLimit (a
// lossy 1 MiB default would sit below XOFF, so the queue would drop before
// PFC pauses anyone) is raised to it unless its [[qos.port.tc]] sets a
// limit. A TC made lossy keeps its limit.
var (
	defaultLossless = []int{3}
	defaultPFC      = qos.NVIDIARoCE().PFC
	defaultWatchdog = qos.NVIDIARoCE().Watchdog
)

// QoSEnabled reports whether egress QoS scheduling is on: qos.preset is
// set, or there is a [[qos.port]] or a [pfc] section.
func (c *Config) QoSEnabled() bool {
	return c.QoS.Preset != "" || len(c.QoS.Ports) > 0 || c.PFC != nil
}

// PFCMode is qos.pfc_mode, "auto" when unset.
func (c *Config) PFCMode() string {
	if c.QoS.PFCMode == "" {
		return "auto"
	}
	return c.QoS.PFCMode
}

// TCMap is the classifier's ingress traffic-class map: the preset's (or
// the built-in one) with trust, dscp_to_tc and pcp_to_tc applied.
func (c *Config) TCMap() roce.TCMap { return c.QoS.tcMap() }

// PortQoS is the complete QoS configuration of egress port name: the
// preset with the global keys and [pfc] applied, then the port's
// [[qos.port]] if it has one. Rate is 0 both for "unlimited" and when
// rate is unset; PortRateSet tells them apart. With QoS off it is
// qos.DefaultConfig with the configured TC map.
//
// c must have come from Parse or Load: values that do not validate are
// skipped here rather than reported.
func (c *Config) PortQoS(name string) qos.Config {
	if !c.QoSEnabled() {
		d := qos.DefaultConfig()
		d.TCMap = c.TCMap()
		return d
	}
	b := qosBuild{cfg: c}
	g := b.global()
	if i, ok := c.qosPort(name); ok {
		return b.port(i, g)
	}
	return g
}

// PortRateSet reports whether port name has a rate in its [[qos.port]]
// ("unlimited" included). When not, the daemon shapes it to its link speed.
func (c *Config) PortRateSet(name string) bool {
	i, ok := c.qosPort(name)
	return ok && c.QoS.Ports[i].Rate != nil
}

// qosPort returns the index of the [[qos.port]] for port name.
func (c *Config) qosPort(name string) (int, bool) {
	for i := range c.QoS.Ports {
		if c.QoS.Ports[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

func (q *QoS) setDefaults() { q.Trust = "dscp" }

func (q QoS) tcMap() roce.TCMap {
	m := roce.DefaultTCMap()
	if q.Preset != "" {
		if p, err := qos.Preset(q.Preset); err == nil {
			m = p.TCMap
		}
	}
	switch q.Trust {
	case "dscp":
		m.Trust = roce.TrustDSCP
	case "pcp":
		m.Trust = roce.TrustPCP
	case "none":
		m.Trust = roce.TrustNone
	}
	overrideTCs(m.DSCP[:], q.DSCPToTC)
	overrideTCs(m.PCP[:], q.PCPToTC)
	return m
}

// overrideTCs sets t[k] = tc for each valid entry of a { k = tc } table;
// validation reports the others.
func overrideTCs(t []uint8, m map[string]int) {
	for k, tc := range m {
		if n, err := strconv.Atoi(k); err == nil && n >= 0 && n < len(t) && tc >= 0 && tc < qos.NumTC {
			t[n] = uint8(tc)
		}
	}
}

func validateQoS(c *checker, cfg *Config) {
	q := &cfg.QoS
	p := root.key("qos")
	oneOf(c, p.key("trust"), q.Trust, "dscp", "pcp", "none")
	tcMap(c, p.key("dscp_to_tc"), q.DSCPToTC, 63, "DSCP")
	tcMap(c, p.key("pcp_to_tc"), q.PCPToTC, 7, "PCP")
	tcMap(c, p.key("pfc_priority_to_tc"), q.PFCPriorityToTC, 7, "PFC priority")
	presetOK := q.Preset == ""
	if _, set := c.loc.lookup(p.key("preset")); set || q.Preset != "" {
		oneOf(c, p.key("preset"), q.Preset, qos.PresetNames()...)
		presetOK = slices.Contains(qos.PresetNames(), q.Preset)
	}
	if _, set := c.loc.lookup(p.key("pfc_mode")); set || q.PFCMode != "" {
		oneOf(c, p.key("pfc_mode"), q.PFCMode, PFCModes...)
	}
	seen := map[int]int{}
	for i, tc := range q.Lossless {
		e := p.key("lossless").index(i)
		if j, dup := seen[tc]; dup {
			c.errorf(e, "TC %d is already listed at lossless[%d]", tc, j)
			continue
		}
		seen[tc] = i
		if tc < 0 || tc >= qos.NumTC {
			c.errorf(e, "%d is not a traffic class (0..7)", tc)
		}
	}
	validateQoSPortNames(c, cfg)

	if !cfg.QoSEnabled() {
		for _, k := range []string{"lossless", "pfc_mode", "pfc_priority_to_tc"} {
			if _, set := c.loc.lookup(p.key(k)); set {
				c.errorf(p.key(k), "has no effect while QoS scheduling is off; turn it on with qos.preset, a [[qos.port]] or a [pfc] section")
			}
		}
		return
	}

	// Unset trust means the preset's: say so in the effective config.
	if _, set := c.loc.lookup(p.key("trust")); !set && q.Preset != "" && presetOK {
		pc, _ := qos.Preset(q.Preset)
		q.Trust = pc.TCMap.Trust.String()
	}

	// Parse every value, reporting each at its key; then check each
	// resulting qos.Config as a whole, reporting every problem whose keys
	// all parsed (otherwise it would talk about a value nobody wrote), so
	// that one run lists field and cross-field errors together.
	b := qosBuild{cfg: cfg, c: c}
	g := b.global()
	baseBad := c.hasErrors(func(k string) bool {
		return keyUnder(k, "qos.preset") || keyUnder(k, "qos.lossless")
	})
	var globalProblems []*qos.FieldError
	if !baseBad {
		globalProblems = qos.FieldErrors(g.Validate())
		reportProblems(c, globalProblems, globalProblemKeys)
		if cfg.PFC != nil && g.LosslessTCs() == 0 && !c.hasErrors(func(k string) bool { return keyUnder(k, "qos") && !keyUnder(k, "qos.port") }) {
			c.errorf(root.key("pfc"), "has no effect: no TC is lossless; list the lossless TCs in qos.lossless")
		}
	}
	for i := range q.Ports {
		pp := p.key("port").index(i)
		if c.failed(pp) {
			continue
		}
		pc := b.port(i, g)
		if baseBad {
			continue
		}
		var own []*qos.FieldError // what the port's keys add to the global problems
		for _, fe := range qos.FieldErrors(pc.Validate()) {
			if !slices.ContainsFunc(globalProblems, fe.Same) {
				own = append(own, fe)
			}
		}
		reportProblems(c, own, func(fe *qos.FieldError) []path { return portProblemKeys(fe, pp, q.Ports[i].TC) })
	}

	validateQoSMode(c, cfg)

	if q.Lossless == nil {
		q.Lossless = []int{}
		for tc := range g.TC {
			if g.TC[tc].Lossless {
				q.Lossless = append(q.Lossless, tc)
			}
		}
	}
	if q.PFCMode == "" {
		q.PFCMode = "auto"
	}
}

// validateQoSMode checks that QoS scheduling has the classifier it needs.
// The error is about pipeline.mode; when the file leaves mode at its
// default it is reported on the line that turned QoS on.
func validateQoSMode(c *checker, cfg *Config) {
	mode := cfg.Pipeline.Mode
	if mode == "roce" {
		return
	}
	const why = `needs the "roce" mode's classifier, which assigns the traffic classes`
	mp := root.key("pipeline").key("mode")
	if line, set := c.loc.lookup(mp); set {
		c.errorAt(line, mp, "%q: QoS scheduling %s; set mode = \"roce\"", mode, why)
		return
	}
	on := root.key("pfc")
	switch {
	case cfg.QoS.Preset != "":
		on = root.key("qos").key("preset")
	case len(cfg.QoS.Ports) > 0:
		on = root.key("qos").key("port").index(0)
	}
	c.errorAt(c.loc.line(on), mp, "%q (the default): QoS scheduling, turned on by %s, %s; set [pipeline] mode = \"roce\"", mode, on, why)
}

// validateQoSPortNames checks that each [[qos.port]] names a distinct [[port]].
func validateQoSPortNames(c *checker, cfg *Config) {
	names := map[string]int{}
	for i, qp := range cfg.QoS.Ports {
		p := root.key("qos").key("port").index(i)
		if c.failed(p) {
			continue
		}
		switch _, ok := cfg.PortByName(qp.Name); {
		case qp.Name == "":
			c.errorf(p.key("name"), "missing; name the [[port]] this configures (%s)", portList(cfg))
		case !ok:
			c.errorf(p.key("name"), "unknown port %q; %s", qp.Name, portList(cfg))
		default:
			if j, dup := names[qp.Name]; dup {
				c.errorf(p.key("name"), "port %q is already configured by qos.port[%d] (line %d)", qp.Name, j, c.loc.line(root.key("qos").key("port").index(j)))
			} else {
				names[qp.Name] = i
			}
		}
	}
}

// portList is "valid ports: "a", "b"" for error messages.
func portList(cfg *Config) string {
	var names []string
	for _, pt := range cfg.Ports {
		if pt.Name != "" {
			names = append(names, strconv.Quote(pt.Name))
		}
	}
	if len(names) == 0 {
		return "no port has a name yet"
	}
	return "valid ports: " + strings.Join(names, ", ")
}

// reportProblems reports what qos.Config.Validate found, each problem at
// the first of its candidate keys that the file writes (the key whose value
// is wrong, then the table holding it); the last candidate is the fallback.
// A problem one of whose keys already has an error is left out.
// Problems landing on the same key are said together, in one error.
func reportProblems(c *checker, problems []*qos.FieldError, keys func(*qos.FieldError) []path) {
	var order []string
	at := map[string]path{}
	msgs := map[string][]string{}
	for _, fe := range problems {
		cand := keys(fe)
		if slices.ContainsFunc(cand[:len(cand)-1], func(k path) bool { return keyFailed(c, k) }) {
			continue // said already, as that key's own error
		}
		p := cand[len(cand)-1]
		for _, k := range cand {
			if _, set := c.loc.lookup(k); set {
				p = k
				break
			}
		}
		k := p.String()
		if _, ok := at[k]; !ok {
			order = append(order, k)
			at[k] = p
		}
		msgs[k] = append(msgs[k], fe.Message())
	}
	for _, k := range order {
		c.errorf(at[k], "%s", strings.Join(msgs[k], "; "))
	}
}

// keyFailed reports whether k, or for a key below a section anything under
// k, already has an error.
func keyFailed(c *checker, k path) bool {
	if len(k) == 1 {
		return c.failed(k)
	}
	ks := k.String()
	return c.hasErrors(func(e string) bool { return keyUnder(e, ks) })
}

// globalProblemKeys are the keys a problem of the global configuration
// (the ports without a [[qos.port]]) may be reported at, most specific
// first: the [pfc] key for what [pfc] sets, the [qos] key for the rest,
// then the section.
func globalProblemKeys(fe *qos.FieldError) []path {
	pfc, q := root.key("pfc"), root.key("qos")
	switch fe.Field {
	case qos.FieldXoff, qos.FieldLimit:
		return []path{pfc.key("xoff"), pfc, q}
	case qos.FieldXon:
		return []path{pfc.key("xon"), pfc.key("xoff"), pfc, q}
	case qos.FieldWatchdog:
		return []path{pfc.key("watchdog"), pfc, q}
	case qos.FieldLossless, qos.FieldPrioToTC:
		return []path{q.key("pfc_priority_to_tc"), q.key("lossless"), q.key("preset"), q}
	case qos.FieldDSCPToTC:
		return []path{q.key("dscp_to_tc"), q}
	case qos.FieldPCPToTC:
		return []path{q.key("pcp_to_tc"), q}
	case qos.FieldTrust:
		return []path{q.key("trust"), q}
	}
	return []path{q.key("preset"), q}
}

// portProblemKeys are the keys a problem of [[qos.port]] pp may be
// reported at, most specific first: the key of the [[qos.port.tc]] that
// configures the TC, that table, then the port's own key or table.
func portProblemKeys(fe *qos.FieldError, pp path, tcs []QoSTC) []path {
	switch fe.Field {
	case qos.FieldRate:
		return []path{pp.key("rate"), pp}
	case qos.FieldBurst:
		return []path{pp.key("burst"), pp}
	}
	if !fe.Field.PerTC() {
		return []path{pp}
	}
	j := slices.IndexFunc(tcs, func(t QoSTC) bool { return t.TC != nil && *t.TC == fe.Index })
	if j < 0 {
		if fe.Field == qos.FieldLimit {
			return []path{root.key("pfc").key("xoff"), pp}
		}
		return []path{pp}
	}
	tp := pp.key("tc").index(j)
	var keys []path
	switch fe.Field {
	case qos.FieldECN:
		e := tp.key("ecn")
		keys = []path{e.key("min"), e.key("max"), e, tp.key("limit")}
	case qos.FieldLimit:
		keys = []path{tp.key("limit"), root.key("pfc").key("xoff")}
	case qos.FieldWeight, qos.FieldMode:
		keys = []path{tp.key("weight"), tp.key("scheduler")}
	case qos.FieldMaxRate:
		keys = []path{tp.key("max_rate")}
	case qos.FieldMaxBurst:
		keys = []path{tp.key("max_burst")}
	}
	return append(keys, tp, pp)
}

// hasErrors reports whether an error was reported for a key matching f.
func (c *checker) hasErrors(f func(key string) bool) bool {
	return slices.ContainsFunc(c.errs, func(e *Error) bool { return f(e.Key) })
}

// keyUnder reports whether key is prefix or inside it ("qos.port[1].tc"
// is under "qos.port[1]" and "qos", not under "qos.port[10]" or "qo").
func keyUnder(key, prefix string) bool {
	rest, ok := strings.CutPrefix(key, prefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// qosBuild turns the [qos] and [pfc] keys into qos.Configs. With a checker
// it reports every value that does not parse at its key; without one
// (on a config Parse has validated) nothing can go wrong.
type qosBuild struct {
	cfg *Config
	c   *checker // nil: do not report
}

func (b qosBuild) errorf(p path, format string, args ...any) {
	if b.c != nil {
		b.c.errorf(p, format, args...)
	}
}

// global is the configuration of the ports without a [[qos.port]].
func (b qosBuild) global() qos.Config {
	q := &b.cfg.QoS
	g := qos.DefaultConfig()
	if q.Preset != "" {
		if pc, err := qos.Preset(q.Preset); err == nil {
			g = pc
		}
	}
	g.TCMap = q.tcMap()

	lossless := q.Lossless
	if lossless == nil && q.Preset == "" {
		lossless = defaultLossless
	}
	if lossless != nil {
		var want uint8
		for _, tc := range lossless {
			if tc >= 0 && tc < qos.NumTC {
				want |= 1 << tc
			}
		}
		for i := range g.TC {
			t := &g.TC[i]
			on := want&(1<<i) != 0
			if on && !t.Lossless && t.Limit != 0 && t.Limit < qos.DefaultLosslessLimit {
				t.Limit = qos.DefaultLosslessLimit
			}
			t.Lossless = on
		}
	}
	overrideTCs(g.PrioToTC[:], q.PFCPriorityToTC)
	if g.LosslessTCs() != 0 && g.PFC.Xoff == 0 {
		g.PFC = defaultPFC
		if g.Watchdog == (qos.WatchdogConfig{}) {
			g.Watchdog = defaultWatchdog
		}
	}
	if b.cfg.PFC != nil {
		b.pfc(&g)
	}
	return g
}

// pfc applies [pfc] to g.
func (b qosBuild) pfc(g *qos.Config) {
	pf := b.cfg.PFC
	p := root.key("pfc")
	b.size(p.key("xoff"), pf.Xoff, &g.PFC.Xoff, 0)
	b.size(p.key("xon"), pf.Xon, &g.PFC.Xon, 0)
	if pf.Quanta != nil {
		if n := *pf.Quanta; n < 1 || n > 0xFFFF {
			b.errorf(p.key("quanta"), "%d is out of range 1..65535 (units of 512 bit times)", n)
		} else {
			g.PFC.Quanta = uint16(n)
		}
	}
	w := pf.Watchdog
	if w == nil {
		return
	}
	wp := p.key("watchdog")
	wd := &g.Watchdog
	wd.Enabled = w.Enabled == nil || *w.Enabled
	if wd.DetectionTime == 0 {
		wd.DetectionTime = qos.DefaultDetectionTime
	}
	if wd.RestorationTime == 0 {
		wd.RestorationTime = qos.DefaultRestorationTime
	}
	b.duration(wp.key("detection_time"), w.DetectionTime, &wd.DetectionTime)
	b.duration(wp.key("restoration_time"), w.RestorationTime, &wd.RestorationTime)
	if w.Action != nil {
		if a, err := qos.ParseWatchdogAction(*w.Action); err != nil {
			b.errorf(wp.key("action"), "%q is not one of drop, forward, alert", *w.Action)
		} else {
			wd.Action = a
		}
	}
}

// port is g with [[qos.port]] i applied.
func (b qosBuild) port(i int, g qos.Config) qos.Config {
	qp := &b.cfg.QoS.Ports[i]
	p := root.key("qos").key("port").index(i)
	pc := g
	b.rate(p.key("rate"), qp.Rate, &pc.Rate)
	b.size(p.key("burst"), qp.Burst, &pc.Burst, qos.MaxBurst)
	seen := map[int]int{} // TC → index of the tc table configuring it
	for j := range qp.TC {
		t := &qp.TC[j]
		tp := p.key("tc").index(j)
		if t.TC == nil {
			if b.c == nil || !b.c.failed(tp) {
				b.errorf(tp.key("tc"), "missing; say which traffic class (0..7) this configures")
			}
			continue
		}
		n := *t.TC
		if n < 0 || n >= qos.NumTC {
			b.errorf(tp.key("tc"), "%d is not a traffic class (0..7)", n)
			continue
		}
		if k, dup := seen[n]; dup {
			line := 0
			if b.c != nil {
				line = b.c.loc.line(p.key("tc").index(k))
			}
			b.errorf(tp.key("tc"), "TC %d is already configured by tc[%d] (line %d)", n, k, line)
			continue
		}
		seen[n] = j
		b.tc(tp, t, n, &pc.TC[n])
		b.tcWatchdog(tp, t, n, &pc.Watchdog)
	}
	return pc
}

// tc applies one [[qos.port.tc]] to TC n's configuration tc.
func (b qosBuild) tc(p path, t *QoSTC, n int, tc *qos.TCConfig) {
	if t.Scheduler != nil {
		switch *t.Scheduler {
		case "strict":
			tc.Mode, tc.Weight = qos.Strict, 0
		case "dwrr":
			if tc.Mode != qos.DWRR && t.Weight == nil {
				b.errorf(p.key("weight"), "missing; TC %d is strict in the base configuration, so scheduler = \"dwrr\" needs a weight (1..255)", n)
			}
			tc.Mode = qos.DWRR
		default:
			b.errorf(p.key("scheduler"), "%q is not one of strict, dwrr", *t.Scheduler)
		}
	}
	if t.Weight != nil {
		switch w := *t.Weight; {
		case tc.Mode == qos.Strict:
			b.errorf(p.key("weight"), "TC %d is strict; a weight is only for scheduler = \"dwrr\"", n)
		case w < 1 || w > 255:
			b.errorf(p.key("weight"), "%d is out of range 1..255", w)
		default:
			tc.Weight = uint32(w)
		}
	}
	b.size(p.key("limit"), t.Limit, &tc.Limit, 0)
	if t.ECN != nil {
		b.ecn(p.key("ecn"), t.ECN, n, &tc.ECN)
	}
	b.rate(p.key("max_rate"), t.MaxRate, &tc.MaxRate)
	b.size(p.key("max_burst"), t.MaxBurst, &tc.MaxBurst, qos.MaxBurst)
	if t.MaxBurst != nil && tc.MaxRate == 0 && (b.c == nil || !b.c.failed(p.key("max_rate"))) {
		b.errorf(p.key("max_burst"), "has no effect without a max_rate")
	}
}

// tcWatchdog applies a [[qos.port.tc]]'s watchdog keys to the port's
// watchdog configuration.
func (b qosBuild) tcWatchdog(p path, t *QoSTC, n int, wd *qos.WatchdogConfig) {
	bit := uint8(1) << n
	if t.Watchdog != nil {
		if *t.Watchdog {
			wd.Off &^= bit
		} else {
			wd.Off |= bit
		}
	}
	if t.WatchdogAction != nil {
		a, err := qos.ParseWatchdogAction(*t.WatchdogAction)
		if err != nil {
			b.errorf(p.key("watchdog_action"), "%q is not one of drop, forward, alert", *t.WatchdogAction)
			return
		}
		wd.TCActionSet |= bit
		wd.TCAction[n] = a
	}
}

// ecn applies an ecn table to TC n's profile e.
func (b qosBuild) ecn(p path, ke *QoSECN, n int, e *qos.ECN) {
	if ke.Enabled != nil && !*ke.Enabled {
		*e = qos.ECN{}
		return
	}
	if !e.Enabled() {
		// Nothing to start from: the profile must be complete.
		*e = qos.ECN{}
		var missing []string
		for _, k := range []struct {
			name string
			set  bool
		}{{"min", ke.Min != nil}, {"max", ke.Max != nil}, {"probability", ke.Probability != nil}} {
			if !k.set {
				missing = append(missing, k.name)
			}
		}
		if len(missing) > 0 {
			b.errorf(p, "missing %s: TC %d has no ECN profile in the base configuration, so ecn needs min, max and probability", strings.Join(missing, ", "), n)
		}
	}
	b.size(p.key("min"), ke.Min, &e.Min, 0)
	b.size(p.key("max"), ke.Max, &e.Max, 0)
	if ke.Max != nil && e.Max == 0 {
		b.errorf(p.key("max"), "%q: a max of 0 turns ECN off; write enabled = false for that", *ke.Max)
	}
	if f := ke.Probability; f != nil {
		if !(*f >= 0 && *f <= 1) {
			b.errorf(p.key("probability"), "%v is out of range 0..1", *f)
		} else {
			e.Probability = *f
		}
	}
	if f := ke.Weight; f != nil {
		if !(*f >= 0 && *f < 1) {
			b.errorf(p.key("weight"), "%v is out of range [0, 1) (0 = instantaneous depth)", *f)
		} else {
			e.Weight = *f
		}
	}
}

// size parses *s into *dst when s is set; limit > 0 is its maximum.
func (b qosBuild) size(p path, s *string, dst *uint64, limit uint64) {
	if s == nil {
		return
	}
	v, err := qos.ParseSize(*s)
	if err != nil {
		b.errorf(p, "%q is not a size (B, KB, MB, GB, KiB, MiB, GiB): %s", *s, reason(err, "qos: size "+strconv.Quote(*s)+": "))
		return
	}
	if limit > 0 && v > limit {
		b.errorf(p, "%q is above %s", *s, qos.FormatSize(limit))
		return
	}
	*dst = v
}

// rate parses *s into *dst when s is set: a rate, or "unlimited" for 0.
func (b qosBuild) rate(p path, s *string, dst *uint64) {
	if s == nil {
		return
	}
	if *s == "unlimited" {
		*dst = 0
		return
	}
	v, err := qos.ParseRate(*s)
	switch {
	case err != nil:
		b.errorf(p, "%q is not a rate (bps, Kbps, Mbps, Gbps, Tbps) or \"unlimited\": %s", *s, reason(err, "qos: rate "+strconv.Quote(*s)+": "))
	case v == 0:
		b.errorf(p, "%q would stop all traffic; write \"unlimited\" for no shaping", *s)
	case v > qos.MaxRate:
		b.errorf(p, "%q is above 1 Pbit/s", *s)
	default:
		*dst = v
	}
}

// duration parses *s into *dst when s is set; it must be positive.
func (b qosBuild) duration(p path, s *string, dst *time.Duration) {
	if s == nil {
		return
	}
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		b.errorf(p, "%q is not a duration such as \"200ms\"", *s)
	case d <= 0:
		b.errorf(p, "%q must be positive", *s)
	default:
		*dst = d
	}
}

// reason is a qos parse error without its "qos: size "x": " prefix and
// without the list of units the caller's message already gives.
func reason(err error, prefix string) string {
	msg := strings.TrimPrefix(err.Error(), prefix)
	if i := strings.Index(msg, " ("); i > 0 {
		msg = msg[:i]
	}
	return msg
}
