package console

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"roce-fwd/flowrule"
	"roce-fwd/offload"
)

// flowHelp is the grammar flowrule parses, as the help shows it.
const flowHelp = `testpmd's flow rules, on the NIC or in software:
    flow validate|create <port> [group <n>] [priority <n>] [ingress] [egress] pattern <item> [<field> is|spec|mask|last|prefix <value>]... / ... end actions <action> [<arg> <value>]... / ... end
    flow list <port> [group <n>]...
    flow query <port> <id> count
    flow destroy <port> rule <id> [rule <id>]...
    flow flush <port>
    items: eth vlan ipv4 ipv6 udp tcp ib_bth; actions: queue rss mark flag count drop jump set_ipv4_dscp set_ipv6_dscp meter`

// flowSubs are the flow sub-commands; each has a first letter of its own,
// so any prefix abbreviates.
var flowSubs = []string{"validate", "create", "destroy", "flush", "list", "query"}

// flowWords is "flow" and the words after it with the sub-command
// abbreviation expanded, as flowrule reads them.
func flowWords(rest []string) []string {
	toks := append([]string{"flow"}, rest...)
	if len(toks) > 1 && toks[1] != "" {
		var hits []string
		for _, w := range flowSubs {
			if strings.HasPrefix(w, toks[1]) {
				hits = append(hits, w)
			}
		}
		if len(hits) == 1 {
			toks[1] = hits[0]
		}
	}
	return toks
}

// parseFlow parses a flow command line (words[0] is "flow") and resolves
// its port.
func (s *Shell) parseFlow(words []string) (flowrule.Command, uint16, error) {
	toks := flowWords(words[1:])
	// The port comes before the rule: a wrong one is reported first, as
	// the rest of the grammar does.
	if len(toks) > 2 && slices.Contains(flowSubs, toks[1]) {
		if _, err := s.check("port", toks[2]); err != nil {
			return flowrule.Command{}, 0, err
		}
	}
	c, err := flowrule.Parse(strings.Join(toks, " "))
	if err != nil {
		return c, 0, flowParseError(toks, err)
	}
	v, err := s.check("port", c.Port)
	if err != nil {
		return c, 0, err
	}
	id, _ := strconv.Atoi(v)
	return c, uint16(id), nil
}

// flowParseError shows a parse error under the line with a caret at the
// offending word, as rules are long.
func flowParseError(toks []string, err error) error {
	var pe *flowrule.ParseError
	if !errors.As(err, &pe) {
		return err
	}
	// testpmd's wording for a command line it cannot parse.
	err = fmt.Errorf("Bad arguments: %w", err)
	if pe.Pos < 0 {
		return err
	}
	line := strings.Join(toks, " ")
	col, width := len(line)+1, 1
	if pe.Pos < len(toks) {
		col, width = len(strings.Join(toks[:pe.Pos], " ")), len(toks[pe.Pos])
		if pe.Pos > 0 {
			col++
		}
	}
	return fmt.Errorf("%s\n  %s\n  %s%s", err, line, strings.Repeat(" ", col), strings.Repeat("^", width))
}

// completeFlow completes a flow command: sub-commands, ports, then the
// rule grammar.
func (s *Shell) completeFlow(rest []string) []string {
	toks := flowWords(rest)
	if len(toks) == 2 && slices.Contains(flowSubs, toks[1]) {
		return portWords(s.ports())
	}
	return flowrule.Complete(toks)
}

func (s *Shell) flowManager() (*offload.Manager, error) {
	var m *offload.Manager
	if s.flows != nil {
		m = s.flows()
	}
	if m == nil {
		return nil, errors.New("flow rules need a running daemon")
	}
	return m, nil
}

