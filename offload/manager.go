package offload

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/pipeline"
)

// Backend is where a port's rules go first.
type Backend uint8

const (
	BackendSoftware Backend = iota // the pipeline's software table
	BackendRTEFlow                 // rte_flow_validate + rte_flow_create
	BackendTemplate                // template tables + rte_flow_async_create
)

func (b Backend) String() string {
	switch b {
	case BackendRTEFlow:
		return "rte_flow"
	case BackendTemplate:
		return "template"
	}
	return "software"
}

// Backends are the values of [offload] backend.
var Backends = []string{"auto", "rte_flow", "template", "software"}

// Where is where a rule runs.
type Where uint8

const (
	InSoftware Where = iota
	InHardware
)

func (w Where) String() string {
	if w == InHardware {
		return "hw"
	}
	return "sw"
}

// Software is the pipeline side: per port and direction, the table the
// workers run.
type Software interface {
	SetFlows(port uint16, dir pipeline.FlowDir, t *flowrule.Table, carry []int) error
	FlowCounters(port uint16, dir pipeline.FlowDir) pipeline.FlowStats
}

// PortInfo describes a port to probe.
type PortInfo struct {
	ID      uint16
	Name    string
	Driver  string
	Devargs string // PCI devargs, e.g. "dv_flow_en=2"
	// KeepsRules: the port keeps its flow rules across stop and start
	// (RTE_ETH_DEV_CAPA_FLOW_RULE_KEEP).
	KeepsRules bool
}

// Shape is one line of the validate matrix: a rule shape roce-fwd uses and
// what rte_flow_validate said of it.
type Shape struct {
	Name string
	Rule string // the rule in the console's grammar
	Err  error  // nil: accepted
}

// Caps is what the probe found on a port.
type Caps struct {
	Driver string
	// Engine is "template" (rte_flow_info_get succeeded), "rte_flow"
	// (ENOTSUP: synchronous API only) or "none" (ENOSYS).
	Engine    string
	EngineErr error
	Info      dpdk.FlowInfo // when Engine is "template"
	Shapes    []Shape       // the validate matrix (synchronous engines)
	Trial     error         // the trial create after start
	Tried     bool
	RootJump  bool   // mlx5 Direct Rules layout: a root rule jumps to group 1
	Note      string // why the backend is what it is
	Requested string // [offload] backend
}

// PortStatus is one port's line of "show offload".
type PortStatus struct {
	ID      uint16
	Name    string
	Backend Backend
	Caps    Caps
	HW, SW  int // rules in each place
	// Inserted counts rules the NIC took; Failed the rules tried on the
	// NIC that run in software instead (refused by the PMD, or not
	// expressible in 22.11's rte_flow, like meters and ib_bth); Destroyed
	// the rules removed.
	Inserted, Failed, Destroyed uint64
	InsertTime                  time.Duration // total time of the NIC insertions
}

// Entry is one rule as "flow list" and "flow query" show it.
type Entry struct {
	Rule  flowrule.Rule // Rule.ID is the rule's number
	Where Where
	Why   string // why it runs in software
	// Counter holds the hits (and meter colours, in software). Counted is
	// false when nothing counts the rule: a NIC rule without a count
	// action. CountErr is the NIC's answer when the query failed.
	Counter  flowrule.Counter
	Counted  bool
	CountErr error
}

// Manager owns every port's rules. Its methods are safe for concurrent
// use.
type Manager struct {
	mu        sync.Mutex
	sw        Software
	requested string
	ports     map[uint16]*port
	order     []uint16
}

type port struct {
	PortInfo
	eng     Engine
	backend Backend
	caps    Caps
	shift   uint32    // groups the NIC rules are moved up by (root jump layout)
	root    [2]Handle // root jump rule per direction
	tables  map[string]TemplateTable
	rules   []*installed // by ID
	sw      [2]*flowrule.Table
	status  PortStatus
	parked  bool // the NIC rules were taken off for a port stop
	seq     uint64
}

