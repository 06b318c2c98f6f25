package offload

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/pipeline"
)

// fakeNIC is a scripted Engine: it logs every call and refuses what its
// hooks say.
type fakeNIC struct {
	calls     []string
	info      error
	configure error
	validate  func(d dpdk.FlowDescription) error
	create    func(d dpdk.FlowDescription) error
	asyncFail bool // Pull reports the creation as failed
	next      int
	live      map[int]dpdk.FlowDescription
	hits      map[int]uint64
	tables    int
}

func newFake() *fakeNIC {
	return &fakeNIC{live: map[int]dpdk.FlowDescription{}, hits: map[int]uint64{}}
}

func (f *fakeNIC) log(format string, a ...any) { f.calls = append(f.calls, fmt.Sprintf(format, a...)) }

func (f *fakeNIC) Info() (dpdk.FlowInfo, error) {
	f.log("info")
	return dpdk.FlowInfo{MaxQueues: 4, MaxQueueSize: 1024, MaxCounters: 1 << 20}, f.info
}

func (f *fakeNIC) Configure(c dpdk.FlowEngineConfig) error {
	f.log("configure queues=%d size=%d counters=%d", c.Queues, c.QueueSize, c.Counters)
	return f.configure
}

func (f *fakeNIC) Validate(s *dpdk.FlowSpec) error {
	d := s.Describe()
	f.log("validate g%d", d.Group)
	if f.validate != nil {
		return f.validate(d)
	}
	return nil
}

func (f *fakeNIC) Create(s *dpdk.FlowSpec) (Handle, error) {
	d := s.Describe()
	f.log("create g%d", d.Group)
	if f.create != nil {
		if err := f.create(d); err != nil {
			return nil, err
		}
	}
	f.next++
	f.live[f.next] = d
	return f.next, nil
}

func (f *fakeNIC) Destroy(h Handle) error {
	f.log("destroy %d", h.(int))
	if _, ok := f.live[h.(int)]; !ok {
		return syscall.EINVAL
	}
	delete(f.live, h.(int))
	return nil
}

func (f *fakeNIC) QueryCount(h Handle) (uint64, uint64, bool, error) {
	f.log("query %d", h.(int))
	return f.hits[h.(int)], f.hits[h.(int)] * 100, true, nil
}

func (f *fakeNIC) Flush() error { f.log("flush"); return nil }

func (f *fakeNIC) NewTable(s *dpdk.FlowSpec, rules uint32) (TemplateTable, error) {
	f.tables++
	f.log("table %d rules=%d", f.tables, rules)
	return &fakeTable{nic: f, id: f.tables}, nil
}

type fakeTable struct {
	nic     *fakeNIC
	id      int
	pending []dpdk.FlowOpResult
	pushed  []dpdk.FlowOpResult
}

func (t *fakeTable) AsyncCreate(q int, s *dpdk.FlowSpec, postpone bool, ud uint64) (Handle, error) {
	t.nic.log("async create table=%d q=%d postpone=%t", t.id, q, postpone)
	t.nic.next++
	t.nic.live[t.nic.next] = s.Describe()
	t.pending = append(t.pending, dpdk.FlowOpResult{OK: !t.nic.asyncFail, UserData: ud})
	return t.nic.next, nil
}

func (t *fakeTable) AsyncDestroy(q int, h Handle, postpone bool, ud uint64) error {
	t.nic.log("async destroy table=%d", t.id)
	delete(t.nic.live, h.(int))
	t.pending = append(t.pending, dpdk.FlowOpResult{OK: true, UserData: ud})
	return nil
}

func (t *fakeTable) Push(q int) error {
	t.nic.log("push")
	t.pushed, t.pending = append(t.pushed, t.pending...), nil
	return nil
}

func (t *fakeTable) Pull(q, max int) ([]dpdk.FlowOpResult, error) {
	t.nic.log("pull")
	out := t.pushed
	t.pushed = nil
	return out, nil
}

func (t *fakeTable) Destroy() error { t.nic.log("table destroy %d", t.id); return nil }

// fakeSW records the software tables as the pipeline would hold them.
// busy refuses a table as a worker still on the previous one does; slow
// takes it but reports a worker late, as the pipeline does.
type fakeSW struct {
	tables     map[uint16]*flowrule.Table
	carries    [][]int
	counters   []flowrule.Counter
	busy, slow bool
}

