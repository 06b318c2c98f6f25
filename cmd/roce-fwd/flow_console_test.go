package main

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"roce-fwd/console"
)

// flowRow is one line of "flow list".
type flowRow struct {
	ID, Group, Prio, Attr, Rule, Where, Hits string
}

// must runs a console command line and fails the test unless it
// succeeds.
func (r *daemonRig) must(line string) string {
	r.t.Helper()
	res := r.console(strings.Fields(line)...)
	if res.code != 0 {
		r.t.Fatalf("%s: exit %d\n%s%s", line, res.code, res.stdout, res.stderr)
	}
	return res.stdout
}

// flowList runs "flow list PORT" and splits its table (the rule column
// has spaces of its own).
func (r *daemonRig) flowList(port string) []flowRow {
	r.t.Helper()
	out := r.must("flow list " + port)
	if out == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if f := strings.Fields(lines[0]); !reflect.DeepEqual(f, []string{"ID", "Group", "Prio", "Attr", "Rule", "Where", "Hits"}) {
		r.t.Fatalf("flow list header %q", f)
	}
	var rows []flowRow
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 7 {
			r.t.Fatalf("flow list line %q", l)
		}
		n := len(f)
		rows = append(rows, flowRow{f[0], f[1], f[2], f[3], strings.Join(f[4:n-2], " "), f[n-2], f[n-1]})
	}
	return rows
}

// flowHits is "flow query PORT ID count", checked against testpmd's format.
func (r *daemonRig) flowHits(port, id string) (hits, bytes uint64) {
	r.t.Helper()
	out := r.must("flow query " + port + " " + id + " count")
	lines := strings.Split(out, "\n")
	if len(lines) != 6 || lines[0] != "COUNT:" || lines[1] != " hits_set: 1" || lines[2] != " bytes_set: 1" || lines[5] != "" {
		r.t.Fatalf("flow query:\n%s", out)
	}
	h, err1 := strconv.ParseUint(strings.TrimPrefix(lines[3], " hits: "), 10, 64)
	b, err2 := strconv.ParseUint(strings.TrimPrefix(lines[4], " bytes: "), 10, 64)
	if err1 != nil || err2 != nil {
		r.t.Fatalf("flow query:\n%s", out)
	}
	return h, b
}

type roceJSON []struct {
	Frames    uint64 `json:"frames"`
	RoCE      uint64 `json:"roce"`
	RoCEBytes uint64 `json:"roce_bytes"`
	IPv4      uint64 `json:"ipv4"`
	Other     uint64 `json:"other"`
}

func (r *daemonRig) roceIn() roceJSON {
	r.t.Helper()
	var s roceJSON
	r.consoleJSON(&s, "show", "roce", "stats", "in")
	if len(s) != 1 {
		r.t.Fatalf("show roce stats in: %+v", s)
	}
	return s
}

