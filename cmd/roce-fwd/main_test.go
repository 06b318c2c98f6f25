package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"roce-fwd/qpstats"
)

// The command is tested as users run it: built once, then executed.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "roce-fwd-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "roce-fwd")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building roce-fwd: %v\n%s", err, out)
		os.Exit(1)
	}
	// The built-in config's prefix: its directory is the tests' to remove
	// only if no other roce-fwd left it there before them.
	defaultDir := "/var/run/dpdk/roce-fwd"
	_, err = os.Stat(defaultDir)
	hadDefault := err == nil
	code := m.Run()
	os.RemoveAll(dir)
	removeRuntimeDirs()
	if !hadDefault {
		os.RemoveAll(defaultDir)
	}
	os.Exit(code)
}

// removeRuntimeDirs removes the EAL runtime directories the daemons this
// test binary ran left behind (EAL keeps them after exit, with their
// telemetry sockets): those of the file prefixes the tests give, which
// carry this process's id.
func removeRuntimeDirs() {
	for _, base := range []string{"/var/run/dpdk", filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "dpdk"), "/tmp/dpdk"} {
		for _, kind := range []string{"cmd", "con", "flows", "fault"} {
			dirs, _ := filepath.Glob(filepath.Join(base, fmt.Sprintf("rf-%s-%d-*", kind, os.Getpid())))
			for _, d := range dirs {
				os.RemoveAll(d)
			}
		}
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	return runPath(t, binary, args...)
}

// runPath runs the roce-fwd at path (the test's binary, or an installed one).
func runPath(t *testing.T, path string, args ...string) result {
	t.Helper()
	cmd := exec.Command(path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, stdout.String(), stderr.String()}
}

// ealArgs gives each run its own file prefix.
func ealArgs(t *testing.T) string {
	return fmt.Sprintf(`["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "-l", "0-1", "--file-prefix", "rf-cmd-%d-%s"]`,
		os.Getpid(), strings.ReplaceAll(t.Name(), "/", "-"))
}

