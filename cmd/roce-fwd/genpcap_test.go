package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"roce-fwd/pcapio"
	"roce-fwd/roce"
)

// demoSHA256 is the demo capture gen-pcap has always written; scripts and
// the default config depend on it staying the same.
const demoSHA256 = "7cb13c9fe6c50244ce5c205d10dbe3df6e4996be3435f6d62a480ed15faeea36"

// decoded is a frame of a generated capture as the classifier sees it.
type decoded struct {
	r        roce.Result
	src, dst netip.Addr
	sport    uint16
	dport    uint16
	len      int
}

func (d decoded) tuple() string {
	return fmt.Sprintf("%s %s %d %d 17", d.src, d.dst, d.sport, d.dport)
}

// readCapture decodes every frame of path and fails unless each is a
// RoCEv2 frame without error and with a good ICRC.
func readCapture(t *testing.T, path string) []decoded {
	t.Helper()
	frames, err := pcapio.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]decoded, len(frames))
	for i, f := range frames {
		d := &out[i]
		roce.Classify(f, nil, true, &d.r)
		if !d.r.RoCE || d.r.Err != roce.ReasonNone || d.r.ICRC != roce.ICRCOK {
			t.Fatalf("%s frame %d: RoCE %v err %v ICRC %v", path, i, d.r.RoCE, d.r.Err, d.r.ICRC)
		}
		ip := f[d.r.L3:]
		if d.r.IPVersion == 6 {
			d.src, d.dst = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		} else {
			if !roce.IPv4(ip).ChecksumValid() {
				t.Fatalf("%s frame %d: bad IPv4 checksum", path, i)
			}
			d.src, d.dst = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		}
		d.sport, d.dport = roce.UDP(f[d.r.L4:]).SrcPort(), roce.UDP(f[d.r.L4:]).DstPort()
		d.len = len(f)
	}
	return out
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestGenPcapDemoUnchanged(t *testing.T) {
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	r := run(t, "gen-pcap", pcap)
	if r.code != 0 || r.stdout != pcap+": 10 frames\n" {
		t.Fatalf("exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if got := fileSHA(t, pcap); got != demoSHA256 {
		t.Errorf("demo capture changed: sha256 %s", got)
	}
	// --mix demo is the same capture, and --flows lists its RoCE flows.
	pcap2, flows := filepath.Join(dir, "demo2.pcap"), filepath.Join(dir, "flows")
	if r := run(t, "gen-pcap", "--mix", "demo", "--flows", flows, pcap2); r.code != 0 {
		t.Fatalf("--mix demo: exit %d %s", r.code, r.stderr)
	}
	if fileSHA(t, pcap2) != demoSHA256 {
		t.Error("--mix demo differs from the default")
	}
	b, _ := os.ReadFile(flows)
	want := "192.168.1.10 192.168.1.11 49152 4791 17\n192.168.1.11 192.168.1.10 0 4791 17\n192.168.1.11 192.168.1.10 49153 4791 17\n"
	if string(b) != want {
		t.Errorf("demo flows:\n%s", b)
	}
}

var summaryRE = regexp.MustCompile(`^(.*): (\d+) frames, (\d+) QPs, (\d+) flows, (\d+) bytes avg frame\n$`)

// genWorkload runs gen-pcap with args and an output file and --flows, and
// checks the summary line against the capture.
func genWorkload(t *testing.T, args ...string) (pcap string, frames []decoded, flows []string) {
	t.Helper()
	dir := t.TempDir()
	pcap, flowsPath := filepath.Join(dir, "w.pcap"), filepath.Join(dir, "flows.txt")
	r := run(t, append(append([]string{"gen-pcap"}, args...), "--flows", flowsPath, pcap)...)
	if r.code != 0 {
		t.Fatalf("gen-pcap %v: exit %d\n%s", args, r.code, r.stderr)
	}
	frames = readCapture(t, pcap)
	b, err := os.ReadFile(flowsPath)
	if err != nil {
		t.Fatal(err)
	}
	flows = strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	m := summaryRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("summary %q", r.stdout)
	}
	var total int
	for _, f := range frames {
		total += f.len
	}
	avg := (total + len(frames)/2) / len(frames)
	if m[1] != pcap || m[2] != strconv.Itoa(len(frames)) || m[4] != strconv.Itoa(len(flows)) || m[5] != strconv.Itoa(avg) {
		t.Errorf("summary %q: capture has %d frames, %d flows, %d bytes avg", r.stdout, len(frames), len(flows), avg)
	}
	return pcap, frames, flows
}