// flow runs one of testpmd's flow commands.
func (s *Shell) flow(words []string, jsonOut bool) (string, error) {
	c, port, err := s.parseFlow(words)
	if err != nil {
		return "", err
	}
	m, err := s.flowManager()
	if err != nil {
		return "", err
	}
	switch c.Kind {
	case flowrule.CmdValidate:
		where, why, err := m.Validate(port, c.Rule)
		if err != nil {
			return "", err
		}
		out := "Flow rule validated\n"
		if where == offload.InSoftware {
			out += "(runs in software: " + why + ")\n"
		}
		if jsonOut {
			return asJSON(map[string]any{"ok": true, "message": "Flow rule validated", "where": where.String(), "why": why})
		}
		return out, nil
	case flowrule.CmdCreate:
		e, err := m.Create(port, c.Rule, true)
		if err != nil {
			return "", err
		}
		msg := fmt.Sprintf("Flow rule #%d created", e.Rule.ID)
		if jsonOut {
			return asJSON(map[string]any{"ok": true, "message": msg, "id": e.Rule.ID, "where": e.Where.String(), "why": e.Why})
		}
		if e.Where == offload.InSoftware {
			msg += "\n(software: " + e.Why + ")"
		}
		return msg + "\n", nil
	case flowrule.CmdDestroy:
		return s.flowDestroy(m, port, c.Rules, jsonOut)
	case flowrule.CmdFlush:
		return flowFlush(m, port, jsonOut)
	case flowrule.CmdList:
		return flowList(m, port, c.Groups, jsonOut)
	case flowrule.CmdQuery:
		return flowQuery(m, port, c.Rules[0], jsonOut)
	}
	return "", fmt.Errorf("flow %s: not a console command", c.Kind)
}

func (s *Shell) flowDestroy(m *offload.Manager, port uint16, ids []uint32, jsonOut bool) (string, error) {
	if len(ids) == 0 {
		return "", errors.New("Bad arguments: no rule to destroy (usage: flow destroy <port> rule <id> [rule <id>]...)")
	}
	before, err := m.IDs(port)
	if err != nil {
		return "", err
	}
	existed := map[uint32]bool{}
	for _, id := range before {
		existed[id] = true
	}
	done, err := m.Destroy(port, ids)
	var b strings.Builder
	destroyed, missing := []uint32{}, []uint32{}
	for _, id := range ids {
		switch {
		case slices.Contains(done, id) && !slices.Contains(destroyed, id):
			destroyed = append(destroyed, id)
			fmt.Fprintf(&b, "Flow rule #%d destroyed\n", id)
		case !existed[id] || slices.Contains(destroyed, id):
			missing = append(missing, id)
			fmt.Fprintf(&b, "Flow rule #%d not found\n", id)
		}
		// A rule that existed and stayed failed: err names it.
	}
	if jsonOut {
		out, jerr := asJSON(map[string]any{"ok": err == nil, "destroyed": destroyed, "not_found": missing})
		if jerr != nil {
			return "", jerr
		}
		return out, err
	}
	return b.String(), err
}

func flowFlush(m *offload.Manager, port uint16, jsonOut bool) (string, error) {
	destroyed := func() uint64 {
		for _, st := range m.Ports() {
			if st.ID == port {
				return st.Destroyed
			}
		}
		return 0
	}
	before := destroyed()
	err := m.Flush(port)
	n := destroyed() - before
	msg := fmt.Sprintf("Flushed %d flow rules on port %d", n, port)
	if jsonOut {
		out, jerr := asJSON(map[string]any{"ok": err == nil, "message": msg, "flushed": n})
		if jerr != nil {
			return "", jerr
		}
		return out, err
	}
	return msg + "\n", err
}

// flowEntry is one rule of "flow list".
type flowEntry struct {
	ID       uint32  `json:"id"`
	Group    uint32  `json:"group"`
	Priority uint32  `json:"priority"`
	Attr     string  `json:"attr"`
	Rule     string  `json:"rule"`
	Where    string  `json:"where"`
	Hits     *uint64 `json:"hits"` // null when nothing counts the rule
	Why      string  `json:"why,omitempty"`
	CountErr string  `json:"count_error,omitempty"`
	// Flow is the rule in the grammar "flow create" reads.
	Flow string `json:"flow"`
}

func newFlowEntry(port uint16, e offload.Entry) flowEntry {
	f := flowEntry{ID: e.Rule.ID, Group: e.Rule.Group, Priority: e.Rule.Priority, Attr: flowAttr(&e.Rule),
		Rule: flowSummary(&e.Rule), Where: e.Where.String(), Why: e.Why,
		Flow: flowrule.Command{Kind: flowrule.CmdCreate, Port: strconv.Itoa(int(port)), Rule: e.Rule}.String()}
	if e.Counted {
		hits := e.Counter.Packets
		f.Hits = &hits
	}
	if e.CountErr != nil {
		f.CountErr = e.CountErr.Error()
	}
	return f
}

// flowAttr is testpmd's attribute column: ingress, egress, transfer.
func flowAttr(r *flowrule.Rule) string {
	a := []byte("---")
	if r.Ingress {
		a[0] = 'i'
	}
	if r.Egress {
		a[1] = 'e'
	}
	if r.Transfer {
		a[2] = 't'
	}
	return string(a)
}

