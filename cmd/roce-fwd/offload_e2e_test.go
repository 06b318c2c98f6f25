package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"roce-fwd/flowrule"
	"roce-fwd/internal/testenv"
)

// wireFrame is one frame of a capture as scapy reads it
// (testdata/offload_frames.py describe), independently of roce-fwd's own
// decoder.
type wireFrame struct {
	Hex        string `json:"hex"`
	Len        int    `json:"len"`
	IPVer      int    `json:"ipver"`
	Src        string `json:"src"`
	Proto      int    `json:"proto"`
	Sport      int    `json:"sport"`
	Dport      int    `json:"dport"`
	DSCP       int    `json:"dscp"`
	ECN        int    `json:"ecn"`
	IPChksumOK *bool  `json:"ip_chksum_ok"` // IPv4 only
	RoCE       bool   `json:"roce"`
	Opcode     int    `json:"opcode"`
	ICRC       string `json:"icrc"`          // as stored in the frame
	ICRCCalc   string `json:"icrc_computed"` // as recomputed
}

func (f *wireFrame) bytes(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(f.Hex)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// udp4791 is what "eth / ipvN / udp dst is 4791" matches.
func (f *wireFrame) udp4791(ipver int) bool {
	return f.IPVer == ipver && f.Proto == 17 && f.Dport == 4791
}

// scapyFrames runs testdata/offload_frames.py with args and decodes one
// capture description per output line. It skips the test when scapy is
// not installed (make test installs it, see scripts/deps.sh).
func scapyFrames(t *testing.T, args ...string) [][]wireFrame {
	t.Helper()
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip(py + " not installed")
	}
	cmd := exec.Command(py, append([]string{filepath.Join("testdata", "offload_frames.py")}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if strings.Contains(stderr.String(), "No module named 'scapy") {
			t.Skip("python3-scapy not installed")
		}
		t.Fatalf("offload_frames.py %v: %v\n%s", args, err, stderr.String())
	}
	var out [][]wireFrame
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var fs []wireFrame
		if err := json.Unmarshal([]byte(l), &fs); err != nil {
			t.Fatalf("offload_frames.py %v: %v\n%.300s", args, err, l)
		}
		out = append(out, fs)
	}
	return out
}

// checkInputFrames makes sure the check applied to the output would pass
// on the input: every RoCEv2 frame's ICRC and IPv4 header checksum hold.
func checkInputFrames(t *testing.T, in []wireFrame) {
	t.Helper()
	for i, f := range in {
		if f.IPChksumOK != nil && !*f.IPChksumOK {
			t.Fatalf("input frame %d: bad IPv4 header checksum", i)
		}
		if f.RoCE && (f.ICRC == "" || f.ICRC != f.ICRCCalc) {
			t.Fatalf("input frame %d: ICRC %s, computed %s", i, f.ICRC, f.ICRCCalc)
		}
	}
}