type flowKey struct {
	src, dst netip.Addr
	qp       uint32
}

func TestGenPcapWorkload(t *testing.T) {
	pcap, frames, flows := genWorkload(t, "--qps", "64", "--seed", "7")
	if len(frames) != 64*8 {
		t.Errorf("%d frames, want 512 (8 per QP)", len(frames))
	}
	// 64 QPs: 64 requester->responder (src, dst, QP) flows; ACKs and CNPs
	// go back to the requesters' QPs.
	requests := map[flowKey]bool{}
	tuples := map[string]bool{}
	ops := map[roce.Opcode]int{}
	for i, f := range frames {
		ops[f.r.Opcode]++
		tuples[f.tuple()] = true
		if f.r.Opcode != roce.OpAck && !f.r.CNP {
			requests[flowKey{f.src, f.dst, f.r.DestQP}] = true
		}
		if f.len < 60 || f.len > 128 {
			t.Errorf("frame %d: %d bytes in the control mix", i, f.len)
		}
		if i > 0 && f.src == frames[i-1].src && f.dst == frames[i-1].dst && f.r.DestQP == frames[i-1].r.DestQP {
			t.Errorf("frames %d and %d: same QP in a row", i-1, i)
		}
	}
	if len(requests) != 64 {
		t.Errorf("%d request flows, want 64", len(requests))
	}
	if len(ops) != 4 || ops[roce.OpAck] == 0 || ops[roce.OpSendOnly] == 0 || ops[roce.OpReadRequest] == 0 || ops[roce.OpCNP] == 0 {
		t.Errorf("opcodes %v, want ACK, SEND Only, READ Request and CNP", ops)
	}
	// The flow list is exactly the capture's 5-tuples, sorted.
	var want []string
	for k := range tuples {
		want = append(want, k)
	}
	if slices.Sort(want); !sameSet(want, flows) {
		t.Errorf("flows file has %d lines, capture %d 5-tuples", len(flows), len(want))
	}
	if !slices.IsSortedFunc(flows, func(a, b string) int { return compareFlowLines(t, a, b) }) {
		t.Error("flows file not sorted")
	}

	// The same arguments (flags before or after FILE) give the same bytes;
	// another seed does not.
	again := filepath.Join(t.TempDir(), "again.pcap")
	if r := run(t, "gen-pcap", again, "--seed", "7", "--qps", "64", "--mix", "control"); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if fileSHA(t, again) != fileSHA(t, pcap) {
		t.Error("same seed, different captures")
	}
	if r := run(t, "gen-pcap", "--qps", "64", "--seed", "8", again); r.code != 0 {
		t.Fatalf("exit %d %s", r.code, r.stderr)
	}
	if fileSHA(t, again) == fileSHA(t, pcap) {
		t.Error("seeds 7 and 8 give the same capture")
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// compareFlowLines orders flow lines by address, then ports.
func compareFlowLines(t *testing.T, a, b string) int {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) != 5 || len(fb) != 5 {
		t.Fatalf("flow lines %q, %q", a, b)
	}
	for i := range 2 {
		if c := netip.MustParseAddr(fa[i]).Compare(netip.MustParseAddr(fb[i])); c != 0 {
			return c
		}
	}
	for i := 2; i < 5; i++ {
		x, _ := strconv.Atoi(fa[i])
		y, _ := strconv.Atoi(fb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

func TestGenPcapMTUMixes(t *testing.T) {
	for _, c := range []struct {
		args     []string
		frames   int
		min, max int // frame sizes
		ipv6     bool
	}{
		{[]string{"--mix", "mtu1024"}, 8, 62, 1098, false},                           // --qps defaults to 1
		{[]string{"--mix", "mtu1024", "--qps", "50", "--ipv6"}, 400, 82, 1118, true}, // 8 per QP
		{[]string{"--mix", "mtu4096", "--qps", "3000"}, 6000, 62, 4170, false},       // 8192 in whole rounds
		{[]string{"--mix", "mtu4096", "--qps", "10", "--ipv6", "--frames", "95"}, 95, 82, 4190, true},
	} {
		_, frames, _ := genWorkload(t, c.args...)
		if len(frames) != c.frames {
			t.Errorf("%v: %d frames, want %d", c.args, len(frames), c.frames)
		}
		full := 0
		for i, f := range frames {
			if f.len < c.min || f.len > c.max || (f.r.IPVersion == 6) != c.ipv6 {
				t.Fatalf("%v frame %d: %d bytes, IPv%d", c.args, i, f.len, f.r.IPVersion)
			}
			if f.len >= c.max-16 {
				full++
			}
		}
		// Most frames are First or Middle packets of a full path MTU.
		if full < len(frames)/2 {
			t.Errorf("%v: %d of %d frames of full MTU size", c.args, full, len(frames))
		}
	}
}

func TestGenPcapUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--qps", "4", "--mix", "demo"}, "--qps needs a workload mix"},
		{[]string{"--qps", "0"}, "--qps 0"},
		{[]string{"--qps", "1048577"}, "--qps 1048577"},
		{[]string{"--mix", "mtu9000"}, `--mix "mtu9000"`},
		{[]string{"--qps", "8", "--frames", "7"}, "every QP needs a frame"},
		{[]string{"--qps", "1", "--frames", "1048577"}, "--frames 1048577"},
		{[]string{"--qps", "1", "--frames", "0"}, "--frames 0"},
		{[]string{"--ipv6"}, "--ipv6 applies to workloads"},
		{[]string{"--frames", "10"}, "--frames applies to workloads"},
		{[]string{"--qps", "x"}, "invalid value"},
		{[]string{"--qps", "2", "other.pcap"}, "want one output FILE, got 2"},
	} {
		out := filepath.Join(t.TempDir(), "out.pcap")
		r := run(t, append(append([]string{"gen-pcap"}, c.args...), out)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %d and %q", c.args, r.code, r.stderr, exitUsage, c.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: wrote %s", c.args, out)
		}
	}
	if r := run(t, "gen-pcap"); r.code != exitUsage || !strings.Contains(r.stderr, "usage: roce-fwd gen-pcap") {
		t.Errorf("no FILE: exit %d %q", r.code, r.stderr)
	}
}

// tshark, an independent decoder, reads the same opcodes.
func TestGenPcapTshark(t *testing.T) {
	if _, err := os.Stat("/usr/bin/tshark"); err != nil {
		t.Skip("/usr/bin/tshark not installed: opcodes not cross-checked")
	}
	for _, args := range [][]string{{"--qps", "16"}, {"--qps", "4", "--mix", "mtu1024", "--ipv6"}} {
		pcap, frames, _ := genWorkload(t, args...)
		out, err := exec.Command("/usr/bin/tshark", "-r", pcap, "--disable-protocol", "rpcordma",
			"-T", "fields", "-e", "infiniband.bth.opcode").Output()
		if err != nil {
			t.Fatalf("tshark: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != len(frames) {
			t.Fatalf("%v: tshark read %d frames, we wrote %d", args, len(lines), len(frames))
		}
		for i, l := range lines {
			if op, err := strconv.ParseUint(l, 0, 8); err != nil || roce.Opcode(op) != frames[i].r.Opcode {
				t.Errorf("%v frame %d: tshark opcode %q, ours %d", args, i, l, frames[i].r.Opcode)
			}
		}
	}
}