// flowSummary is the rule as testpmd lists it: "ETH IPV4 UDP => COUNT".
func flowSummary(r *flowrule.Rule) string {
	var parts []string
	for _, it := range r.Items {
		parts = append(parts, strings.ToUpper(it.Type.String()))
	}
	parts = append(parts, "=>")
	for _, a := range r.Actions {
		parts = append(parts, strings.ToUpper(a.Type.String()))
	}
	return strings.Join(parts, " ")
}

func flowList(m *offload.Manager, port uint16, groups []uint32, jsonOut bool) (string, error) {
	entries, err := m.List(port, groups)
	if err != nil {
		return "", err
	}
	rows := []flowEntry{}
	for _, e := range entries {
		rows = append(rows, newFlowEntry(port, e))
	}
	if jsonOut {
		return asJSON(rows)
	}
	if len(rows) == 0 {
		return "", nil // as testpmd
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tGroup\tPrio\tAttr\tRule\tWhere\tHits")
	for _, r := range rows {
		hits := "-"
		switch {
		case r.CountErr != "":
			hits = "error"
		case r.Hits != nil:
			hits = strconv.FormatUint(*r.Hits, 10)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.Group, r.Priority, r.Attr, r.Rule, r.Where, hits)
	}
	tw.Flush()
	return b.String(), nil
}

func hasMeter(r *flowrule.Rule) bool {
	return slices.ContainsFunc(r.Actions, func(a flowrule.Action) bool { return a.Type == flowrule.ActMeter })
}

func flowQuery(m *offload.Manager, port uint16, id uint32, jsonOut bool) (string, error) {
	e, err := m.Query(port, id)
	if err != nil {
		return "", err
	}
	if e.CountErr != nil {
		return "", fmt.Errorf("rule %d: the NIC's count query failed: %w", id, e.CountErr)
	}
	if !e.Counted {
		return "", fmt.Errorf("rule %d has no count action", id)
	}
	meter := e.Where == offload.InSoftware && hasMeter(&e.Rule)
	if jsonOut {
		out := map[string]any{"id": id, "port_id": port, "where": e.Where.String(),
			"hits_set": true, "bytes_set": true, "hits": e.Counter.Packets, "bytes": e.Counter.Bytes}
		if meter {
			out["green"], out["yellow"], out["red"] = e.Counter.Green, e.Counter.Yellow, e.Counter.Red
		}
		return asJSON(out)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "COUNT:\n hits_set: 1\n bytes_set: 1\n hits: %d\n bytes: %d\n", e.Counter.Packets, e.Counter.Bytes)
	if meter {
		fmt.Fprintf(&b, " green: %d\n yellow: %d\n red: %d\n", e.Counter.Green, e.Counter.Yellow, e.Counter.Red)
	}
	return b.String(), nil
}

// offloadPort is one port of "show offload".
type offloadPort struct {
	PortID      uint16         `json:"port_id"`
	Name        string         `json:"name"`
	Backend     string         `json:"backend"`
	Requested   string         `json:"requested"`
	Note        string         `json:"note,omitempty"`
	Driver      string         `json:"driver"`
	Engine      string         `json:"engine"`
	EngineError string         `json:"engine_error,omitempty"`
	FlowInfo    *flowInfo      `json:"flow_info,omitempty"`
	Validate    []offloadShape `json:"validate,omitempty"`
	TrialTried  bool           `json:"trial_tried"`
	TrialError  string         `json:"trial_error,omitempty"`
	RootJump    bool           `json:"root_jump"`
	RulesHW     int            `json:"rules_hw"`
	RulesSW     int            `json:"rules_sw"`
	Inserted    uint64         `json:"inserted"`
	Failed      uint64         `json:"failed"`
	Destroyed   uint64         `json:"destroyed"`
	InsertNs    int64          `json:"insert_time_ns"`
	AvgInsertNs int64          `json:"avg_insert_ns"`
	// NotApplicable counts packets that hit software rules' queue or rss
	// actions, which only a NIC carries out.
	NotApplicable uint64 `json:"not_applicable"`
}

type flowInfo struct {
	MaxQueues       uint32 `json:"max_queues"`
	MaxQueueSize    uint32 `json:"max_queue_size"`
	MaxCounters     uint32 `json:"max_counters"`
	MaxAgingObjects uint32 `json:"max_aging_objects"`
	MaxMeters       uint32 `json:"max_meters"`
	MaxConnTracks   uint32 `json:"max_conn_tracks"`
}

type offloadShape struct {
	Name  string `json:"name"`
	Rule  string `json:"rule"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

func newOffloadPort(m *offload.Manager, st offload.PortStatus) offloadPort {
	c := st.Caps
	o := offloadPort{PortID: st.ID, Name: st.Name, Backend: st.Backend.String(), Requested: c.Requested, Note: c.Note,
		Driver: c.Driver, Engine: c.Engine, TrialTried: c.Tried, RootJump: c.RootJump,
		RulesHW: st.HW, RulesSW: st.SW, Inserted: st.Inserted, Failed: st.Failed, Destroyed: st.Destroyed,
		InsertNs: st.InsertTime.Nanoseconds(), NotApplicable: m.NotApplicable(st.ID)}
	if c.EngineErr != nil {
		o.EngineError = c.EngineErr.Error()
	}
	if c.Engine == "template" {
		fi := c.Info
		o.FlowInfo = &flowInfo{MaxQueues: fi.MaxQueues, MaxQueueSize: fi.MaxQueueSize, MaxCounters: fi.MaxCounters,
			MaxAgingObjects: fi.MaxAgingObjects, MaxMeters: fi.MaxMeters, MaxConnTracks: fi.MaxConnTracks}
	}
	for _, sh := range c.Shapes {
		v := offloadShape{Name: sh.Name, Rule: sh.Rule, OK: sh.Err == nil}
		if sh.Err != nil {
			v.Error = sh.Err.Error()
		}
		o.Validate = append(o.Validate, v)
	}
	if c.Trial != nil {
		o.TrialError = c.Trial.Error()
	}
	if st.Inserted > 0 {
		o.AvgInsertNs = st.InsertTime.Nanoseconds() / int64(st.Inserted)
	}
	return o
}

func (s *Shell) showOffload(w []string, jsonOut bool) (string, error) {
	m, err := s.flowManager()
	if err != nil {
		return "", err
	}
	var ids []int
	if len(w) > 2 {
		ids = portIDs(w[2])
	}
	out := []offloadPort{}
	for _, st := range m.Ports() {
		if ids == nil || ids[0] == int(st.ID) {
			out = append(out, newOffloadPort(m, st))
		}
	}
	if jsonOut {
		return asJSON(out)
	}
	var b strings.Builder
	for _, o := range out {
		fmt.Fprintf(&b, "Flow offload on port %d (%s): %s backend (requested %s)\n", o.PortID, o.Name, o.Backend, o.Requested)
		if o.Note != "" {
			fmt.Fprintf(&b, "  Why: %s\n", o.Note)
		}
		fmt.Fprintf(&b, "  Driver: %s\n", o.Driver)
		if o.EngineError != "" {
			fmt.Fprintf(&b, "  Flow engine: %s (%s)\n", o.Engine, o.EngineError)
		} else {
			fmt.Fprintf(&b, "  Flow engine: %s\n", o.Engine)
		}
		if fi := o.FlowInfo; fi != nil {
			fmt.Fprintf(&b, "  Template API: %d flow queues of %d, %d counters, %d meters, %d aging objects, %d conntracks\n",
				fi.MaxQueues, fi.MaxQueueSize, fi.MaxCounters, fi.MaxMeters, fi.MaxAgingObjects, fi.MaxConnTracks)
		}
		if len(o.Validate) > 0 {
			b.WriteString("  Validate matrix:\n")
			tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
			for _, v := range o.Validate {
				res := "ok"
				if !v.OK {
					res = v.Error
				}
				fmt.Fprintf(tw, "    %s\t%s\n", v.Name, res)
			}
			tw.Flush()
		}
		switch {
		case o.TrialError != "":
			fmt.Fprintf(&b, "  Trial create: failed: %s\n", o.TrialError)
		case o.TrialTried:
			b.WriteString("  Trial create: ok\n")
		}
		if o.RootJump {
			b.WriteString("  Layout: a root rule in group 0 jumps to group 1; rules sit one group up (mlx5 Direct Rules)\n")
		}
		fmt.Fprintf(&b, "  Rules: %d in hardware, %d in software\n", o.RulesHW, o.RulesSW)
		avg := "-"
		if o.Inserted > 0 {
			avg = time.Duration(o.AvgInsertNs).String()
		}
		fmt.Fprintf(&b, "  NIC insertions: %d inserted, %d failed; %d rules destroyed; average insertion time %s\n",
			o.Inserted, o.Failed, o.Destroyed, avg)
		fmt.Fprintf(&b, "  Not applicable in software: %d packets hit a queue or rss action only a NIC carries out\n", o.NotApplicable)
	}
	return b.String(), nil
}