// inOutConfig is the tests' usual config: EAL args (a TOML array), port
// "in" on vdev in, port "out" on net_null, "in" forwarded to "out", then
// rest (the mode, the console, a section under test).
func inOutConfig(eal, in, rest string) string {
	return fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = %q
[[port]]
name = "out"
vdev = "net_null0"
[[forward]]
from = "in"
to = "out"
%s`, eal, in, rest)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type statsJSON struct {
	DurationS float64 `json:"duration_s"`
	Ports     []struct {
		Name      string  `json:"name"`
		PortID    *int    `json:"port_id"`
		RxPackets uint64  `json:"rx_packets"`
		RxBytes   uint64  `json:"rx_bytes"`
		TxPackets uint64  `json:"tx_packets"`
		TxBytes   *uint64 `json:"tx_bytes"`
		RxMissed  *uint64 `json:"rx_missed"`
		TxDropped *uint64 `json:"tx_dropped"`
	} `json:"ports"`
	Lcores []struct {
		Lcore           int               `json:"lcore"`
		Socket          *int              `json:"socket"`
		Packets         uint64            `json:"packets"`
		CyclesPerPacket float64           `json:"cycles_per_packet"`
		Stalls          map[string]uint64 `json:"stalls"`
		MaxPollGapUS    float64           `json:"max_poll_gap_us"`
	} `json:"lcores"`
	Drops   map[string]uint64 `json:"drops"`
	Capture *struct {
		File    string `json:"file"`
		Running bool   `json:"running"`
		Written uint64 `json:"written_packets"`
		Lost    uint64 `json:"lost_packets"`
	} `json:"capture"`
	RoCE *struct {
		Ports []struct {
			Name    string            `json:"name"`
			Frames  uint64            `json:"frames"`
			RoCE    uint64            `json:"roce"`
			CNP     uint64            `json:"cnp"`
			ICRCOK  uint64            `json:"icrc_ok"`
			Opcodes map[string]uint64 `json:"opcodes"`
		} `json:"ports"`
	} `json:"roce"`
	Route *struct {
		IPv6Lookups map[string]uint64 `json:"ipv6_lookups"`
	} `json:"route"`
	TopQPs []struct {
		Src     string `json:"src"`
		QP      uint32 `json:"qp"`
		Packets uint64 `json:"packets"`
	} `json:"top_qps"`
}

func readStats(t *testing.T, path string) statsJSON {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var s statsJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return s
}

// The built-in default runs with no config file, stops after --duration
// and writes the documented stats JSON.
func TestRunDefaultWithDurationAndStatsJSON(t *testing.T) {
	statsPath := filepath.Join(t.TempDir(), "stats.json")
	start := time.Now()
	r := run(t, "run", "--duration", "2s", "--stats-json", statsPath)
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Errorf("run --duration 2s took %v", el)
	}
	s := readStats(t, statsPath)
	if s.DurationS < 1.5 || s.DurationS > 30 {
		t.Errorf("duration_s = %v, want about 2", s.DurationS)
	}
	if len(s.Ports) != 2 || s.Ports[0].Name != "in" || s.Ports[1].Name != "out" {
		t.Fatalf("ports %+v", s.Ports)
	}
	in, out := s.Ports[0], s.Ports[1]
	if in.RxPackets == 0 || in.RxBytes == 0 {
		t.Errorf("no packets received: %+v", in)
	}
	if in.PortID == nil || in.TxBytes == nil || in.RxMissed == nil || in.TxDropped == nil {
		t.Errorf("documented port keys missing: %+v", in)
	}
	if len(s.Lcores) != 1 || s.Lcores[0].Lcore != 1 || s.Lcores[0].Socket == nil {
		t.Fatalf("lcores %+v", s.Lcores)
	}
	var drops uint64
	for _, v := range s.Drops {
		drops += v
	}
	if _, ok := s.Drops["tx_full"]; !ok {
		t.Errorf("drops lacks the tx_full reason: %v", s.Drops)
	}
	// Every packet a worker handled went out or was counted as dropped.
	if l := s.Lcores[0]; l.Packets != out.TxPackets+drops || l.Packets == 0 {
		t.Errorf("lcore handled %d, port out sent %d, dropped %d", l.Packets, out.TxPackets, drops)
	}
	if s.Lcores[0].CyclesPerPacket <= 0 {
		t.Errorf("cycles_per_packet %v", s.Lcores[0].CyclesPerPacket)
	}
	// The collector is paced with a floor unless the environment says how.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" && !strings.Contains(r.stderr, "Go collector paced with a floor") {
		t.Errorf("no log of the collector's floor:\n%s", r.stderr)
	}
	// The worker's gaps between polls: some gap is the longest, and the
	// four stall bounds are there (cumulative, so never rising).
	if l := s.Lcores[0]; l.MaxPollGapUS <= 0 || len(l.Stalls) != 4 ||
		l.Stalls["50us"] < l.Stalls["200us"] || l.Stalls["200us"] < l.Stalls["1ms"] || l.Stalls["1ms"] < l.Stalls["10ms"] {
		t.Errorf("max_poll_gap_us %v, stalls %v", l.MaxPollGapUS, l.Stalls)
	}
	// The default runs roce mode on the demo capture: 9 of its 10 frames
	// are RoCEv2, one a CNP, all with good ICRCs.
	if s.RoCE == nil || len(s.RoCE.Ports) == 0 {
		t.Fatalf("no roce section")
	}
	rp := s.RoCE.Ports[0]
	if rp.Name != "in" || rp.Frames != in.RxPackets || rp.RoCE*10 < rp.Frames*9-10 || rp.ICRCOK != rp.RoCE || rp.CNP == 0 || rp.Opcodes["CNP"] != rp.CNP {
		t.Errorf("roce counters %+v (port rx %d)", rp, in.RxPackets)
	}
	if len(s.TopQPs) != 3 || s.TopQPs[0].Packets == 0 {
		t.Errorf("top_qps %+v", s.TopQPs)
	}
	for _, want := range []string{"Forward statistics for port 0 (in)", "RX-packets:", "lcore 1 (socket 0)", "RoCE on port in"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("final stats lack %q:\n%s", want, r.stdout)
		}
	}
}

// SIGINT stops the daemon cleanly with the final stats.
func TestRunStopsOnSIGINT(t *testing.T) {
	cmd := exec.Command(binary, "run")
	var stdout bytes.Buffer // read once the daemon has exited
	stderr := &syncBuffer{} // read while it runs
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "worker started") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("daemon did not start:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "TX-packets") {
		t.Errorf("no final stats:\n%s", stdout.String())
	}
}

// What run can refuse before EAL starts, it refuses at once with exit 2:
// a negative duration or stats period, a --stats-json path that cannot be
// written (found only at exit before).
func TestRunRefusesBadFlagsAtStart(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "-5s"}, "--duration -5s: must not be negative"},
		{[]string{"--stats-period", "-1s", "--duration", "1s"}, "--stats-period -1s: must not be negative"},
		{[]string{"--stats-json", "/nonexistent-dir/stats.json", "--duration", "1s"}, "--stats-json /nonexistent-dir/stats.json: directory /nonexistent-dir"},
		{[]string{"--stats-json", t.TempDir(), "--duration", "1s"}, "is a directory"},
	} {
		r := run(t, append([]string{"run"}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "starting EAL") {
			t.Errorf("run %v: exit %d, stderr:\n%s\nwant exit 2 with %q before EAL starts", c.args, r.code, r.stderr, c.want)
		}
	}
}

func TestRunBadVdevFailsClearly(t *testing.T) {
	cfg := writeFile(t, "bad.toml", fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "uplink"
vdev = "net_nosuchdriver0,foo=1"
[[port]]
name = "sink"
vdev = "net_null0,no-rx=1"
[[forward]]
from = "uplink"
to = "sink"
`, ealArgs(t)))
	r := run(t, "run", "--config", cfg, "--duration", "1s")
	if r.code == 0 {
		t.Fatalf("bad vdev exited 0:\n%s", r.stdout)
	}
	for _, want := range []string{"port uplink", "net_nosuchdriver0,foo=1", `no DPDK driver named "net_nosuchdriver"`, "net_pcap"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestRunMissingPcapFailsClearly(t *testing.T) {
	cfg := writeFile(t, "nopcap.toml", fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=/nonexistent/in.pcap"
[[port]]
name = "out"
vdev = "net_null0,no-rx=1"
[[forward]]
from = "in"
to = "out"
`, ealArgs(t)))
	// Refused before EAL, at the port's line, by run and validate alike
	// (EAL reported it as "Operation not permitted").
	want := cfg + ":5: port[0].vdev: rx_pcap /nonexistent/in.pcap: no such file or directory"
	for _, cmd := range []string{"run", "validate"} {
		r := run(t, cmd, "--config", cfg)
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 2 and %q", cmd, r.code, r.stderr, want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := writeFile(t, "good.toml", `[[port]]
name = "a"
vdev = "net_null0"
[[port]]
name = "b"
vdev = "net_null1"
[[forward]]
from = "a"
to = "b"
`)
	if r := run(t, "validate", "--config", good); r.code != 0 || !strings.Contains(r.stdout, "ok") {
		t.Errorf("good config: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := writeFile(t, "bad.toml", `[[port]]
name = "a"
vdev = "net_null0"
rx_queue = 2
[[port]]
name = "b"
vdev = "net_null1"
[pipeline]
burst = "32"
[[forward]]
from = "a"
to = "c"
`)
	r := run(t, "validate", "--config", bad)
	if r.code != exitUsage {
		t.Errorf("bad config exit %d, want %d", r.code, exitUsage)
	}
	for _, re := range []string{
		`bad\.toml:4: port\[0\]\.rx_queue: .*rx_queues`,
		`bad\.toml:9: pipeline\.burst: `,
		`bad\.toml:12: forward\[0\]\.to: `,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("no error matching %s in:\n%s", re, r.stderr)
		}
	}
}

func TestHugepagesPrintsAPlan(t *testing.T) {
	r := run(t, "hugepages")
	if r.code != 0 || !strings.Contains(r.stdout, "socket") {
		t.Errorf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The built-in config runs one worker lcore with the default table.
	want := fmt.Sprintf("QP tables: %.1f MiB (qp_table = 65536 slots of %d bytes per worker, and a copy of each for show roce qp)",
		float64(qpstats.Footprint(65536)+qpstats.CopyFootprint(65536))/(1<<20), qpstats.SlotBytes)
	if !strings.Contains(r.stdout, want) {
		t.Errorf("the plan does not say %q:\n%s", want, r.stdout)
	}
}

func TestVersionAndPorts(t *testing.T) {
	r := run(t, "version")
	if r.code != 0 || !strings.Contains(r.stdout, "DPDK 22.11") {
		t.Errorf("version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The binary is built as this test is: the same Go and settings.
	if !strings.Contains(r.stdout, "built with "+runtime.Version()) || !strings.Contains(r.stdout, "bucket scans: "+qpstats.BucketScan+"\n") {
		t.Errorf("version does not name the build (%s, %s scans):\n%s", runtime.Version(), qpstats.BucketScan, r.stdout)
	}
	if r := run(t, "ports"); r.code != 0 {
		t.Errorf("ports: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := run(t, "nosuchcommand"); r.code != exitUsage || !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("unknown command: exit %d\n%s", r.code, r.stderr)
	}
}

func TestInspect(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "demo.pcap")
	if r := run(t, "gen-pcap", pcap); r.code != 0 {
		t.Fatalf("gen-pcap: %s", r.stderr)
	}
	r := run(t, "inspect", pcap)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d %s", r.code, r.stderr)
	}
	for _, want := range []string{"frames 10", "RoCEv2 9 (90.0%", "ICRC: 9 ok, 0 bad", "CNPs: 1", "0x81  CNP", "top 3 of 3 QP flows"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	r = run(t, "inspect", "--json", pcap)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 10 {
		t.Fatalf("--json: exit %d, %d lines", r.code, len(lines))
	}
	keys := []string{"index", "roce", "ip_version", "opcode", "transport", "dest_qp", "psn", "ack_req", "cnp", "dscp", "ecn", "pcp", "vlan", "icrc", "tc", "error"}
	for i, l := range lines {
		var obj map[string]any
		if err := json.Unmarshal([]byte(l), &obj); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		for _, k := range keys {
			if _, ok := obj[k]; !ok {
				t.Errorf("line %d lacks %q: %s", i, k, l)
			}
		}
		if obj["index"].(float64) != float64(i) {
			t.Errorf("line %d index %v", i, obj["index"])
		}
	}
	if !strings.Contains(lines[7], `"cnp":true`) || !strings.Contains(lines[7], `"tc":6`) || !strings.Contains(lines[9], `"roce":false`) {
		t.Errorf("CNP or ARP line wrong:\n%s\n%s", lines[7], lines[9])
	}
	notPcap := writeFile(t, "x.pcap", "not a capture")
	if r := run(t, "inspect", notPcap); r.code != 1 || !strings.Contains(r.stderr, "x.pcap") {
		t.Errorf("bad file: exit %d, %s", r.code, r.stderr)
	}
}