func (s *fakeSW) SetFlows(port uint16, dir pipeline.FlowDir, t *flowrule.Table, carry []int) error {
	if dir != pipeline.FlowIngress {
		return errors.New("egress table in an ingress-only test")
	}
	if s.busy {
		return errors.New("lcore 1 has not taken the previous flow table yet")
	}
	if s.tables == nil {
		s.tables = map[uint16]*flowrule.Table{}
	}
	s.tables[port] = t
	s.carries = append(s.carries, carry)
	if s.slow {
		return errors.New("lcore 1 did not take the new flow table within a second")
	}
	return nil
}

func (s *fakeSW) FlowCounters(port uint16, dir pipeline.FlowDir) pipeline.FlowStats {
	t := s.tables[port]
	if t == nil || dir != pipeline.FlowIngress {
		return pipeline.FlowStats{}
	}
	return pipeline.FlowStats{Table: t, Rules: s.counters[:len(t.Rules())], NotApplicable: 3}
}

func mustRule(t *testing.T, text string) flowrule.Rule {
	t.Helper()
	r, err := parseRule(text)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newManager(t *testing.T, backend string, info PortInfo, nic *fakeNIC) (*Manager, *fakeSW) {
	t.Helper()
	m, err := New(backend)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.AddPort(info, nic); err != nil {
		t.Fatal(err)
	}
	sw := &fakeSW{counters: make([]flowrule.Counter, 16)}
	m.Start(sw)
	return m, sw
}

const roceCount = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end"

func TestNoFlowEngineRunsEveryRuleInSoftware(t *testing.T) {
	nic := newFake()
	nic.info = &dpdk.FlowError{Op: "flow info", Errno: int(syscall.ENOSYS)}
	m, sw := newManager(t, "auto", PortInfo{ID: 1, Name: "out", Driver: "net_null"}, nic)
	st := m.Ports()[0]
	if st.Backend != BackendSoftware || st.Caps.Engine != "none" {
		t.Fatalf("backend %v engine %q, want software, none", st.Backend, st.Caps.Engine)
	}
	e, err := m.Create(1, mustRule(t, roceCount), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "port 1 (net_null) has no flow engine; rule runs in software"; e.Where != InSoftware || e.Why != want {
		t.Errorf("created %v %q, want sw %q", e.Where, e.Why, want)
	}
	if slices.ContainsFunc(nic.calls, func(c string) bool { return strings.HasPrefix(c, "create") || strings.HasPrefix(c, "validate") }) {
		t.Errorf("a port without a flow engine was asked to validate or create: %v", nic.calls)
	}
	if tb := sw.tables[1]; tb == nil || len(tb.Rules()) != 1 {
		t.Fatalf("software table %v, want the rule", tb)
	}
	sw.counters[0] = flowrule.Counter{Packets: 5, Bytes: 500}
	q, err := m.Query(1, 0)
	if err != nil || !q.Counted || q.Counter.Packets != 5 || q.Counter.Bytes != 500 {
		t.Errorf("query: %+v, %v; want 5 packets, 500 bytes", q, err)
	}
	if n := m.NotApplicable(1); n != 3 {
		t.Errorf("not applicable %d, want the pipeline's 3", n)
	}
	if _, err := m.Create(1, mustRule(t, "pattern eth / end actions drop / end"), true); err == nil {
		t.Error("a rule without ingress or egress was accepted")
	}
	if _, err := m.Create(7, mustRule(t, roceCount), true); err == nil {
		t.Error("a rule on an unknown port was accepted")
	}
}

// Like net_tap on a kernel without cls_flower: validation passes, creation
// does not. The trial create at start finds out and every rule goes to
// software without a failed attempt each.
func TestTrialCreateFailureMeansSoftware(t *testing.T) {
	nic := newFake()
	nic.info = &dpdk.FlowError{Op: "flow info", Errno: int(syscall.ENOTSUP)}
	nic.create = func(dpdk.FlowDescription) error {
		return &dpdk.FlowError{Op: "flow create", Errno: int(syscall.ENOTSUP), Message: "cannot create flow"}
	}
	m, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "tap", Driver: "net_tap"}, nic)
	st := m.Ports()[0]
	if st.Caps.Engine != "rte_flow" || len(st.Caps.Shapes) != len(shapes) || !st.Caps.Tried || st.Caps.Trial == nil {
		t.Fatalf("caps %+v: want rte_flow engine, the validate matrix and a failed trial", st.Caps)
	}
	if st.Backend != BackendSoftware || !strings.Contains(st.Caps.Note, "cannot create flow") {
		t.Fatalf("backend %v note %q, want software with the PMD's sentence", st.Backend, st.Caps.Note)
	}
	before := len(nic.calls)
	e, err := m.Create(0, mustRule(t, roceCount), true)
	if err != nil || e.Where != InSoftware {
		t.Fatalf("create: %+v %v", e, err)
	}
	if len(nic.calls) != before {
		t.Errorf("the NIC was asked again after the trial: %v", nic.calls[before:])
	}
}