type installed struct {
	r       flowrule.Rule
	where   Where
	why     string
	h       Handle
	tbl     TemplateTable
	counted bool   // the NIC rule has a count action (maybe added: nicRule)
	swIdx   [2]int // index in the software table of each direction, -1: absent
}

// New returns a Manager; requested is [offload] backend.
func New(requested string) (*Manager, error) {
	if requested == "" {
		requested = "auto"
	}
	if !slices.Contains(Backends, requested) {
		return nil, fmt.Errorf("unknown offload backend %q (valid: %s)", requested, strings.Join(Backends, ", "))
	}
	return &Manager{requested: requested, ports: map[uint16]*port{}}, nil
}

// inDir reports whether r applies in direction d: 0 ingress, 1 egress.
func inDir(r *flowrule.Rule, d int) bool { return d == 0 && r.Ingress || d == 1 && r.Egress }

var pipeDir = [2]pipeline.FlowDir{pipeline.FlowIngress, pipeline.FlowEgress}

// dvFlowEn reads mlx5's dv_flow_en devarg (default 1).
func dvFlowEn(devargs string) int {
	for _, kv := range strings.Split(devargs, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "dv_flow_en="); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return 1
}

func isMLX5(driver string) bool { return strings.HasPrefix(driver, "mlx5") }

// AddPort probes a configured, not yet started port and chooses its
// backend. For the template API it calls rte_flow_configure, which must
// come before the port starts. It returns no error today: a port whose
// engine fails the probe gets the software backend, with the reason in
// Caps.Note.
func (m *Manager) AddPort(info PortInfo, eng Engine) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &port{PortInfo: info, eng: eng, tables: map[string]TemplateTable{}}
	p.caps.Driver, p.caps.Requested = info.Driver, m.requested
	p.status.ID, p.status.Name = info.ID, info.Name
	m.ports[info.ID] = p
	m.order = append(m.order, info.ID)

	fi, err := eng.Info()
	switch {
	case err == nil:
		p.caps.Engine, p.caps.Info = "template", fi
	case errors.Is(err, syscall.ENOTSUP):
		p.caps.Engine, p.caps.EngineErr = "rte_flow", err
	case errors.Is(err, syscall.ENOSYS):
		p.caps.Engine, p.caps.EngineErr = "none", err
	default:
		p.caps.Engine, p.caps.EngineErr = "unknown", err
	}
	if p.caps.Engine == "rte_flow" || (p.caps.Engine == "template" && m.requested == "rte_flow") {
		p.caps.Shapes = validateMatrix(eng)
	}

	switch {
	case m.requested == "software":
		p.backend, p.caps.Note = BackendSoftware, "[offload] backend = \"software\""
	case p.caps.Engine == "none":
		p.backend, p.caps.Note = BackendSoftware, p.noEngine()
	case p.caps.Engine == "unknown":
		p.backend, p.caps.Note = BackendSoftware, fmt.Sprintf("port %d (%s): the flow engine did not answer: %v", p.ID, p.Driver, err)
	case p.caps.Engine == "template" && m.requested != "rte_flow":
		if err := eng.Configure(engineConfig(fi)); err != nil {
			p.backend, p.caps.Note = BackendSoftware, fmt.Sprintf("the template API was found but rte_flow_configure failed: %v", err)
			break
		}
		p.backend = BackendTemplate
	case m.requested == "template":
		p.backend, p.caps.Note = BackendSoftware, fmt.Sprintf("[offload] backend = \"template\" but %s has no template API (%v)", p.Driver, p.caps.EngineErr)
	default:
		p.backend = BackendRTEFlow
		if isMLX5(p.Driver) && dvFlowEn(p.Devargs) == 1 {
			p.caps.RootJump, p.shift = true, 1
		}
	}
	p.status.Backend, p.status.Caps = p.backend, p.caps
	return nil
}

func (p *port) noEngine() string {
	return fmt.Sprintf("port %d (%s) has no flow engine", p.ID, p.Driver)
}

