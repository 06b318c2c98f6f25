package console

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"roce-fwd/dpdk"
	"roce-fwd/flowrule"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
)

// Each flow sub-command parses to its kind with the port resolved, the
// sub-command abbreviated or not; errors name the port or the word.
func TestFlowParse(t *testing.T) {
	s := newGrammar(testPorts)
	cases := []struct {
		line  string
		kind  flowrule.CommandKind
		port  uint16
		check func(c flowrule.Command) bool
	}{
		{"flow validate 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end", flowrule.CmdValidate, 0,
			func(c flowrule.Command) bool {
				return c.Rule.Ingress && len(c.Rule.Items) == 3 && c.Rule.Actions[0].Type == flowrule.ActCount
			}},
		{"flow create out group 1 priority 2 egress pattern eth / end actions drop / end", flowrule.CmdCreate, 1,
			func(c flowrule.Command) bool { return c.Rule.Group == 1 && c.Rule.Priority == 2 && c.Rule.Egress }},
		{"fl cr 1 ingress pattern eth / end actions queue index 0 / end", flowrule.CmdCreate, 1,
			func(c flowrule.Command) bool { return c.Rule.Actions[0].Type == flowrule.ActQueue }},
		{"flow list in", flowrule.CmdList, 0, func(c flowrule.Command) bool { return len(c.Groups) == 0 }},
		{"flow l 1 group 0 group 3", flowrule.CmdList, 1, func(c flowrule.Command) bool { return reflect.DeepEqual(c.Groups, []uint32{0, 3}) }},
		{"flow query 0 5 count", flowrule.CmdQuery, 0, func(c flowrule.Command) bool { return reflect.DeepEqual(c.Rules, []uint32{5}) }},
		{"flow destroy 1 rule 0 rule 4", flowrule.CmdDestroy, 1, func(c flowrule.Command) bool { return reflect.DeepEqual(c.Rules, []uint32{0, 4}) }},
		{"flow flush out", flowrule.CmdFlush, 1, func(flowrule.Command) bool { return true }},
	}
	for _, tc := range cases {
		cmd, words, err := s.Resolve(strings.Fields(tc.line))
		if err != nil || cmd.Syntax != "flow [<rest>]" {
			t.Errorf("%q: resolves to %v, %v", tc.line, cmd, err)
			continue
		}
		c, port, err := s.parseFlow(words)
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if c.Kind != tc.kind || port != tc.port || !tc.check(c) {
			t.Errorf("%q: %v port %d %+v", tc.line, c.Kind, port, c)
		}
	}

	errCases := []struct{ line, want string }{
		{"flow create 7 ingress pattern eth / end actions drop / end", "Invalid port 7 (valid ports: 0 1)"},
		{"flow list 7", "Invalid port 7 (valid ports: 0 1)"},
		{"flow flush eth9", `Invalid port "eth9" (valid ports: 0 (in), 1 (out))`},
		// The caret sits under the word flowrule blames.
		{"flow create 0 ingress pattern eth / ipx / end actions drop / end",
			"Bad arguments: unknown item \"ipx\" (items: eth, vlan, ipv4, ipv6, udp, tcp, ib_bth, end)\n" +
				"  flow create 0 ingress pattern eth / ipx / end actions drop / end\n" +
				"                                      ^^^"},
		{"flow query 0 3",
			"Bad arguments: unexpected end of command, expected \"count\"\n" +
				"  flow query 0 3\n" +
				"                 ^"},
		{"flow", "Bad arguments: unexpected end of command, expected a flow command"},
		{"flow frob 0", `Bad arguments: unknown flow command "frob"`},
	}
	for _, tc := range errCases {
		_, words, err := s.Resolve(strings.Fields(tc.line))
		if err == nil {
			_, _, err = s.parseFlow(words)
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.line, err, tc.want)
		}
	}
	// Through Exec too, without a daemon the error is the port's.
	if _, err := s.Exec("flow list 7", false); err == nil || err.Error() != "Invalid port 7 (valid ports: 0 1)" {
		t.Errorf("exec flow list 7: %v", err)
	}
}