func TestPerRuleFallbackKeepsTheNICPath(t *testing.T) {
	nic := newFake()
	nic.info = syscall.ENOTSUP
	nic.validate = func(d dpdk.FlowDescription) error {
		for _, a := range d.Actions {
			if a.Type == dpdk.FlowActionMark {
				return &dpdk.FlowError{Op: "flow validate", Errno: int(syscall.ENOTSUP), Type: dpdk.FlowErrAction, Message: "action not supported", Action: 0, ActionName: "mark"}
			}
		}
		return nil
	}
	m, sw := newManager(t, "auto", PortInfo{ID: 0, Name: "in", Driver: "net_i40e"}, nic)
	if st := m.Ports()[0]; st.Backend != BackendRTEFlow || st.Caps.Trial != nil {
		t.Fatalf("backend %v trial %v, want rte_flow", st.Backend, st.Caps.Trial)
	}
	hw, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / jump group 1 / end"), true)
	if err != nil || hw.Where != InHardware {
		t.Fatalf("jump rule: %+v %v, want hw", hw, err)
	}
	if sw.tables[0] != nil {
		t.Error("a software table exists while every rule is on the NIC")
	}
	soft, err := m.Create(0, mustRule(t, "group 1 ingress pattern eth / end actions mark id 3 / end"), true)
	if err != nil || soft.Where != InSoftware || soft.Rule.ID != 1 {
		t.Fatalf("mark rule: %+v %v, want sw rule 1", soft, err)
	}
	if !strings.Contains(soft.Why, "net_i40e refused it") || !strings.Contains(soft.Why, "action not supported") {
		t.Errorf("why %q does not give the PMD's refusal", soft.Why)
	}
	tb := sw.tables[0]
	if tb == nil || len(tb.Rules()) != 2 {
		t.Fatalf("software table %v: want both rules (the NIC's one for its jump)", tb)
	}
	if c := sw.carries[len(sw.carries)-1]; !slices.Equal(c, []int{-1, -1}) {
		t.Errorf("carry %v, want two new rules", c)
	}
	// A third rule keeps the first two's software indices.
	if _, err := m.Create(0, mustRule(t, "group 1 priority 1 ingress pattern eth / end actions mark id 4 / end"), true); err != nil {
		t.Fatal(err)
	}
	if c := sw.carries[len(sw.carries)-1]; !slices.Equal(c, []int{0, 1, -1}) {
		t.Errorf("carry %v, want [0 1 -1]", c)
	}
	for h := range nic.live {
		nic.hits[h] = 42
	}
	q, err := m.Query(0, 0)
	if err != nil || q.Where != InHardware || q.Counter.Packets != 42 || q.Counter.Bytes != 4200 {
		t.Errorf("hw query %+v %v, want the NIC's 42 hits", q, err)
	}
	if st := m.Ports()[0]; st.HW != 1 || st.SW != 2 || st.Inserted != 1 || st.Failed != 2 {
		t.Errorf("status hw %d sw %d inserted %d failed %d, want 1 2 1 2", st.HW, st.SW, st.Inserted, st.Failed)
	}
	// Destroying the NIC rule leaves a table of software rules only.
	done, err := m.Destroy(0, []uint32{0, 9})
	if err != nil || !slices.Equal(done, []uint32{0}) {
		t.Fatalf("destroy: %v %v", done, err)
	}
	if len(nic.live) != 0 {
		t.Errorf("NIC rules left: %v", nic.live)
	}
	if c := sw.carries[len(sw.carries)-1]; !slices.Equal(c, []int{1, 2}) {
		t.Errorf("carry after destroy %v, want [1 2]", c)
	}
	if err := m.Flush(0); err != nil {
		t.Fatal(err)
	}
	if l, _ := m.List(0, nil); len(l) != 0 || sw.tables[0] != nil {
		t.Errorf("after flush: %d rules, table %v", len(l), sw.tables[0])
	}
}