// engineConfig sizes rte_flow_configure: one control flow queue, and
// counters up to what the NIC has (each rule's count action takes one).
func engineConfig(fi dpdk.FlowInfo) dpdk.FlowEngineConfig {
	c := dpdk.FlowEngineConfig{Queues: 1, QueueSize: 64, Counters: min(fi.MaxCounters, 1<<16)}
	if fi.MaxQueueSize != 0 {
		c.QueueSize = min(c.QueueSize, fi.MaxQueueSize)
	}
	return c
}

// shapes are the rule shapes roce-fwd's rule sets use.
var shapes = []struct{ name, rule string }{
	{"udp 4791 → queue", "ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end"},
	{"ipv6 udp 4791 → queue", "ingress pattern eth / ipv6 / udp dst is 4791 / end actions queue index 0 / end"},
	{"cnp (dscp 48, udp 4791) → queue", "ingress pattern eth / ipv4 dscp is 48 / udp dst is 4791 / end actions queue index 0 / end"},
	{"udp 4791 → mark + count", "ingress pattern eth / ipv4 / udp dst is 4791 / end actions mark id 1 / count / end"},
	{"dscp → count + jump", "ingress pattern eth / ipv4 dscp is 26 / end actions count / jump group 1 / end"},
	{"5-tuple → count + drop", "ingress pattern eth / ipv4 src is 10.0.0.1 dst is 10.0.0.2 proto is 17 / udp src is 1000 dst is 4791 / end actions count / drop / end"},
	{"udp 4791 → set dscp", "ingress pattern eth / ipv4 / udp dst is 4791 / end actions set_ipv4_dscp dscp_value 26 / end"},
	{"group 1 rule", "group 1 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end"},
}

func parseRule(text string) (flowrule.Rule, error) {
	c, err := flowrule.Parse("flow create 0 " + text)
	if err != nil {
		return flowrule.Rule{}, err
	}
	return c.Rule, nil
}

func validateMatrix(eng Engine) []Shape {
	out := make([]Shape, 0, len(shapes))
	for _, s := range shapes {
		r, err := parseRule(s.rule)
		if err != nil {
			panic("offload: bad built-in shape " + s.rule + ": " + err.Error())
		}
		spec, err := compile(&r)
		if err == nil {
			err = eng.Validate(spec)
			spec.Free()
		}
		out = append(out, Shape{Name: s.name, Rule: s.rule, Err: err})
	}
	return out
}

// Start finishes the probe once the ports run: a trial create/destroy on
// synchronous engines. sw is where software rules go from now on. (On
// mlx5 the root jump rule comes with the first rule of its direction.)
func (m *Manager) Start(sw Software) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sw = sw
	for _, id := range m.order {
		p := m.ports[id]
		if p.backend != BackendRTEFlow || p.caps.Tried {
			continue
		}
		p.caps.Tried = true
		trial := shapes[0].rule
		for _, s := range p.caps.Shapes {
			if s.Err == nil {
				trial = s.Rule
				break
			}
		}
		r, _ := parseRule(trial)
		r.Group += p.shift
		if err := p.trial(&r); err != nil {
			p.caps.Trial = err
			p.backend = BackendSoftware
			p.caps.Note = fmt.Sprintf("%s validates rules but could not create one (%v)", p.Driver, err)
			p.shift, p.caps.RootJump = 0, false
		}
		p.status.Backend, p.status.Caps = p.backend, p.caps
	}
}

// trial creates and destroys r.
func (p *port) trial(r *flowrule.Rule) error {
	spec, err := compile(r)
	if err != nil {
		return err
	}
	defer spec.Free()
	h, err := p.eng.Create(spec)
	if err != nil {
		return err
	}
	return p.eng.Destroy(h)
}

