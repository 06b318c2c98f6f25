package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roce-fwd/internal/testenv"
)

// tsharkFields reads a capture file's packets with tshark, one line per
// packet of the given fields (tab-separated).
func tsharkFields(t *testing.T, file string, fields ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed (make test installs it)")
	}
	args := []string{"-r", file, "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=/t"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, err := exec.Command("tshark", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.Contains(l, "Running as user") {
			lines = append(lines, l)
		}
	}
	return lines
}

// waitCapture waits until show capture says the capture is no longer
// running (its count reached).
func (r *daemonRig) waitCapture(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res := r.console("show", "capture")
		if strings.Contains(res.stdout, "(stopped)") {
			return res.stdout
		}
		if time.Now().After(deadline) {
			t.Fatalf("the capture did not reach its count:\n%s%s", res.stdout, res.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A capture of what a running daemon receives, and one of what it drops:
// pcapng files tshark reads, with one interface per port, the direction,
// and a verdict per packet (RoCE fields; the drop reason and stage); a
// trace of the same shows each packet with its first bytes.
func TestCaptureAndTrace(t *testing.T) {
	// A software flow rule drops every RoCEv2 packet over IPv4.
	r := startDaemon(t, "", `
[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions drop / end"
`)
	dir := t.TempDir()
	rx := filepath.Join(dir, "rx.pcapng")
	if res := r.console("capture", "start", "port", "in", "rx", "file", rx, "count", "300", "snaplen", "128"); res.code != 0 {
		t.Fatalf("capture start: %s%s", res.stdout, res.stderr)
	}
	st := r.waitCapture(t)
	if !strings.Contains(st, "300 packets written") {
		t.Errorf("show capture:\n%s", st)
	}
	lines := tsharkFields(t, rx, "frame.interface_name", "frame.p2p_dir", "infiniband.bth.opcode", "frame.comment")
	if len(lines) != 300 {
		t.Fatalf("tshark read %d packets of the rx capture, want 300", len(lines))
	}
	var roce int
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) < 4 || f[0] != "in" || !strings.HasPrefix(f[3], "rx in queue 0") {
			t.Fatalf("rx capture packet: %q: want interface in, a verdict starting rx in queue 0", l)
		}
		if f[2] != "" {
			roce++
			if !strings.Contains(f[3], "RoCEv2") {
				t.Errorf("tshark decodes a BTH but the verdict says %q", f[3])
			}
		}
	}
	if roce == 0 {
		t.Error("no RoCEv2 packet among 300 of the demo traffic")
	}

	drops := filepath.Join(dir, "drops.pcapng")
	if res := r.console("capture", "start", "port", "in", "drop", "file", drops, "count", "100", "filter", "udp", "dst", "port", "4791"); res.code != 0 {
		t.Fatalf("capture start drop: %s%s", res.stdout, res.stderr)
	}
	r.waitCapture(t)
	lines = tsharkFields(t, drops, "infiniband.bth.destqp", "frame.comment")
	if len(lines) != 100 {
		t.Fatalf("tshark read %d packets of the drop capture, want 100", len(lines))
	}
	rules := r.flowList("in")
	if len(rules) != 1 {
		t.Fatalf("flow list in: %+v", rules)
	}
	for _, l := range lines {
		f := strings.Split(l, "\t")
		if len(f) < 2 || f[0] == "" || !strings.HasPrefix(f[1], "drop flow_drop at flow ") || !strings.Contains(f[1], "; flow rule "+rules[0].ID+";") {
			t.Fatalf("drop capture packet %q: want a RoCEv2 packet (the BPF filter) with a flow_drop verdict naming its rule", l)
		}
	}

	// No count, traffic that never stops: capture stop ends it at once.
	all := filepath.Join(dir, "all.pcapng")
	if res := r.console("capture", "start", "port", "in", "all", "file", all, "snaplen", "64"); res.code != 0 {
		t.Fatalf("capture start all: %s%s", res.stdout, res.stderr)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	res := r.console("capture", "stop")
	if res.code != 0 || !strings.Contains(res.stdout, "(stopped)") || time.Since(start) > 5*time.Second {
		t.Fatalf("capture stop under traffic took %v: %s%s", time.Since(start), res.stdout, res.stderr)
	}
	var cs struct {
		Written uint64 `json:"written_packets"`
	}
	r.consoleJSON(&cs, "show", "capture")
	if n := len(tsharkFields(t, all, "frame.number")); cs.Written == 0 || uint64(n) != cs.Written {
		t.Errorf("show capture says %d packets written, tshark reads %d", cs.Written, n)
	}

	if res := r.console("trace", "start", "port", "in", "count", "5"); res.code != 0 {
		t.Fatalf("trace start: %s%s", res.stdout, res.stderr)
	}
	deadline := time.Now().Add(10 * time.Second)
	var out string
	for time.Now().Before(deadline) {
		out = r.console("show", "trace").stdout
		if strings.Contains(out, "5 of 5 packets") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out, "5 of 5 packets") || strings.Count(out, "\n#") != 5 || !strings.Contains(out, "  0000  ") {
		t.Errorf("show trace:\n%s", out)
	}
	var recs []struct {
		Dir, Verdict, Hex string
	}
	r.consoleJSON(&recs, "show", "trace")
	if len(recs) != 5 {
		t.Fatalf("show trace --json: %d records", len(recs))
	}
	r.console("trace", "clear")
	if out := r.console("show", "trace").stdout; !strings.HasPrefix(out, "no trace") {
		t.Errorf("after trace clear: %q", out)
	}
}

// [capture] start captures from the first packet: every frame of a
// capture replayed once is in the file as received, as many as the port
// counted and the stats JSON says were written; a bad start is refused at
// its line.
func TestCaptureFromConfig(t *testing.T) {
	dir := t.TempDir()
	in, file, statsPath := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "c.pcapng"), filepath.Join(dir, "stats.json")
	frames := testenv.Frames(500)
	testenv.WritePcap(t, in, frames)
	cfg := func(start string) string {
		return inOutConfig(ealArgs(t), "net_pcap0,rx_pcap="+in, fmt.Sprintf("[capture]\nstart = %q\n", start))
	}
	bad := writeFile(t, "bad.toml", cfg("port nosuch all file "+file))
	if r := run(t, "validate", "--config", bad); r.code != 2 || !strings.Contains(r.stderr, "bad.toml:13: capture.start: port \"nosuch\": not a port") {
		t.Errorf("validate: exit %d: %s", r.code, r.stderr)
	}
	good := writeFile(t, "good.toml", cfg("port in rx file "+file+" snaplen 96"))
	if r := run(t, "run", "--config", good, "--duration", "1s", "--stats-json", statsPath); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	s := readStats(t, statsPath)
	lines := tsharkFields(t, file, "frame.len", "frame.cap_len")
	if len(lines) != len(frames) || s.Ports[0].RxPackets != uint64(len(frames)) {
		t.Fatalf("the file holds %d packets, port in received %d, the capture replayed %d", len(lines), s.Ports[0].RxPackets, len(frames))
	}
	if c := s.Capture; c == nil || c.File != file || c.Running || c.Written != uint64(len(frames)) || c.Lost != 0 {
		t.Errorf("stats JSON capture %+v: want %d written to %s, none lost, stopped", c, len(frames), file)
	}
	for i, l := range lines {
		want := fmt.Sprintf("%d\t%d", len(frames[i]), min(len(frames[i]), 96))
		if l != want {
			t.Fatalf("packet %d: length and captured length %q, want %q", i, l, want)
		}
	}
}