func TestMLX5DirectRulesLayout(t *testing.T) {
	nic := newFake()
	nic.info = syscall.ENOTSUP
	m, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "cx6", Driver: "mlx5_pci", Devargs: "dv_flow_en=1,dv_xmeta_en=1"}, nic)
	if st := m.Ports()[0]; !st.Caps.RootJump {
		t.Fatal("no root jump layout on mlx5 dv_flow_en=1")
	}
	e, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / jump group 2 / end"), true)
	if err != nil || e.Where != InHardware || e.Rule.Group != 0 {
		t.Fatalf("%+v %v: want a hw rule listed in its own group 0", e, err)
	}
	var root, placed dpdk.FlowDescription
	for h, d := range nic.live {
		if d.Group == 0 {
			root = d
		} else {
			placed = d
		}
		_ = h
	}
	if len(nic.live) != 2 || root.Actions[0].Type != dpdk.FlowActionJump || root.Actions[0].Group != 1 || !root.Ingress {
		t.Fatalf("NIC rules %+v: want an ingress root rule jumping to group 1", nic.live)
	}
	if placed.Group != 1 || placed.Actions[1].Group != 3 {
		t.Errorf("rule placed in group %d jumping to %d, want 1 and 3", placed.Group, placed.Actions[1].Group)
	}
	// dv_flow_en=0 (Verbs) has no such layout.
	nic2 := newFake()
	nic2.info = syscall.ENOTSUP
	m2, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "cx5", Driver: "mlx5_pci", Devargs: "dv_flow_en=0"}, nic2)
	if m2.Ports()[0].Caps.RootJump {
		t.Error("root jump layout with dv_flow_en=0")
	}
	if err := m.Close(); err != nil || len(nic.live) != 0 {
		t.Errorf("close: %v, NIC rules left %v", err, nic.live)
	}
}

func TestTemplateCallOrder(t *testing.T) {
	nic := newFake()
	m, sw := newManager(t, "auto", PortInfo{ID: 0, Name: "cx7", Driver: "mlx5_pci", Devargs: "dv_flow_en=2"}, nic)
	if st := m.Ports()[0]; st.Backend != BackendTemplate || st.Caps.RootJump {
		t.Fatalf("backend %v root %v, want template without the Direct Rules layout", st.Backend, st.Caps.RootJump)
	}
	for i := range 2 {
		e, err := m.Create(0, mustRule(t, fmt.Sprintf("ingress pattern eth / ipv4 / udp dst is %d / end actions count / end", 4791+i)), true)
		if err != nil || e.Where != InHardware {
			t.Fatalf("rule %d: %+v %v", i, e, err)
		}
	}
	want := []string{
		"info", "configure queues=1 size=64 counters=65536",
		"table 1 rules=4096", "async create table=1 q=0 postpone=true", "push", "pull",
		"async create table=1 q=0 postpone=true", "push", "pull",
	}
	if !slices.Equal(nic.calls, want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(nic.calls, "\n"), strings.Join(want, "\n"))
	}
	// Another shape gets its own table; a failed completion falls back.
	nic.asyncFail = true
	e, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv6 / udp dst is 4791 / end actions drop / end"), true)
	if err != nil || e.Where != InSoftware || !strings.Contains(e.Why, "reported the operation failed") {
		t.Errorf("failed async create: %+v %v, want software with the reason", e, err)
	}
	calls := len(nic.calls)
	if w, _, err := m.Validate(0, mustRule(t, roceCount)); err != nil || w != InHardware || len(nic.calls) != calls {
		t.Errorf("validate on the template API: %v %v, calls %v", w, err, nic.calls[calls:])
	}
	if nic.tables != 2 || sw.tables[0] == nil {
		t.Errorf("%d tables, software table %v", nic.tables, sw.tables[0])
	}
	if _, err := m.Destroy(0, []uint32{0}); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil || len(nic.live) != 0 {
		t.Errorf("close: %v, live %v", err, nic.live)
	}
}