// ensureRoot creates the root jump of direction d on a Direct Rules port.
func (p *port) ensureRoot(d int) error {
	if p.shift == 0 || p.root[d] != nil {
		return nil
	}
	r := flowrule.Rule{Ingress: d == 0, Egress: d == 1,
		Items:   []flowrule.Item{{Type: flowrule.ItemEth}},
		Actions: []flowrule.Action{{Type: flowrule.ActJump, Group: 1}}}
	spec, err := compile(&r)
	if err != nil {
		return err
	}
	defer spec.Free()
	h, err := p.eng.Create(spec)
	if err != nil {
		return fmt.Errorf("root jump rule (group 0 → 1): %w", err)
	}
	p.root[d] = h
	return nil
}

func (m *Manager) port(id uint16) (*port, error) {
	p, ok := m.ports[id]
	if !ok {
		return nil, fmt.Errorf("port %d has no flow rules manager (not a configured port)", id)
	}
	return p, nil
}

// checkRule refuses what neither the NIC nor software can run.
func checkRule(r *flowrule.Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	return r.CheckDirection()
}

// Validate says where r would run on port id, and why not on the NIC.
func (m *Manager) Validate(id uint16, r flowrule.Rule) (Where, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return 0, "", err
	}
	if err := checkRule(&r); err != nil {
		return 0, "", err
	}
	if p.backend != BackendSoftware {
		hr := p.nicRule(&r)
		spec, err := compile(&hr)
		if err == nil {
			// HW steering has no synchronous validate: the template API
			// judges a rule when its table and the rule are created.
			if p.backend == BackendRTEFlow {
				err = p.eng.Validate(spec)
			}
			spec.Free()
		}
		if err == nil {
			return InHardware, "", nil
		}
		return InSoftware, p.refusal(err), nil
	}
	return InSoftware, p.swWhy(), nil
}

func (p *port) swWhy() string {
	if p.caps.Note != "" {
		return p.caps.Note + "; rule runs in software"
	}
	return "rule runs in software"
}

func (p *port) refusal(err error) string {
	if errors.Is(err, syscall.ENOSYS) {
		return p.noEngine() + "; rule runs in software"
	}
	if errors.Is(err, ErrNotOffloadable) {
		return err.Error() + "; rule runs in software"
	}
	return fmt.Sprintf("%s refused it: %v; rule runs in software", p.Driver, err)
}

// nicRule is r as installed on the NIC: one group up on Direct Rules,
// and with a count action when it drops, since what the NIC drops never
// reaches roce-fwd's drop counters.
func (p *port) nicRule(r *flowrule.Rule) flowrule.Rule {
	hr := *r
	hr.Actions = slices.Clone(r.Actions)
	drops := slices.ContainsFunc(hr.Actions, func(a flowrule.Action) bool { return a.Type == flowrule.ActDrop })
	if drops && !hasCount(&hr) {
		hr.Actions = slices.Insert(hr.Actions, 0, flowrule.Action{Type: flowrule.ActCount})
	}
	hr.Group += p.shift
	for i := range hr.Actions {
		if hr.Actions[i].Type == flowrule.ActJump {
			hr.Actions[i].Group += p.shift
		}
	}
	return hr
}

// NextID is the number the next console rule gets: one more than the
// highest in use, as testpmd numbers them.
func (p *port) nextID() uint32 {
	if len(p.rules) == 0 {
		return 0
	}
	return p.rules[len(p.rules)-1].r.ID + 1
}

// Create installs r on port id and returns its number. auto gives it the
// next free number (console); otherwise r.ID is kept (config rule sets),
// and must be free.
func (m *Manager) Create(id uint16, r flowrule.Rule, auto bool) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return Entry{}, err
	}
	if err := checkRule(&r); err != nil {
		return Entry{}, err
	}
	if auto {
		r.ID = p.nextID()
	} else if p.find(r.ID) != nil {
		return Entry{}, fmt.Errorf("port %d already has a rule %d", id, r.ID)
	}
	nr := p.place(r)
	p.insert(nr)
	applied, err := m.syncSoftware(p)
	if !applied {
		p.remove(nr)
		if nr.where == InHardware {
			p.uninstall(nr)
		}
		return Entry{}, err
	}
	if err != nil {
		return Entry{Rule: nr.r, Where: nr.where, Why: nr.why}, fmt.Errorf("rule %d created, but: %w", nr.r.ID, err)
	}
	return Entry{Rule: nr.r, Where: nr.where, Why: nr.why}, nil
}