func TestFlowComplete(t *testing.T) {
	s := newGrammar(testPorts)
	cases := []struct {
		line string
		want []string
	}{
		{"flow ", []string{"create", "destroy", "flush", "list", "query", "validate"}},
		{"flow cr", []string{"create"}},
		{"flow f", []string{"flush"}},
		{"flow create ", []string{"0", "1", "in", "out"}},
		{"flow list o", []string{"out"}},
		{"flow create 0 ", []string{"egress", "group", "ingress", "pattern", "priority", "transfer"}},
		{"fl cr 0 ingress pattern ", []string{"end", "eth", "ib_bth", "ipv4", "ipv6", "tcp", "udp", "vlan"}},
		{"flow create 0 pattern eth / ipv4 ", []string{"/", "dscp", "dst", "ecn", "proto", "src", "tos", "ttl"}},
		{"flow create 0 pattern eth / ipv4 d", []string{"dscp", "dst"}},
		{"flow create 0 pattern eth / ipv4 dst ", []string{"is", "last", "mask", "prefix", "spec"}},
		{"flow create 0 pattern eth / end actions co", []string{"count"}},
		{"flow list 0 ", []string{"group"}},
		{"flow query 0 ", nil}, // a rule number
	}
	for _, tc := range cases {
		if got := s.Complete(tc.line); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Complete(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// fakeEngine is a synchronous rte_flow engine that takes every rule but
// drops, and counts by the handle (the trial rule took handle 1).
type fakeEngine struct {
	info     error
	next     int
	live     map[int]bool
	queryErr error
}

func (e *fakeEngine) Info() (dpdk.FlowInfo, error) { return dpdk.FlowInfo{}, e.info }

func (e *fakeEngine) Configure(dpdk.FlowEngineConfig) error { return nil }

func (e *fakeEngine) Validate(s *dpdk.FlowSpec) error {
	for _, a := range s.Describe().Actions {
		if a.Type == dpdk.FlowActionDrop {
			return errors.New("drop is not supported")
		}
	}
	return nil
}

func (e *fakeEngine) Create(s *dpdk.FlowSpec) (offload.Handle, error) {
	if err := e.Validate(s); err != nil {
		return nil, err
	}
	e.next++
	if e.live == nil {
		e.live = map[int]bool{}
	}
	e.live[e.next] = true
	return e.next, nil
}

func (e *fakeEngine) Destroy(h offload.Handle) error {
	delete(e.live, h.(int))
	return nil
}

func (e *fakeEngine) QueryCount(h offload.Handle) (uint64, uint64, bool, error) {
	if e.queryErr != nil {
		return 0, 0, false, e.queryErr
	}
	n := uint64(h.(int))
	return 1000 * n, 64000 * n, true, nil
}

func (e *fakeEngine) Flush() error { return nil }

func (e *fakeEngine) NewTable(*dpdk.FlowSpec, uint32) (offload.TemplateTable, error) {
	return nil, syscall.ENOTSUP
}

// fakeSoftware stands for the pipeline: rule i of a table has hit 10+i
// packets, and a meter sorted them 1/2/3 by colour.
type fakeSoftware struct {
	tables map[[2]int]*flowrule.Table
}

func (f *fakeSoftware) SetFlows(port uint16, dir pipeline.FlowDir, t *flowrule.Table, _ []int) error {
	f.tables[[2]int{int(port), int(dir)}] = t
	return nil
}

func (f *fakeSoftware) FlowCounters(port uint16, dir pipeline.FlowDir) pipeline.FlowStats {
	t := f.tables[[2]int{int(port), int(dir)}]
	st := pipeline.FlowStats{Table: t, NotApplicable: 7}
	if t == nil {
		return pipeline.FlowStats{}
	}
	for i := range t.Rules() {
		st.Rules = append(st.Rules, flowrule.Counter{Packets: uint64(10 + i), Bytes: uint64(640 + 64*i), Green: 1, Yellow: 2, Red: 3})
	}
	return st
}

// flowShell is a shell over a rule manager with port 0 (in) without a
// flow engine and port 1 (out) with a synchronous one.
func flowShell(t *testing.T) (*Shell, *fakeEngine) {
	t.Helper()
	m, err := offload.New("auto")
	if err != nil {
		t.Fatal(err)
	}
	nic := &fakeEngine{info: syscall.ENOTSUP}
	if err := m.AddPort(offload.PortInfo{ID: 0, Name: "in", Driver: "net_pcap"}, &fakeEngine{info: syscall.ENOSYS}); err != nil {
		t.Fatal(err)
	}
	if err := m.AddPort(offload.PortInfo{ID: 1, Name: "out", Driver: "net_fake"}, nic); err != nil {
		t.Fatal(err)
	}
	m.Start(&fakeSoftware{tables: map[[2]int]*flowrule.Table{}})
	s := newGrammar(testPorts)
	s.flows = func() *offload.Manager { return m }
	return s, nic
}

func mustExec(t *testing.T, s *Shell, line string) string {
	t.Helper()
	out, err := s.Exec(line, false)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return out
}

// The flow commands over the rule manager print what testpmd prints, plus
// where each rule runs and why.
func TestFlowCommands(t *testing.T) {
	s, nic := flowShell(t)
	const noEngine = "port 0 (net_pcap) has no flow engine; rule runs in software"

	if out := mustExec(t, s, "flow validate 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end"); out != "Flow rule validated\n(runs in software: "+noEngine+")\n" {
		t.Errorf("validate sw:\n%s", out)
	}
	if out := mustExec(t, s, "flow validate 1 ingress pattern eth / end actions queue index 0 / end"); out != "Flow rule validated\n" {
		t.Errorf("validate hw:\n%s", out)
	}
	if _, err := s.Exec("flow validate 1 pattern eth / end actions count / end", false); err == nil || !strings.Contains(err.Error(), "ingress or egress") {
		t.Errorf("validate without a direction: %v", err)
	}

	if out := mustExec(t, s, "flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end"); out != "Flow rule #0 created\n(software: "+noEngine+")\n" {
		t.Errorf("create sw:\n%s", out)
	}
	if out := mustExec(t, s, "flow create in ingress pattern eth / end actions meter srtcm cir 1000 cbs 100 ebs 100 / end"); !strings.HasPrefix(out, "Flow rule #1 created\n(software: ") {
		t.Errorf("create sw meter:\n%s", out)
	}
	if out := mustExec(t, s, "flow create 1 ingress pattern eth / ipv4 / udp / end actions count / queue index 0 / end"); out != "Flow rule #0 created\n" {
		t.Errorf("create hw:\n%s", out)
	}
	if out := mustExec(t, s, "flow create 1 ingress priority 1 pattern eth / end actions queue index 1 / end"); out != "Flow rule #1 created\n" {
		t.Errorf("create hw without count:\n%s", out)
	}
	// Refused by the NIC: software, with the PMD's sentence.
	if out := mustExec(t, s, "flow create 1 ingress group 2 pattern eth / end actions drop / end"); out != "Flow rule #2 created\n(software: net_fake refused it: drop is not supported; rule runs in software)\n" {
		t.Errorf("create refused:\n%s", out)
	}

	out := mustExec(t, s, "flow list 1")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := [][]string{
		{"ID", "Group", "Prio", "Attr", "Rule", "Where", "Hits"},
		{"0", "0", "0", "i--", "ETH", "IPV4", "UDP", "=>", "COUNT", "QUEUE", "hw", "2000"},
		{"1", "0", "1", "i--", "ETH", "=>", "QUEUE", "hw", "-"},
		// Software counters: the third rule of the port's table.
		{"2", "2", "0", "i--", "ETH", "=>", "DROP", "sw", "12"},
	}
	if len(lines) != len(want) {
		t.Fatalf("flow list 1:\n%s", out)
	}
	for i, l := range lines {
		if got := strings.Fields(l); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("flow list 1 line %d: %q, want %q", i, got, want[i])
		}
	}
	// Columns line up.
	if strings.Index(lines[0], "Where") != strings.Index(lines[1], "hw") {
		t.Errorf("columns:\n%s", out)
	}
	if out := mustExec(t, s, "flow list 1 group 2"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "DROP") {
		t.Errorf("flow list 1 group 2:\n%s", out)
	}

	if out := mustExec(t, s, "flow query 1 0 count"); out != "COUNT:\n hits_set: 1\n bytes_set: 1\n hits: 2000\n bytes: 128000\n" {
		t.Errorf("query hw:\n%s", out)
	}
	if _, err := s.Exec("flow query 1 1 count", false); err == nil || err.Error() != "rule 1 has no count action" {
		t.Errorf("query hw without count: %v", err)
	}
	if out := mustExec(t, s, "flow query 0 1 count"); out != "COUNT:\n hits_set: 1\n bytes_set: 1\n hits: 11\n bytes: 704\n green: 1\n yellow: 2\n red: 3\n" {
		t.Errorf("query sw meter:\n%s", out)
	}
	if _, err := s.Exec("flow query 0 9 count", false); err == nil || !strings.Contains(err.Error(), "no flow rule 9") {
		t.Errorf("query missing: %v", err)
	}
	nic.queryErr = errors.New("counter read failed")
	if _, err := s.Exec("flow query 1 0 count", false); err == nil || !strings.Contains(err.Error(), "counter read failed") {
		t.Errorf("query with a failing NIC: %v", err)
	}
	if out := mustExec(t, s, "flow list 1"); !strings.Contains(strings.Split(out, "\n")[1], "error") {
		t.Errorf("list with a failing NIC:\n%s", out)
	}
	nic.queryErr = nil

	var entries []struct {
		ID    uint32  `json:"id"`
		Attr  string  `json:"attr"`
		Rule  string  `json:"rule"`
		Where string  `json:"where"`
		Hits  *uint64 `json:"hits"`
		Why   string  `json:"why"`
		Flow  string  `json:"flow"`
	}
	execJSON(t, s, "flow list 1", &entries)
	if len(entries) != 3 || entries[0].Rule != "ETH IPV4 UDP => COUNT QUEUE" || entries[0].Hits == nil || *entries[0].Hits != 2000 ||
		entries[1].Hits != nil || entries[2].Where != "sw" || !strings.Contains(entries[2].Why, "refused") ||
		entries[0].Flow != "flow create 1 ingress pattern eth / ipv4 / udp / end actions count / queue index 0 / end" {
		t.Errorf("flow list --json: %+v", entries)
	}
	var q map[string]any
	execJSON(t, s, "flow query 0 1 count", &q)
	if q["hits"] != 11.0 || q["bytes"] != 704.0 || q["red"] != 3.0 || q["where"] != "sw" {
		t.Errorf("flow query --json: %v", q)
	}

	if out := mustExec(t, s, "flow destroy 1 rule 1 rule 7 rule 1"); out != "Flow rule #1 destroyed\nFlow rule #7 not found\nFlow rule #1 not found\n" {
		t.Errorf("destroy:\n%s", out)
	}
	if out := mustExec(t, s, "flow list 1"); strings.Contains(out, "QUEUE hw -") || strings.Count(out, "\n") != 3 {
		t.Errorf("list after destroy:\n%s", out)
	}
	// Numbers continue from the highest in use, as testpmd's.
	if out := mustExec(t, s, "flow create 1 ingress pattern eth / end actions flag / end"); out != "Flow rule #3 created\n" {
		t.Errorf("create after destroy:\n%s", out)
	}
	if out := mustExec(t, s, "flow flush 1"); out != "Flushed 3 flow rules on port 1\n" {
		t.Errorf("flush:\n%s", out)
	}
	if out := mustExec(t, s, "flow list 1"); out != "" {
		t.Errorf("list after flush:\n%s", out)
	}
	if len(nic.live) != 0 {
		t.Errorf("NIC rules left after flush: %v", nic.live)
	}
	if out := mustExec(t, s, "flow flush out"); out != "Flushed 0 flow rules on port 1\n" {
		t.Errorf("second flush:\n%s", out)
	}
}

func execJSON(t *testing.T, s *Shell, line string, v any) {
	t.Helper()
	out, err := s.Exec(line, true)
	if err != nil {
		t.Fatalf("%s --json: %v", line, err)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%s --json: %v\n%s", line, err, out)
	}
}

func TestShowOffload(t *testing.T) {
	s, _ := flowShell(t)
	mustExec(t, s, "flow create 0 ingress pattern eth / end actions queue index 0 / end")
	mustExec(t, s, "flow create 1 ingress pattern eth / end actions count / end")
	mustExec(t, s, "flow create 1 ingress pattern eth / end actions drop / end")
	out := mustExec(t, s, "show offload")
	for _, want := range []string{
		"Flow offload on port 0 (in): software backend (requested auto)\n  Why: port 0 (net_pcap) has no flow engine\n  Driver: net_pcap\n  Flow engine: none (",
		"Flow offload on port 1 (out): rte_flow backend (requested auto)\n  Driver: net_fake\n  Flow engine: rte_flow (",
		"  Validate matrix:\n    udp 4791 → queue ",
		"  Trial create: ok\n",
		"  Rules: 1 in hardware, 1 in software\n",
		"  NIC insertions: 1 inserted, 1 failed; 0 rules destroyed; average insertion time ",
		"  Not applicable in software: 7 packets",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show offload: no %q in\n%s", want, out)
		}
	}
	// One line per shape: ok, or the NIC's refusal.
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "→") && strings.HasSuffix(l, " ok") == strings.Contains(l, "drop is not supported") {
			t.Errorf("validate matrix line %q", l)
		}
	}
	if out := mustExec(t, s, "show offload in"); strings.Contains(out, "port 1") {
		t.Errorf("show offload in:\n%s", out)
	}
	var ports []struct {
		PortID   uint16 `json:"port_id"`
		Backend  string `json:"backend"`
		Note     string `json:"note"`
		Engine   string `json:"engine"`
		Validate []struct {
			Name  string `json:"name"`
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		} `json:"validate"`
		TrialTried bool   `json:"trial_tried"`
		RulesHW    int    `json:"rules_hw"`
		RulesSW    int    `json:"rules_sw"`
		Inserted   uint64 `json:"inserted"`
		Failed     uint64 `json:"failed"`
		NA         uint64 `json:"not_applicable"`
	}
	execJSON(t, s, "show offload all", &ports)
	if len(ports) != 2 || ports[0].Backend != "software" || ports[0].Note != "port 0 (net_pcap) has no flow engine" || ports[0].Engine != "none" ||
		ports[0].RulesSW != 1 || ports[0].NA != 7 || ports[1].Backend != "rte_flow" || !ports[1].TrialTried ||
		ports[1].RulesHW != 1 || ports[1].RulesSW != 1 || ports[1].Inserted != 1 || ports[1].Failed != 1 || len(ports[1].Validate) == 0 {
		t.Errorf("show offload --json: %+v", ports)
	}
	for _, v := range ports[1].Validate {
		if v.OK != !strings.Contains(v.Name, "drop") || (v.Error != "") == v.OK {
			t.Errorf("validate matrix line %+v", v)
		}
	}
}

// Without a daemon there is nothing to act on, and it says so; the help
// still gives the grammar.
func TestFlowWithoutDaemon(t *testing.T) {
	s := newGrammar(testPorts)
	out := mustExec(t, s, "help flow")
	if !strings.Contains(out, "flow destroy <port> rule <id> [rule <id>]...") || strings.Contains(out, "show offload") {
		t.Errorf("help flow:\n%s", out)
	}
	if out := mustExec(t, s, "help display"); !strings.Contains(out, "show offload [<port>|all]") {
		t.Errorf("help display:\n%s", out)
	}
	if _, err := s.Exec("flow list 0", false); err == nil || err.Error() != "flow rules need a running daemon" {
		t.Errorf("flow list without a daemon: %v", err)
	}
}