// On vdevs no port has a flow engine: every rule runs in the pipeline's
// software table, counts exactly what the classifier counts, drops what
// it is told to, and the console says why it is not on the NIC.
func TestConsoleFlowRulesInSoftware(t *testing.T) {
	r := startDaemon(t, "", "")

	out := r.must("show offload")
	for _, want := range []string{
		"Flow offload on port 0 (in): software backend (requested auto)\n  Why: port 0 (net_pcap) has no flow engine\n  Driver: net_pcap\n  Flow engine: none",
		"Flow offload on port 1 (out): software backend (requested auto)\n  Why: port 1 (net_null) has no flow engine\n  Driver: net_null\n",
		"  Rules: 0 in hardware, 0 in software\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show offload: no %q in\n%s", want, out)
		}
	}
	var off []struct {
		PortID      int    `json:"port_id"`
		Backend     string `json:"backend"`
		Note        string `json:"note"`
		Engine      string `json:"engine"`
		EngineError string `json:"engine_error"`
		RulesSW     int    `json:"rules_sw"`
		Destroyed   uint64 `json:"destroyed"`
	}
	r.consoleJSON(&off, "show", "offload", "out")
	if len(off) != 1 || off[0].PortID != 1 || off[0].Backend != "software" || off[0].Engine != "none" ||
		off[0].Note != "port 1 (net_null) has no flow engine" || off[0].EngineError == "" {
		t.Errorf("show offload out --json: %+v", off)
	}

	const rule = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end"
	if out := r.must("flow validate out egress pattern eth / end actions count / end"); out != "Flow rule validated\n(runs in software: port 1 (net_null) has no flow engine; rule runs in software)\n" {
		t.Errorf("flow validate:\n%s", out)
	}
	if out := r.must("flow create 0 " + rule); out != "Flow rule #0 created\n(software: port 0 (net_pcap) has no flow engine; rule runs in software)\n" {
		t.Errorf("flow create:\n%s", out)
	}
	// Hits rise under traffic.
	time.Sleep(100 * time.Millisecond)
	a := r.flowList("0")
	time.Sleep(200 * time.Millisecond)
	b := r.flowList("in")
	if len(a) != 1 || a[0] != (flowRow{"0", "0", "0", "i--", "ETH IPV4 UDP => COUNT", "sw", a[0].Hits}) || len(b) != 1 {
		t.Fatalf("flow list: %+v", a)
	}
	if ha, hb := atoiT(t, a[0].Hits), atoiT(t, b[0].Hits); ha == 0 || hb <= ha {
		t.Errorf("hits did not rise: %d then %d", ha, hb)
	}

	// With forwarding stopped between the two reads, the rule counts
	// exactly the RoCEv2 frames (all IPv4 in the demo) the classifier saw.
	r.must("stop")
	h0, b0 := r.flowHits("0", "0")
	r.must("clear roce stats")
	r.must("start")
	time.Sleep(300 * time.Millisecond)
	r.must("stop")
	h1, b1 := r.flowHits("0", "0")
	roce := r.roceIn()
	if roce[0].RoCE == 0 || h1-h0 != roce[0].RoCE || roce[0].IPv4 != roce[0].RoCE || b1-b0 != roce[0].RoCEBytes {
		t.Errorf("rule counted %d packets %d bytes, classifier %+v", h1-h0, b1-b0, roce[0])
	}
	var q struct {
		Hits     uint64 `json:"hits"`
		Bytes    uint64 `json:"bytes"`
		HitsSet  bool   `json:"hits_set"`
		BytesSet bool   `json:"bytes_set"`
		Where    string `json:"where"`
	}
	r.consoleJSON(&q, "flow", "query", "0", "0", "count")
	if q.Hits != h1 || q.Bytes != b1 || !q.HitsSet || !q.BytesSet || q.Where != "sw" {
		t.Errorf("flow query --json: %+v, want %d hits %d bytes", q, h1, b1)
	}

	if out := r.must("flow destroy 0 rule 0 rule 4"); out != "Flow rule #0 destroyed\nFlow rule #4 not found\n" {
		t.Errorf("flow destroy:\n%s", out)
	}
	if rows := r.flowList("0"); rows != nil {
		t.Errorf("flow list after destroy: %+v", rows)
	}

	// A drop rule: the RoCEv2 frames end under flow_drop, only the ARP
	// frames reach the null port.
	if out := r.must("flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions drop / end"); !strings.HasPrefix(out, "Flow rule #0 created\n") {
		t.Errorf("flow create drop:\n%s", out)
	}
	r.must("clear fwd stats all")
	r.must("clear port stats all")
	r.must("clear roce stats")
	r.must("start")
	time.Sleep(200 * time.Millisecond)
	mid := r.fwd()
	time.Sleep(200 * time.Millisecond)
	late := r.fwd()
	if late.Drops["flow_drop"] <= mid.Drops["flow_drop"] {
		t.Errorf("flow_drop did not rise: %d then %d", mid.Drops["flow_drop"], late.Drops["flow_drop"])
	}
	if rx, tx := late.Ports[0].RxPackets-mid.Ports[0].RxPackets, late.Ports[1].TxPackets-mid.Ports[1].TxPackets; tx == 0 || tx*4 > rx {
		t.Errorf("with RoCE dropped, out sent %d of %d received (ARP is a tenth)", tx, rx)
	}
	r.must("stop")
	end := r.fwd()
	roce = r.roceIn()
	if end.Drops["flow_drop"] != roce[0].RoCE || end.Ports[1].TxPackets != roce[0].Other || end.Ports[0].RxPackets != roce[0].Frames {
		t.Errorf("flow_drop %d, out tx %d, in rx %d; classifier %+v", end.Drops["flow_drop"], end.Ports[1].TxPackets, end.Ports[0].RxPackets, roce[0])
	}
	if h, _ := r.flowHits("0", "0"); h != end.Drops["flow_drop"] {
		t.Errorf("drop rule hits %d, flow_drop %d", h, end.Drops["flow_drop"])
	}
	var list []struct {
		ID    uint32  `json:"id"`
		Attr  string  `json:"attr"`
		Rule  string  `json:"rule"`
		Where string  `json:"where"`
		Hits  *uint64 `json:"hits"`
		Why   string  `json:"why"`
		Flow  string  `json:"flow"`
	}
	r.consoleJSON(&list, "flow", "list", "0")
	if len(list) != 1 || list[0].Rule != "ETH IPV4 UDP => DROP" || list[0].Where != "sw" || list[0].Hits == nil || *list[0].Hits != end.Drops["flow_drop"] ||
		list[0].Why != "port 0 (net_pcap) has no flow engine; rule runs in software" || list[0].Flow != "flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions drop / end" {
		t.Errorf("flow list --json: %+v", list)
	}

	if out := r.must("flow flush 0"); out != "Flushed 1 flow rules on port 0\n" {
		t.Errorf("flow flush:\n%s", out)
	}
	if rows := r.flowList("0"); rows != nil {
		t.Errorf("flow list after flush: %+v", rows)
	}
	r.must("clear port stats all")
	r.must("start")
	time.Sleep(200 * time.Millisecond)
	r.must("stop")
	after := r.fwd()
	if after.Drops["flow_drop"] != end.Drops["flow_drop"] || after.Ports[1].TxPackets < after.Ports[0].RxPackets/2 {
		t.Errorf("after flush: flow_drop %d → %d, out sent %d of %d", end.Drops["flow_drop"], after.Drops["flow_drop"], after.Ports[1].TxPackets, after.Ports[0].RxPackets)
	}
	r.consoleJSON(&off, "show", "offload", "in")
	if len(off) != 1 || off[0].RulesSW != 0 || off[0].Destroyed != 2 {
		t.Errorf("show offload in after flush: %+v", off)
	}

	for _, c := range []struct{ line, want string }{
		{"flow create 7 " + rule, "Invalid port 7 (valid ports: 0 1)"},
		{"flow query 0 5 count", "port 0 has no flow rule 5"},
		{"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions cnt / end",
			"Bad arguments: unknown action \"cnt\"", // and the caret under it
		},
	} {
		res := r.console(strings.Fields(c.line)...)
		if res.code != 1 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.line, res.code, res.stderr, c.want)
		}
	}
	res := r.console(strings.Fields("flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions cnt / end")...)
	if lines := strings.Split(res.stderr, "\n"); len(lines) < 3 || strings.Index(lines[len(lines)-2], "^^^") != strings.Index(lines[len(lines)-3], " cnt ")+1 {
		t.Errorf("no caret under the bad word:\n%s", res.stderr)
	}

	// Tab completion through the socket: the flow grammar's words.
	cl, err := console.Dial(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for line, want := range map[string][]string{
		"flow cr":                           {"create"},
		"flow create ":                      {"0", "1", "in", "out"},
		"flow create 0 pattern eth / ipv4 ": {"/", "dscp", "dst", "ecn", "proto", "src", "tos", "ttl"},
	} {
		if got := cl.Complete(line); !reflect.DeepEqual(got, want) {
			t.Errorf("complete %q: %q, want %q", line, got, want)
		}
	}
	var js json.RawMessage
	r.consoleJSON(&js, "flow", "list", "1")
	if string(js) != "[]" {
		t.Errorf("flow list 1 --json with no rules: %s", js)
	}
}

func atoiT(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not a count", s)
	}
	return n
}