// CreateAll installs rules on port id keeping their numbers (a config rule
// set), recompiling the software table once for all of them. Every rule
// is checked before any is installed.
func (m *Manager) CreateAll(id uint16, rules []flowrule.Rule) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	for _, r := range rules {
		if err := checkRule(&r); err != nil {
			return nil, fmt.Errorf("rule %d: %w", r.ID, err)
		}
		if p.find(r.ID) != nil || seen[r.ID] {
			return nil, fmt.Errorf("port %d already has a rule %d", id, r.ID)
		}
		seen[r.ID] = true
	}
	added := make([]*installed, 0, len(rules))
	for _, r := range rules {
		nr := p.place(r)
		p.insert(nr)
		added = append(added, nr)
	}
	if applied, err := m.syncSoftware(p); !applied {
		for _, r := range added {
			p.remove(r)
			if r.where == InHardware {
				p.uninstall(r)
			}
		}
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("rules installed, but: %w", err)
	}
	out := make([]Entry, len(added))
	for i, r := range added {
		out[i] = Entry{Rule: r.r, Where: r.where, Why: r.why}
	}
	return out, nil
}

// place tries the NIC and records where the rule runs.
func (p *port) place(r flowrule.Rule) *installed {
	nr := &installed{r: r, swIdx: [2]int{-1, -1}}
	if p.backend == BackendSoftware {
		nr.why = p.swWhy()
		return nr
	}
	if p.parked {
		// Stopped, the port may refuse rules: this one is tried when it
		// starts, with the others.
		nr.where = InHardware
		return nr
	}
	if err := p.install(nr); err != nil {
		p.status.Failed++
		nr.why = p.refusal(err)
	} else {
		nr.where = InHardware
	}
	return nr
}

func (p *port) find(id uint32) *installed {
	i, ok := slices.BinarySearchFunc(p.rules, id, func(r *installed, id uint32) int { return cmp.Compare(r.r.ID, id) })
	if !ok {
		return nil
	}
	return p.rules[i]
}

func (p *port) insert(r *installed) {
	i, _ := slices.BinarySearchFunc(p.rules, r.r.ID, func(x *installed, id uint32) int { return cmp.Compare(x.r.ID, id) })
	p.rules = slices.Insert(p.rules, i, r)
}

func (p *port) remove(r *installed) {
	if i := slices.Index(p.rules, r); i >= 0 {
		p.rules = slices.Delete(p.rules, i, i+1)
	}
}

// install puts r on the NIC.
func (p *port) install(r *installed) error {
	for d := range 2 {
		if !inDir(&r.r, d) {
			continue
		}
		if err := p.ensureRoot(d); err != nil {
			return err
		}
	}
	hr := p.nicRule(&r.r)
	r.counted = hasCount(&hr)
	spec, err := compile(&hr)
	if err != nil {
		return err
	}
	defer spec.Free()
	start := time.Now()
	switch p.backend {
	case BackendRTEFlow:
		if err := p.eng.Validate(spec); err != nil {
			return err
		}
		h, err := p.eng.Create(spec)
		if err != nil {
			return err
		}
		r.h = h
	case BackendTemplate:
		h, tbl, err := p.asyncCreate(spec)
		if err != nil {
			return err
		}
		r.h, r.tbl = h, tbl
	}
	p.status.Inserted++
	p.status.InsertTime += time.Since(start)
	return nil
}

// templateTableSize is how many rules each template table holds.
const templateTableSize = 4096

// asyncWait bounds the wait for an asynchronous operation's completion.
const asyncWait = time.Second