// startOffloadDaemon runs `roce-fwd run --config` in the background with
// the config config(EAL args, console socket) and the given extra flags,
// and waits for its console.
func startOffloadDaemon(t *testing.T, config func(ealArgs, sock string) string, flags ...string) *daemonRig {
	t.Helper()
	dir := t.TempDir()
	r := &daemonRig{t: t, sock: filepath.Join(dir, "ctl", "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-cmd-%d-%s", os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-")), stderr: &syncBuffer{}}
	r.writeConfig(config(ealArgs(t), r.sock))
	r.cmd = exec.Command(binary, append([]string{"run", "--config", r.cfgPath}, flags...)...)
	r.launch()
	return r
}

// A set_ipv4_dscp rule from the config, run in software on net_pcap in
// roce mode: on the wire, every RoCEv2 frame over IPv4 comes out with
// DSCP 46, its ECN kept, a valid IPv4 header checksum and a valid ICRC
// (the ICRC masks the TOS byte), with no other byte changed; every other
// frame (UDP to other ports, UDP from port 4791, TCP to 4791, RoCEv2 over
// IPv6, ARP) comes out unchanged, in order, and nothing is dropped. The
// output capture is read with scapy, not with roce-fwd's decoder.
func TestOffloadDSCPRewriteOnTheWire(t *testing.T) {
	dir := t.TempDir()
	in, out, statsPath := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap"), filepath.Join(dir, "stats.json")
	const n = 400
	src := scapyFrames(t, "rewrite", in, strconv.Itoa(n))[0]
	if len(src) != n {
		t.Fatalf("generated %d frames, want %d", len(src), n)
	}
	checkInputFrames(t, src)
	var roceFrames, rewrites, otherECN, v6RoCE, nonRoCE int
	for _, f := range src {
		switch {
		case f.udp4791(4):
			rewrites++
			if f.ECN != 2 {
				otherECN++
			}
		case f.RoCE:
			v6RoCE++
		default:
			nonRoCE++
		}
		if f.RoCE {
			roceFrames++
		}
	}
	if rewrites == 0 || otherECN == 0 || v6RoCE == 0 || nonRoCE == 0 {
		t.Fatalf("the capture lacks a kind of frame: %d to rewrite (%d not ECT(0)), %d RoCEv2 over IPv6, %d not RoCEv2",
			rewrites, otherECN, v6RoCE, nonRoCE)
	}

	cfg := writeFile(t, "rewrite.toml", fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s"
[[port]]
name = "out"
vdev = "net_pcap1,tx_pcap=%s"
[[forward]]
from = "in"
to = "out"
[pipeline]
mode = "roce"
[roce]
verify_icrc = true
[console]
socket = %q
history = ""

[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions set_ipv4_dscp dscp_value 46 / count / end"
`, ealArgs(t), in, out, filepath.Join(dir, "ctl", "console.sock")))
	r := run(t, "run", "--config", cfg, "--duration", "1s", "--stats-json", statsPath)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, `msg="flow rules installed" port=in hw=0 sw=1`) {
		t.Errorf("the rule was not installed in software:\n%s", r.stderr)
	}

	s := readStats(t, statsPath)
	if len(s.Ports) != 2 || s.Ports[0].RxPackets != n || s.Ports[1].TxPackets != n || len(s.Lcores) != 1 || s.Lcores[0].Packets != n {
		t.Errorf("ports %+v, lcores %+v: want %d frames in and out", s.Ports, s.Lcores, n)
	}
	for reason, v := range s.Drops {
		if v != 0 {
			t.Errorf("%d frames dropped (%s)", v, reason)
		}
	}
	// The classifier verified every ICRC as received, before the rule ran.
	if s.RoCE == nil || len(s.RoCE.Ports) == 0 || s.RoCE.Ports[0].RoCE != uint64(roceFrames) || s.RoCE.Ports[0].ICRCOK != uint64(roceFrames) {
		t.Errorf("roce stats %+v: want %d RoCEv2 frames, all with good ICRCs", s.RoCE, roceFrames)
	}

	got := scapyFrames(t, "describe", out)[0]
	if len(got) != n {
		t.Fatalf("%d frames out, want %d", len(got), n)
	}
	for i := range src {
		if t.Failed() && i%50 == 0 {
			t.Fatalf("stopping at frame %d", i)
		}
		a, b := &src[i], &got[i]
		ab, bb := a.bytes(t), b.bytes(t)
		if !a.udp4791(4) {
			if !bytes.Equal(ab, bb) {
				t.Errorf("frame %d (ipv%d proto %d dport %d) changed:\n in  %s\n out %s", i, a.IPVer, a.Proto, a.Dport, a.Hex, b.Hex)
			}
			continue
		}
		if chk := b.IPChksumOK != nil && *b.IPChksumOK; b.DSCP != 46 || b.ECN != a.ECN || !chk || !b.RoCE || b.ICRC != b.ICRCCalc {
			t.Errorf("frame %d out: DSCP %d ECN %d (in: DSCP %d ECN %d), IPv4 checksum valid %v, RoCEv2 %v, ICRC %s computed %s",
				i, b.DSCP, b.ECN, a.DSCP, a.ECN, chk, b.RoCE, b.ICRC, b.ICRCCalc)
			continue
		}
		// Only the TOS byte (offset 15) and the header checksum (24, 25)
		// may differ.
		if len(ab) != len(bb) {
			t.Errorf("frame %d: %d bytes in, %d out", i, len(ab), len(bb))
			continue
		}
		for k := range ab {
			if ab[k] != bb[k] && k != 15 && k != 24 && k != 25 {
				t.Errorf("frame %d: byte %d changed from %#02x to %#02x", i, k, ab[k], bb[k])
				break
			}
		}
	}
}

// The offload layout of a port with mark-roce, dscp-count [26, 48] and a
// drop preset, as offload/rules.go documents it, whatever the order of
// the presets in the file.
var presetLayout = []struct {
	group, prio uint32
	rule        string
	flow        string // a part of the rule's "flow create" text
}{
	{0, 0, "ETH IPV4 => COUNT JUMP", "ipv4 tos spec 0x68 tos mask 0xfc / end actions count / jump group 1 / end"},
	{0, 0, "ETH IPV6 => COUNT JUMP", "ipv6 tc spec 0x68 tc mask 0xfc / end actions count / jump group 1 / end"},
	{0, 0, "ETH IPV4 => COUNT JUMP", "ipv4 tos spec 0xc0 tos mask 0xfc / end actions count / jump group 1 / end"},
	{0, 0, "ETH IPV6 => COUNT JUMP", "ipv6 tc spec 0xc0 tc mask 0xfc / end actions count / jump group 1 / end"},
	{0, 1, "ETH => JUMP", "pattern eth / end actions jump group 1 / end"},
	{1, 0, "ETH IPV4 UDP => COUNT DROP", "ipv4 src is 10.0.0.2 proto is 17 / udp dst is 4791 / end actions count / drop / end"},
	{1, 2, "ETH IPV4 UDP => MARK COUNT", "ipv4 / udp dst is 4791 / end actions mark id 82 / count / end"},
	{1, 2, "ETH IPV6 UDP => MARK COUNT", "ipv6 / udp dst is 4791 / end actions mark id 82 / count / end"},
}

const presetRules = `
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52

[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [26, 48]

[[offload.rule]]
port = "in"
preset = "drop"
src = "10.0.0.2"
proto = "udp"
dst_port = 4791
`

// presetRuleOf is the rule of presetLayout a frame ends its path on in
// group 0 (0 to 4) and in group 1 (5 to 7, or -1 when none matches): a
// packet runs the actions of the group 0 rule, then of the group 1 rule.
func presetRuleOf(f *wireFrame) (g0, g1 int) {
	g0 = 4
	switch {
	case f.IPVer == 4 && f.DSCP == 26:
		g0 = 0
	case f.IPVer == 6 && f.DSCP == 26:
		g0 = 1
	case f.IPVer == 4 && f.DSCP == 48:
		g0 = 2
	case f.IPVer == 6 && f.DSCP == 48:
		g0 = 3
	}
	g1 = -1
	switch {
	case f.udp4791(4) && f.Src == "10.0.0.2":
		g1 = 5
	case f.udp4791(4):
		g1 = 6
	case f.udp4791(6):
		g1 = 7
	}
	return g0, g1
}

// presetExpect is what each rule of presetLayout counts (packets and
// bytes) over the first n frames of the capture replayed in a loop.
func presetExpect(frames []wireFrame, n uint64) (hits, bytes [8]uint64) {
	count := func(f *wireFrame, times uint64) {
		g0, g1 := presetRuleOf(f)
		hits[g0] += times
		bytes[g0] += times * uint64(f.Len)
		if g1 >= 0 {
			hits[g1] += times
			bytes[g1] += times * uint64(f.Len)
		}
	}
	loops, rest := n/uint64(len(frames)), n%uint64(len(frames))
	for i := range frames {
		times := loops
		if uint64(i) < rest {
			times++
		}
		count(&frames[i], times)
	}
	return hits, bytes
}

type offloadShow []struct {
	PortID  int    `json:"port_id"`
	Name    string `json:"name"`
	Backend string `json:"backend"`
	Note    string `json:"note"`
	Engine  string `json:"engine"`
	RulesHW int    `json:"rules_hw"`
	RulesSW int    `json:"rules_sw"`
}

type flowListJSON []struct {
	ID       uint32  `json:"id"`
	Group    uint32  `json:"group"`
	Priority uint32  `json:"priority"`
	Rule     string  `json:"rule"`
	Where    string  `json:"where"`
	Hits     *uint64 `json:"hits"`
	Why      string  `json:"why"`
	Flow     string  `json:"flow"`
}

type roceTCJSON []struct {
	Frames uint64    `json:"frames"`
	RoCE   uint64    `json:"roce"`
	IPv4   uint64    `json:"ipv4"`
	IPv6   uint64    `json:"ipv6"`
	TC     [8]uint64 `json:"tc"`
}

// checkPresetCounters stops forwarding and compares, through the
// console, every rule's counters with what the frames received give, and
// with the daemon's own counters. It returns the packets received.
func checkPresetCounters(t *testing.T, r *daemonRig, frames []wireFrame) uint64 {
	t.Helper()
	r.must("stop")

	out := r.must("show offload in")
	for _, want := range []string{
		"Flow offload on port 0 (in): software backend (requested auto)\n  Why: port 0 (net_pcap) has no flow engine\n",
		"  Rules: 0 in hardware, 8 in software\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show offload in: no %q in\n%s", want, out)
		}
	}
	var off offloadShow
	r.consoleJSON(&off, "show", "offload", "in")
	if len(off) != 1 || off[0].PortID != 0 || off[0].Backend != "software" || off[0].Engine != "none" ||
		off[0].Note != "port 0 (net_pcap) has no flow engine" || off[0].RulesHW != 0 || off[0].RulesSW != len(presetLayout) {
		t.Errorf("show offload in --json: %+v", off)
	}

	fwd := r.fwd()
	rx := fwd.Ports[0].RxPackets
	hits, bytes := presetExpect(frames, rx)

	var list, byID, group1 flowListJSON
	r.consoleJSON(&list, "flow", "list", "in")
	if len(list) != len(presetLayout) {
		t.Fatalf("flow list in: %d rules, want %d: %+v", len(list), len(presetLayout), list)
	}
	r.consoleJSON(&byID, "flow", "list", "0")
	if !reflect.DeepEqual(byID, list) {
		t.Errorf("flow list 0 differs from flow list in:\n%+v\n%+v", byID, list)
	}
	r.consoleJSON(&group1, "flow", "list", "in", "group", "1")
	if len(group1) != 3 || !reflect.DeepEqual(group1, list[5:]) {
		t.Errorf("flow list in group 1: %+v", group1)
	}
	var got [8]uint64
	for i, e := range list {
		want := presetLayout[i]
		if e.ID != uint32(i) || e.Group != want.group || e.Priority != want.prio || e.Rule != want.rule ||
			!strings.Contains(e.Flow, want.flow) || e.Where != "sw" ||
			e.Why != "port 0 (net_pcap) has no flow engine; rule runs in software" {
			t.Errorf("flow list in, rule %d: group %d priority %d %q %q where %q (%s), want group %d priority %d %q with %q in software",
				i, e.Group, e.Priority, e.Rule, e.Flow, e.Where, e.Why, want.group, want.prio, want.rule, want.flow)
		}
		// A software rule counts its hits, with or without a count action.
		if e.Hits == nil {
			t.Errorf("flow list in, rule %d (%s): no hits, want %d", i, e.Rule, hits[i])
		} else if got[i] = *e.Hits; got[i] != hits[i] {
			t.Errorf("flow list in, rule %d (%s): %d hits, want %d", i, e.Rule, got[i], hits[i])
		}
		if strings.Contains(want.rule, "COUNT") {
			if h, b := r.flowHits("in", strconv.Itoa(i)); h != hits[i] || b != bytes[i] {
				t.Errorf("flow query in %d count: %d hits %d bytes, want %d hits %d bytes", i, h, b, hits[i], bytes[i])
			}
		}
	}

	// The drop rule's hits are the flow_drop drops; nothing else drops.
	if fwd.Drops["flow_drop"] != got[5] || got[5] == 0 {
		t.Errorf("flow_drop %d, drop rule hits %d", fwd.Drops["flow_drop"], got[5])
	}
	for reason, v := range fwd.Drops {
		if reason != "flow_drop" && v != 0 {
			t.Errorf("%d frames dropped (%s)", v, reason)
		}
	}
	if tx := fwd.Ports[1].TxPackets; tx+fwd.Drops["flow_drop"] != rx {
		t.Errorf("in received %d, out sent %d, flow_drop %d", rx, tx, fwd.Drops["flow_drop"])
	}

	// The classifier's view of the same packets: DSCP 26 is TC3 and DSCP
	// 48 TC6 in the default map (the capture has no other DSCP in 24..31
	// or 48..55), every UDP 4791 frame is RoCEv2.
	var roce roceTCJSON
	r.consoleJSON(&roce, "show", "roce", "stats", "in")
	if len(roce) != 1 {
		t.Fatalf("show roce stats in: %+v", roce)
	}
	rs := roce[0]
	if rs.Frames != rx || rs.TC[3] != got[0]+got[1] || rs.TC[6] != got[2]+got[3] {
		t.Errorf("roce stats: %d frames, TC3 %d, TC6 %d; rx %d, DSCP 26 rules %d+%d, DSCP 48 rules %d+%d",
			rs.Frames, rs.TC[3], rs.TC[6], rx, got[0], got[1], got[2], got[3])
	}
	drops := fwd.Drops["flow_drop"]
	if rs.RoCE < drops || got[6]+got[7] != rs.RoCE-drops || got[6] != rs.IPv4-drops || got[7] != rs.IPv6 {
		t.Errorf("mark-roce hits %d (IPv4) + %d (IPv6); RoCEv2 frames %d (IPv4 %d, IPv6 %d), %d dropped",
			got[6], got[7], rs.RoCE, rs.IPv4, rs.IPv6, drops)
	}
	return rx
}

// A daemon with the mark-roce, dscp-count and drop presets on port "in"
// (net_pcap, no flow engine): every rule runs in software, in the
// documented groups and priorities, and each rule's hits (flow list, flow
// query) are what the frames received give: the DSCP counters match the
// classifier's traffic classes, the drop rule matches flow_drop, and
// mark-roce counts the RoCEv2 frames the drop rule did not take. Once
// through the capture, the output capture is the input less exactly the
// frames of the dropped five-tuple; looped, the counts hold for however
// many frames the port received.
func TestOffloadPresetsCountersMatchStats(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	frames := scapyFrames(t, "presets", in)[0]
	checkInputFrames(t, frames)
	if hits, _ := presetExpect(frames, uint64(len(frames))); hits[5] == 0 || hits[6] == 0 || hits[7] == 0 || hits[4] == 0 {
		t.Fatalf("the capture does not exercise every rule: %v", hits)
	}
	config := func(vdevs string) func(eal, sock string) string {
		return func(eal, sock string) string {
			return fmt.Sprintf(`[eal]
args = %s
%s
[[forward]]
from = "in"
to = "out"
[pipeline]
mode = "roce"
[console]
socket = %q
history = ""
%s`, eal, vdevs, sock, presetRules)
		}
	}

	t.Run("once", func(t *testing.T) {
		out, statsPath := filepath.Join(t.TempDir(), "out.pcap"), filepath.Join(t.TempDir(), "stats.json")
		r := startOffloadDaemon(t, config(fmt.Sprintf(`[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s"
[[port]]
name = "out"
vdev = "net_pcap1,tx_pcap=%s"`, in, out)), "--stats-json", statsPath)
		deadline := time.Now().Add(15 * time.Second)
		for r.fwd().Ports[0].RxPackets < uint64(len(frames)) {
			if time.Now().After(deadline) {
				t.Fatalf("port in received %d of %d frames", r.fwd().Ports[0].RxPackets, len(frames))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if rx := checkPresetCounters(t, r, frames); rx != uint64(len(frames)) {
			t.Errorf("port in received %d frames, the capture has %d", rx, len(frames))
		}
		r.stop()
		hits, _ := presetExpect(frames, uint64(len(frames)))
		if s := readStats(t, statsPath); s.Drops["flow_drop"] != hits[5] {
			t.Errorf("--stats-json flow_drop %d, want %d", s.Drops["flow_drop"], hits[5])
		}
		var want [][]byte
		for i := range frames {
			if _, g1 := presetRuleOf(&frames[i]); g1 != 5 {
				want = append(want, frames[i].bytes(t))
			}
		}
		got := testenv.ReadPcap(t, out)
		if len(got) != len(want) {
			t.Fatalf("%d frames out, want %d", len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d out:\n %x\nwant\n %x", i, got[i], want[i])
			}
		}
	})

	t.Run("looped", func(t *testing.T) {
		r := startOffloadDaemon(t, config(fmt.Sprintf(`[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s,infinite_rx=1"
[[port]]
name = "out"
vdev = "net_null0"`, in)))
		time.Sleep(300 * time.Millisecond)
		deadline := time.Now().Add(15 * time.Second)
		for r.fwd().Ports[0].RxPackets < uint64(20*len(frames)) {
			if time.Now().After(deadline) {
				t.Fatalf("port in received only %d frames", r.fwd().Ports[0].RxPackets)
			}
			time.Sleep(50 * time.Millisecond)
		}
		rx := checkPresetCounters(t, r, frames)
		t.Logf("port in received %d frames (%.1f times the capture)", rx, float64(rx)/float64(len(frames)))
	})
}

// A flow rule the grammar refuses stops validate, run and flows before
// EAL starts, with the rule's file and line and flowrule's own message.
func TestOffloadBrokenFlowRuleInConfig(t *testing.T) {
	for _, c := range []struct {
		name, rules string
		index       int
		flow        string
	}{
		{"udp port out of range", `
[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / udp dst is 99999 / end actions count / end"
`, 0, "ingress pattern eth / ipv4 / udp dst is 99999 / end actions count / end"},
		{"unknown action after a preset", `
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 7

[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions cnt / end"
`, 1, "ingress pattern eth / ipv4 / udp dst is 4791 / end actions cnt / end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			content := fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_null0"
[[port]]
name = "out"
vdev = "net_null1"
[[forward]]
from = "in"
to = "out"
%s`, ealArgs(t), c.rules)
			cfg := writeFile(t, "broken.toml", content)
			line := 0
			for i, l := range strings.Split(content, "\n") {
				if strings.Contains(l, c.flow) {
					line = i + 1
				}
			}
			_, err := flowrule.Parse("flow create in " + c.flow)
			var pe *flowrule.ParseError
			if !errors.As(err, &pe) || pe.Msg == "" {
				t.Fatalf("flowrule.Parse accepts %q: %v", c.flow, err)
			}
			if c.index == 0 && !strings.Contains(pe.Msg, "99999") {
				t.Errorf("flowrule's message does not name the value: %q", pe.Msg)
			}
			want := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(fmt.Sprintf("%s:%d: offload.rule[%d].flow: %s", cfg, line, c.index, pe.Msg)) + `$`)
			for _, args := range [][]string{
				{"validate", "--config", cfg},
				{"run", "--config", cfg, "--duration", "1s"},
				{"flows", "--config", cfg},
			} {
				r := run(t, args...)
				if r.code != exitUsage || !want.MatchString(r.stderr) {
					t.Errorf("%s: exit %d, want %d and %q in stderr:\n%s", args[0], r.code, exitUsage, want, r.stderr)
				}
				if strings.Contains(r.stderr, "starting EAL") {
					t.Errorf("%s started EAL with a broken config:\n%s", args[0], r.stderr)
				}
				if strings.Count(r.stderr, "offload.rule[") != 1 {
					t.Errorf("%s: want exactly one offload error:\n%s", args[0], r.stderr)
				}
			}
		})
	}
}