// A template engine that refuses rte_flow_configure (as PMDs without the
// template API answer ENOTSUP) leaves the port in software, with why.
func TestTemplateConfigureRefused(t *testing.T) {
	nic := newFake()
	nic.configure = &dpdk.FlowError{Op: "flow configure", Errno: int(syscall.ENOTSUP)}
	m, _ := newManager(t, "template", PortInfo{ID: 0, Name: "p", Driver: "net_x"}, nic)
	st := m.Ports()[0]
	if st.Backend != BackendSoftware || !strings.Contains(st.Caps.Note, "rte_flow_configure failed") {
		t.Errorf("backend %v note %q", st.Backend, st.Caps.Note)
	}
	// Asked for the template backend on a synchronous engine.
	nic2 := newFake()
	nic2.info = syscall.ENOTSUP
	m2, _ := newManager(t, "template", PortInfo{ID: 0, Name: "p", Driver: "net_tap"}, nic2)
	if st := m2.Ports()[0]; st.Backend != BackendSoftware || !strings.Contains(st.Caps.Note, "no template API") {
		t.Errorf("backend %v note %q", st.Backend, st.Caps.Note)
	}
	if slices.Contains(nic2.calls, "configure queues=1 size=64 counters=65536") {
		t.Error("configure called on a synchronous engine")
	}
}

func TestListOrderAndBackendChoice(t *testing.T) {
	if _, err := New("dr"); err == nil {
		t.Error("unknown backend accepted")
	}
	nic := newFake()
	nic.info = syscall.ENOSYS
	m, _ := newManager(t, "software", PortInfo{ID: 0, Name: "p", Driver: "net_ring"}, nic)
	for _, l := range []string{
		"group 1 priority 0 ingress pattern eth / end actions count / end",
		"group 0 priority 2 ingress pattern eth / end actions count / end",
		"group 0 priority 1 ingress pattern eth / end actions count / end",
	} {
		if _, err := m.Create(0, mustRule(t, l), true); err != nil {
			t.Fatal(err)
		}
	}
	l, err := m.List(0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	for _, e := range l {
		ids = append(ids, e.Rule.ID)
	}
	if !slices.Equal(ids, []uint32{2, 1, 0}) {
		t.Errorf("list order %v, want by group, priority, id: [2 1 0]", ids)
	}
	if l, _ := m.List(0, []uint32{1}); len(l) != 1 || l[0].Rule.ID != 0 {
		t.Errorf("group 1: %+v", l)
	}
	r := mustRule(t, roceCount)
	r.ID = 1
	if _, err := m.Create(0, r, false); err == nil {
		t.Error("a config rule reusing number 1 was accepted")
	}
	if w, why, err := m.Validate(0, mustRule(t, roceCount)); err != nil || w != InSoftware || !strings.Contains(why, "backend = \"software\"") {
		t.Errorf("validate: %v %q %v", w, why, err)
	}
}

// BenchmarkSoftwareInsert1k adds rules one at a time, as the console does,
// until the port has 1000: each insertion recompiles the port's software
// table (the figure is rules/s including that).
func BenchmarkSoftwareInsert1k(b *testing.B) {
	rules := make([]flowrule.Rule, 1000)
	for i := range rules {
		r, err := parseRule(fmt.Sprintf("ingress pattern eth / ipv4 src is 10.%d.%d.1 / udp dst is 4791 / end actions count / drop / end", i/256, i%256))
		if err != nil {
			b.Fatal(err)
		}
		rules[i] = r
	}
	b.ResetTimer()
	for range b.N {
		m, _ := New("software")
		nic := newFake()
		nic.info = syscall.ENOSYS
		if err := m.AddPort(PortInfo{Name: "p", Driver: "net_null"}, nic); err != nil {
			b.Fatal(err)
		}
		m.Start(&fakeSW{counters: make([]flowrule.Counter, len(rules))})
		for _, r := range rules {
			if _, err := m.Create(0, r, true); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(rules))/b.Elapsed().Seconds(), "rules/s")
}

// A table the workers cannot take leaves the rules as they were; one a
// worker takes late keeps the change and says so.
func TestSoftwareTableRefusedOrLate(t *testing.T) {
	nic := newFake()
	nic.info = syscall.ENOTSUP
	nic.validate = func(d dpdk.FlowDescription) error {
		if d.Actions[0].Type == dpdk.FlowActionMark {
			return syscall.ENOTSUP
		}
		return nil
	}
	m, sw := newManager(t, "auto", PortInfo{ID: 0, Name: "in", Driver: "net_i40e"}, nic)
	ids := func() []uint32 {
		l, _ := m.List(0, nil)
		var out []uint32
		for _, e := range l {
			out = append(out, e.Rule.ID)
		}
		return out
	}
	if _, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv4 / end actions mark id 1 / end"), true); err != nil {
		t.Fatal(err)
	}
	sw.busy = true
	if _, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv4 / udp / end actions mark id 2 / end"), true); err == nil {
		t.Error("create succeeded while the workers could not take the table")
	}
	hwBefore := len(nic.live)
	if _, err := m.Create(0, mustRule(t, roceCount), true); err == nil {
		t.Error("a NIC rule was kept although the software table could not follow")
	}
	if len(nic.live) != hwBefore {
		t.Errorf("NIC rules %d, want %d: the refused create left its rule on the NIC", len(nic.live), hwBefore)
	}
	if done, err := m.Destroy(0, []uint32{0}); err == nil || len(done) != 0 {
		t.Errorf("destroy while busy: %v, %v", done, err)
	}
	if got := ids(); !slices.Equal(got, []uint32{0}) {
		t.Errorf("rules %v after refusals, want [0]", got)
	}
	sw.busy, sw.slow = false, true
	e, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv6 / end actions mark id 3 / end"), true)
	if err == nil || !strings.Contains(err.Error(), "rule 1 created, but") || e.Rule.ID != 1 {
		t.Errorf("late create: %+v, %v", e, err)
	}
	if got := ids(); !slices.Equal(got, []uint32{0, 1}) {
		t.Errorf("rules %v, want [0 1]: a late table is installed", got)
	}
	if tb := sw.tables[0]; tb == nil || len(tb.Rules()) != 2 {
		t.Errorf("software table %v, want both rules", tb)
	}
}