// asyncCreate enqueues the rule in the template table of its shape (made
// on first use), pushes it and pulls until the NIC reports it.
func (p *port) asyncCreate(spec *dpdk.FlowSpec) (Handle, TemplateTable, error) {
	key := shapeKey(spec.Describe())
	tbl, ok := p.tables[key]
	if !ok {
		t, err := p.eng.NewTable(spec, templateTableSize)
		if err != nil {
			return nil, nil, err
		}
		p.tables[key], tbl = t, t
	}
	p.seq++
	seq := p.seq
	h, err := tbl.AsyncCreate(0, spec, true, seq)
	if err != nil {
		return nil, nil, err
	}
	if err := p.complete(tbl, seq, "create"); err != nil {
		// The rule may exist in a failed state: ask for its removal, and
		// drain that completion too.
		if tbl.AsyncDestroy(0, h, false, 0) == nil {
			_ = tbl.Push(0)
			_, _ = tbl.Pull(0, 64)
		}
		return nil, nil, err
	}
	return h, tbl, nil
}

// complete pushes the flow queue and pulls until operation seq is done.
func (p *port) complete(tbl TemplateTable, seq uint64, op string) error {
	if err := tbl.Push(0); err != nil {
		return err
	}
	deadline := time.Now().Add(asyncWait)
	for {
		res, err := tbl.Pull(0, 64)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.UserData == seq {
				if !r.OK {
					return fmt.Errorf("asynchronous %s: the NIC reported the operation failed", op)
				}
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("asynchronous %s: no completion within %v", op, asyncWait)
		}
		if len(res) == 0 {
			time.Sleep(10 * time.Microsecond)
		}
	}
}

// shapeKey identifies the template a rule needs: its attributes, item
// types and masks, action types and configuration.
func shapeKey(d dpdk.FlowDescription) string {
	var b strings.Builder
	fmt.Fprintf(&b, "g%d p%d %t%t%t|", d.Group, d.Priority, d.Ingress, d.Egress, d.Transfer)
	for _, it := range d.Items {
		fmt.Fprintf(&b, "%d:%x,", it.Type, it.Mask)
	}
	b.WriteByte('|')
	for _, a := range d.Actions {
		fmt.Fprintf(&b, "%d:%x,", a.Type, a.Conf)
	}
	return b.String()
}

// uninstall removes r from the NIC.
func (p *port) uninstall(r *installed) error {
	if r.h == nil {
		return nil
	}
	var err error
	if r.tbl != nil {
		p.seq++
		if err = r.tbl.AsyncDestroy(0, r.h, true, p.seq); err == nil {
			err = p.complete(r.tbl, p.seq, "destroy")
		}
	} else {
		err = p.eng.Destroy(r.h)
	}
	if err == nil {
		r.h = nil
	}
	return err
}

// syncSoftware recompiles the port's software tables after a change:
// every rule of a direction, the NIC's marked as offloaded, as soon as one
// of them runs in software; none otherwise. applied says the pipeline now
// runs tables made of p.rules: true with an error means a worker was slow
// to take them and will when it next polls; false means nothing changed
// in the pipeline (a compile error, a worker still on the previous table).
func (m *Manager) syncSoftware(p *port) (applied bool, err error) {
	if m.sw == nil {
		return true, nil
	}
	var late error
	for d := range 2 {
		var rules []flowrule.Rule
		var hw []bool
		var members []*installed
		anySW := false
		for _, r := range p.rules {
			if !inDir(&r.r, d) {
				continue
			}
			rules = append(rules, r.r)
			hw = append(hw, r.where == InHardware)
			members = append(members, r)
			anySW = anySW || r.where == InSoftware
		}
		var t *flowrule.Table
		var carry []int
		if anySW {
			if t, err = flowrule.CompileOffloaded(rules, hw); err != nil {
				return false, err
			}
			carry = make([]int, len(members))
			for i, r := range members {
				carry[i] = r.swIdx[d]
			}
		} else {
			members = nil
		}
		if t != nil || p.sw[d] != nil {
			if err := m.sw.SetFlows(p.ID, pipeDir[d], t, carry); err != nil {
				if m.sw.FlowCounters(p.ID, pipeDir[d]).Table != t {
					return false, err
				}
				late = err
			}
		}
		p.sw[d] = t
		for _, r := range p.rules {
			r.swIdx[d] = -1
		}
		for i, r := range members {
			r.swIdx[d] = i
		}
	}
	return true, late
}

// Destroy removes rules of port id; it returns the numbers it removed
// (numbers without a rule are skipped, as testpmd does).
func (m *Manager) Destroy(id uint16, ids []uint32) ([]uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return nil, err
	}
	var gone []*installed
	for _, n := range ids {
		if r := p.find(n); r != nil && !slices.Contains(gone, r) {
			p.remove(r)
			gone = append(gone, r)
		}
	}
	if len(gone) == 0 {
		return nil, nil
	}
	// The software tables first: if the workers cannot take them, the
	// rules stay everywhere, as they were.
	applied, late := m.syncSoftware(p)
	if !applied {
		for _, r := range gone {
			p.insert(r)
		}
		return nil, late
	}
	var done []uint32
	errs := []error{late}
	kept := false
	for _, r := range gone {
		if r.where == InHardware {
			if err := p.uninstall(r); err != nil {
				errs = append(errs, fmt.Errorf("rule %d: %w", r.r.ID, err))
				p.insert(r)
				kept = true
				continue
			}
		}
		p.status.Destroyed++
		done = append(done, r.r.ID)
	}
	if kept {
		_, err := m.syncSoftware(p)
		errs = append(errs, err)
	}
	return done, errors.Join(errs...)
}

// Flush removes every rule of port id (the root jump stays).
func (m *Manager) Flush(id uint16) error {
	m.mu.Lock()
	ids := []uint32{}
	if p, ok := m.ports[id]; ok {
		for _, r := range p.rules {
			ids = append(ids, r.r.ID)
		}
	}
	m.mu.Unlock()
	_, err := m.Destroy(id, ids)
	return err
}

// List returns port id's rules sorted as testpmd lists them: by group,
// priority, then number; groups, when given, select.
func (m *Manager) List(id uint16, groups []uint32) ([]Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return nil, err
	}
	var out []Entry
	sc := &swCounters{sw: m.sw}
	for _, r := range p.rules {
		if len(groups) > 0 && !slices.Contains(groups, r.r.Group) {
			continue
		}
		out = append(out, p.entry(r, sc))
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(a.Rule.Group, b.Rule.Group); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Rule.Priority, b.Rule.Priority); c != 0 {
			return c
		}
		return cmp.Compare(a.Rule.ID, b.Rule.ID)
	})
	return out, nil
}

// Stopping is called before port id stops. A port that does not keep its
// flow rules across a restart gets them removed from the NIC now (their
// definitions stay), so that no handle outlives its rule; Started puts
// them back.
func (m *Manager) Stopping(id uint16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.ports[id]
	if !ok || p.KeepsRules || p.backend == BackendSoftware || p.parked {
		return nil
	}
	p.parked = true
	return p.offNIC()
}

// offNIC removes the port's rules and root jumps from the NIC; the rules'
// definitions stay.
func (p *port) offNIC() error {
	var errs []error
	for _, r := range p.rules {
		if r.where == InHardware {
			if err := p.uninstall(r); err != nil {
				errs = append(errs, fmt.Errorf("rule %d: %w", r.r.ID, err))
			}
		}
	}
	for d, h := range p.root {
		if h != nil {
			if err := p.eng.Destroy(h); err != nil {
				errs = append(errs, fmt.Errorf("root jump: %w", err))
			}
			p.root[d] = nil
		}
	}
	return errors.Join(errs...)
}