// What the NIC drops never reaches roce-fwd: a drop rule gets a count on
// the NIC so that its drops can be read.
func TestNICDropRuleIsCounted(t *testing.T) {
	nic := newFake()
	nic.info = syscall.ENOTSUP
	m, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "in", Driver: "net_ixgbe"}, nic)
	e, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv4 src is 10.0.0.9 / end actions drop / end"), true)
	if err != nil || e.Where != InHardware {
		t.Fatalf("%+v %v", e, err)
	}
	for h, d := range nic.live {
		if len(d.Actions) != 3 || d.Actions[0].Type != dpdk.FlowActionCount || d.Actions[1].Type != dpdk.FlowActionDrop {
			t.Errorf("NIC actions %+v, want count, drop, end", d.Actions)
		}
		nic.hits[h] = 7
	}
	q, err := m.Query(0, e.Rule.ID)
	if err != nil || !q.Counted || q.Counter.Packets != 7 {
		t.Errorf("query %+v %v, want the NIC's 7 drops", q, err)
	}
	if len(q.Rule.Actions) != 1 {
		t.Errorf("the rule as listed grew to %+v; the count is the NIC's alone", q.Rule.Actions)
	}
}

// A port that does not keep its rules across a restart has them taken
// off before it stops and put back once it runs; one created while it is
// stopped goes on at start too.
func TestRulesFollowPortRestart(t *testing.T) {
	for _, keep := range []bool{false, true} {
		nic := newFake()
		nic.info = syscall.ENOTSUP
		m, _ := newManager(t, "auto", PortInfo{ID: 0, Name: "in", Driver: "net_i40e", KeepsRules: keep}, nic)
		if _, err := m.Create(0, mustRule(t, roceCount), true); err != nil {
			t.Fatal(err)
		}
		if err := m.Stopping(0); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{false: 0, true: 1}[keep]; len(nic.live) != want {
			t.Errorf("keep %v: %d NIC rules while stopped, want %d", keep, len(nic.live), want)
		}
		e, err := m.Create(0, mustRule(t, "ingress pattern eth / ipv6 / end actions count / end"), true)
		if err != nil || e.Where != InHardware {
			t.Fatalf("create while stopped: %+v %v", e, err)
		}
		if !keep {
			if q, _ := m.Query(0, 1); q.CountErr == nil || len(nic.live) != 0 {
				t.Errorf("a parked rule queried without error (%+v) or went on the stopped NIC", q)
			}
		}
		if err := m.Started(0); err != nil {
			t.Fatal(err)
		}
		if len(nic.live) != 2 {
			t.Errorf("keep %v: %d NIC rules after start, want 2", keep, len(nic.live))
		}
		for _, id := range []uint32{0, 1} {
			if q, err := m.Query(0, id); err != nil || q.CountErr != nil || !q.Counted {
				t.Errorf("keep %v rule %d after start: %+v %v", keep, id, q, err)
			}
		}
	}
}