// Started is called once port id runs again: rules Stopping took off the
// NIC go back; one the NIC now refuses runs in software, and says why.
func (m *Manager) Started(id uint16) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.ports[id]
	if !ok || !p.parked {
		return nil
	}
	p.parked = false
	moved := false
	for _, r := range p.rules {
		if r.where != InHardware || r.h != nil {
			continue
		}
		if err := p.install(r); err != nil {
			p.status.Failed++
			r.where, r.why = InSoftware, p.refusal(err)
			moved = true
		}
	}
	if !moved {
		return nil
	}
	_, err := m.syncSoftware(p)
	return err
}

// IDs returns the numbers of port id's rules, in order.
func (m *Manager) IDs(id uint16) ([]uint32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.r.ID
	}
	return out, nil
}

// Query returns rule n of port id with its counters.
func (m *Manager) Query(id uint16, n uint32) (Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.port(id)
	if err != nil {
		return Entry{}, err
	}
	r := p.find(n)
	if r == nil {
		return Entry{}, fmt.Errorf("port %d has no flow rule %d", id, n)
	}
	return p.entry(r, &swCounters{sw: m.sw}), nil
}

func hasCount(r *flowrule.Rule) bool {
	return slices.ContainsFunc(r.Actions, func(a flowrule.Action) bool { return a.Type == flowrule.ActCount })
}

// swCounters reads a port's software counters once per direction for
// a listing: each read is a handshake with every worker.
type swCounters struct {
	sw  Software
	got [2]bool
	st  [2]pipeline.FlowStats
}

func (c *swCounters) get(p *port, d int) *pipeline.FlowStats {
	if !c.got[d] {
		c.st[d], c.got[d] = c.sw.FlowCounters(p.ID, pipeDir[d]), true
	}
	return &c.st[d]
}

// entry reads a rule's counters: the NIC's count action, or the software
// table's counters summed over directions and workers.
func (p *port) entry(r *installed, sc *swCounters) Entry {
	e := Entry{Rule: r.r, Where: r.where, Why: r.why}
	if r.where == InHardware {
		if r.h == nil {
			e.CountErr = errors.New("the port is stopped: the rule is off the NIC until it starts")
			return e
		}
		if !r.counted {
			return e
		}
		hits, bytes, ok, err := p.eng.QueryCount(r.h)
		if err == nil && !ok {
			err = errors.New("the PMD set neither hits nor bytes")
		}
		e.Counter.Packets, e.Counter.Bytes, e.Counted, e.CountErr = hits, bytes, err == nil, err
		return e
	}
	e.Counted = true
	if sc.sw == nil {
		return e
	}
	for d := range 2 {
		if !inDir(&r.r, d) || r.swIdx[d] < 0 {
			continue
		}
		st := sc.get(p, d)
		if st.Table != p.sw[d] || r.swIdx[d] >= len(st.Rules) {
			continue
		}
		e.Counter.Add(&st.Rules[r.swIdx[d]])
	}
	return e
}

// Ports reports every port in probe order.
func (m *Manager) Ports() []PortStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]PortStatus, 0, len(m.order))
	for _, id := range m.order {
		p := m.ports[id]
		s := p.status
		s.HW, s.SW = 0, 0
		for _, r := range p.rules {
			if r.where == InHardware {
				s.HW++
			} else {
				s.SW++
			}
		}
		out = append(out, s)
	}
	return out
}

// NotApplicable sums, over directions, the packets that hit a software
// rule whose queue or rss action only a NIC can carry out.
func (m *Manager) NotApplicable(id uint16) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint64
	if m.sw == nil {
		return 0
	}
	for d := range 2 {
		n += m.sw.FlowCounters(id, pipeDir[d]).NotApplicable
	}
	return n
}

// Close removes every rule from the NICs (the ports are about to close).
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, id := range m.order {
		p := m.ports[id]
		if err := p.offNIC(); err != nil {
			errs = append(errs, fmt.Errorf("port %d: %w", id, err))
		}
		for k, t := range p.tables {
			if err := t.Destroy(); err != nil {
				errs = append(errs, fmt.Errorf("port %d template table: %w", id, err))
			}
			delete(p.tables, k)
		}
		p.rules = nil
	}
	return errors.Join(errs...)
}
