package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"roce-fwd/demotraffic"
)

// daemonRig is a roce-fwd run in the background with its console socket
// in a temporary directory: the demo capture replayed forever from port
// "in" (id 0) to the null port "out" (id 1), in roce mode with the
// nvidia-roce QoS preset.
type daemonRig struct {
	t       *testing.T
	cmd     *exec.Cmd
	cfgPath string
	sock    string
	prefix  string
	stderr  *syncBuffer
}

// syncBuffer is a bytes.Buffer the daemon writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// rigConfig is the rig's config; extra is appended (a [[qos.port]]).
func rigConfig(prefix, pcap, sock, metrics, extra string) string {
	return inOutConfig(noHugeEAL(prefix), "net_pcap0,rx_pcap="+pcap+",infinite_rx=1", fmt.Sprintf(`[pipeline]
mode = "roce"
[qos]
preset = "nvidia-roce"
[console]
socket = %q
history = ""
[telemetry]
listen = %q
%s`, sock, metrics, extra))
}

// noHugeEAL is the daemon tests' EAL args (a TOML array): ordinary memory,
// no shared runtime directory, file prefix prefix.
func noHugeEAL(prefix string) string {
	return fmt.Sprintf(`["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "-l", "0-1", "--file-prefix", %q, "--log-level", "*:error"]`, prefix)
}

func startDaemon(t *testing.T, metrics, extra string) *daemonRig {
	t.Helper()
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	r := &daemonRig{t: t, sock: filepath.Join(dir, "ctl", "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-con-%d-%s", os.Getpid(), t.Name()), stderr: &syncBuffer{}}
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, metrics, extra))
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath)
	r.launch()
	return r
}

// launch starts r.cmd, stops it when the test ends, and waits until its
// console listens.
func (r *daemonRig) launch() {
	t := r.t
	t.Helper()
	r.cmd.Stderr = r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(r.stderr.String(), "console listening") {
		if time.Now().After(deadline) || r.cmd.ProcessState != nil {
			t.Fatalf("daemon did not open its console:\n%s", r.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *daemonRig) writeConfig(s string) {
	if err := os.WriteFile(r.cfgPath, []byte(s), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *daemonRig) stop() {
	if r.cmd.ProcessState != nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			r.t.Errorf("daemon exit: %v\n%s", err, r.stderr.String())
		}
	case <-time.After(20 * time.Second):
		r.cmd.Process.Kill()
		r.t.Errorf("daemon did not stop on SIGINT")
	}
	if _, err := os.Lstat(r.sock); !os.IsNotExist(err) {
		r.t.Errorf("console socket left behind after exit: %v", err)
	}
}

// console runs `roce-fwd console --socket SOCK args...`.
func (r *daemonRig) console(args ...string) result {
	r.t.Helper()
	return run(r.t, append([]string{"console", "--socket", r.sock}, args...)...)
}

// consoleJSON runs a show command with --json and decodes its output.
func (r *daemonRig) consoleJSON(v any, args ...string) {
	r.t.Helper()
	res := r.console(append([]string{"--json"}, args...)...)
	if res.code != 0 {
		r.t.Fatalf("%v: exit %d: %s", args, res.code, res.stderr)
	}
	if err := json.Unmarshal([]byte(res.stdout), v); err != nil {
		r.t.Fatalf("%v: %v\n%s", args, err, res.stdout)
	}
}

type fwdJSON struct {
	Ports []struct {
		Name      string `json:"name"`
		RxPackets uint64 `json:"rx_packets"`
		TxPackets uint64 `json:"tx_packets"`
	} `json:"ports"`
	Drops map[string]uint64 `json:"drops"`
}

func (r *daemonRig) fwd() fwdJSON {
	var f fwdJSON
	r.consoleJSON(&f, "show", "fwd", "stats", "all")
	return f
}

type qosJSON []struct {
	Port      string `json:"port"`
	TC        int    `json:"tc"`
	ECNMin    uint64 `json:"ecn_min_bytes"`
	ECNMax    uint64 `json:"ecn_max_bytes"`
	Enqueued  uint64 `json:"enqueued_packets"`
	Scheduler string `json:"scheduler"`
}

func (r *daemonRig) tc3() (min, max, enq uint64) {
	var q qosJSON
	r.consoleJSON(&q, "show", "qos", "out")
	for _, e := range q {
		if e.TC == 3 {
			return e.ECNMin, e.ECNMax, e.Enqueued
		}
	}
	r.t.Fatalf("no TC3 in %+v", q)
	return
}

// One-shot commands print the right numbers and exit with the command's
// status; the socket is 0600.
func TestConsoleOneShots(t *testing.T) {
	r := startDaemon(t, "", "")
	fi, err := os.Stat(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want 0600 socket", fi.Mode())
	}

	res := r.console("show", "port", "summary", "all")
	if res.code != 0 || !strings.Contains(res.stdout, "Number of available ports: 2") ||
		!strings.Contains(res.stdout, "net_pcap") || !strings.Contains(res.stdout, "net_null") {
		t.Errorf("summary: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = r.console("show", "port", "info", "0")
	if res.code != 0 || !strings.Contains(res.stdout, "RSS: off (1 rx queue)\n") || !strings.Contains(res.stdout, "Rx IPv4 checksum offload: disabled\n") {
		t.Errorf("show port info 0: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	// Counters rise between two shows, and out transmits what in receives.
	a := r.fwd()
	time.Sleep(300 * time.Millisecond)
	b := r.fwd()
	if b.Ports[0].RxPackets <= a.Ports[0].RxPackets || b.Ports[1].TxPackets <= a.Ports[1].TxPackets {
		t.Errorf("counters did not rise: %+v then %+v", a.Ports, b.Ports)
	}
	// Abbreviated, like testpmd's parser allows.
	res = r.console("sh", "po", "st", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "NIC statistics for port 1") || strings.Contains(res.stdout, "port 0") {
		t.Errorf("sh po st 1: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	var lc []struct {
		Lcore   int      `json:"lcore"`
		Queues  []string `json:"queues"`
		Packets uint64   `json:"packets"`
		Mpps    float64  `json:"interval_mpps"`
		Cycles  float64  `json:"interval_cycles_per_packet"`
	}
	r.consoleJSON(&lc, "show", "lcores")
	if len(lc) != 1 || lc[0].Lcore != 1 || lc[0].Packets == 0 || lc[0].Mpps <= 0 || lc[0].Cycles <= 0 || lc[0].Queues[0] != "in/0" {
		t.Errorf("show lcores %+v", lc)
	}
	var roce []struct {
		Name  string `json:"name"`
		RoCE  uint64 `json:"roce"`
		CNP   uint64 `json:"cnp"`
		Other uint64 `json:"other"`
	}
	r.consoleJSON(&roce, "show", "roce", "stats", "in")
	// The demo capture holds 10 frames of which 9 are RoCEv2 and 1 a CNP.
	if len(roce) != 1 || roce[0].RoCE == 0 || roce[0].CNP == 0 || roce[0].CNP > roce[0].RoCE {
		t.Errorf("show roce stats %+v", roce)
	}
	var qp struct {
		Flows int `json:"flows"`
		Top   []struct {
			QP      uint32 `json:"qp"`
			Packets uint64 `json:"packets"`
		} `json:"top"`
	}
	r.consoleJSON(&qp, "show", "roce", "qp", "top", "2", "by", "packets")
	if qp.Flows != 3 || len(qp.Top) != 2 || qp.Top[0].Packets < qp.Top[1].Packets {
		t.Errorf("show roce qp %+v", qp)
	}
	res = r.console("show", "errors")
	if res.code != 0 || !strings.Contains(res.stdout, "qos_wred") || !strings.Contains(res.stdout, "rx_missed") {
		t.Errorf("show errors:\n%s", res.stdout)
	}
	res = r.console("show", "running-config")
	if !strings.Contains(res.stdout, "preset = \"nvidia-roce\"") || !strings.Contains(res.stdout, "[[forward]]") {
		t.Errorf("running-config:\n%s", res.stdout)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "port", "stats", "7"}, "Invalid port 7 (valid ports: 0 1)"},
		{[]string{"frobnicate"}, "Command not found"},
		{[]string{"show", "port"}, "Bad arguments: missing one of info, stats, xstats, summary"},
		{[]string{"set", "fwd", "io"}, "forwarding is running: stop it first"},
		{[]string{"port", "stop", "0"}, "forwarding is running: stop it first"},
	} {
		res := r.console(c.args...)
		if res.code != 1 || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, res.code, res.stderr, c.want)
		}
	}

	// stop, clear, start: the forwarding counters start over.
	if res := r.console("stop"); res.code != 0 || !strings.Contains(res.stdout, "Forward statistics for port 0") {
		t.Errorf("stop: %d %s %s", res.code, res.stdout, res.stderr)
	}
	r.console("clear", "fwd", "stats", "all")
	var zero []struct {
		Packets uint64 `json:"packets"`
	}
	r.consoleJSON(&zero, "show", "lcores")
	if zero[0].Packets != 0 {
		t.Errorf("lcore packets after clear: %d", zero[0].Packets)
	}
	if res := r.console("start"); res.code != 0 {
		t.Errorf("start: %s", res.stderr)
	}
	time.Sleep(100 * time.Millisecond)
	r.consoleJSON(&zero, "show", "lcores")
	if zero[0].Packets == 0 {
		t.Error("no packets after start")
	}
}

// Two clients at once, each with a session of its own.
func TestConsoleConcurrentClients(t *testing.T) {
	r := startDaemon(t, "", "")
	var wg sync.WaitGroup
	errs := make(chan string, 40)
	for c := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				cmd := exec.Command(binary, "console", "--socket", r.sock, "show", "port", "info", fmt.Sprint(c))
				out, err := cmd.CombinedOutput()
				if err != nil || !strings.Contains(string(out), fmt.Sprintf("Infos for port %d", c)) {
					errs <- fmt.Sprintf("client %d run %d: %v\n%s", c, i, err, out)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// reload applies a valid change under traffic without a drop, refuses a
// broken file with its line and key, and SIGHUP does what reload does.
func TestConsoleReload(t *testing.T) {
	r := startDaemon(t, "", "")
	pcap := filepath.Join(filepath.Dir(r.cfgPath), "demo.pcap")
	min0, max0, _ := r.tc3()
	if min0 != 150_000 || max0 != 1_500_000 {
		t.Fatalf("nvidia-roce TC3 ECN %d..%d", min0, max0)
	}
	before := r.fwd()
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "", `[[qos.port]]
name = "out"
[[qos.port.tc]]
tc = 3
ecn = { min = "40KB", max = "400KB", probability = 0.2 }
`))
	res := r.console("reload")
	if res.code != 0 || !strings.Contains(res.stdout, `qos.port[0].tc[0].ecn.min: (unset) → "40KB"`) {
		t.Fatalf("reload: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	min1, max1, enq1 := r.tc3()
	if min1 != 40_000 || max1 != 400_000 {
		t.Errorf("TC3 ECN after reload %d..%d", min1, max1)
	}
	time.Sleep(200 * time.Millisecond)
	after := r.fwd()
	if _, _, enq2 := r.tc3(); enq2 <= enq1 || after.Ports[0].RxPackets <= before.Ports[0].RxPackets {
		t.Errorf("traffic stopped after reload: TC3 %d → %d", enq1, enq2)
	}
	for reason, n := range after.Drops {
		if n != 0 {
			t.Errorf("%d packets dropped (%s) across the reload", n, reason)
		}
	}

	// A broken file: every error with file:line: key, nothing applied.
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "", `[[qos.port]]
name = "out"
[[qos.port.tc]]
tc = 3
ecn = { min = "40KB", max = "4KB", probability = 2 }
`))
	res = r.console("reload")
	if res.code != 1 || !regexp.MustCompile(regexp.QuoteMeta(r.cfgPath)+`:\d+: qos\.port\[0\]\.tc\[0\]\.ecn\.probability: 2 is out of range 0..1`).MatchString(res.stderr) {
		t.Errorf("broken reload: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if min, max, _ := r.tc3(); min != 40_000 || max != 400_000 {
		t.Errorf("a broken reload changed TC3 ECN to %d..%d", min, max)
	}
	// A change that needs a restart is refused and named.
	r.writeConfig(strings.Replace(rigConfig(r.prefix, pcap, r.sock, "", ""), "[pipeline]", "[pipeline]\nburst = 64", 1))
	res = r.console("reload")
	if res.code != 1 || !strings.Contains(res.stderr, "need a restart") || !strings.Contains(res.stderr, "pipeline.burst: 32 → 64") {
		t.Errorf("restart-only reload: %d\n%s", res.code, res.stderr)
	}

	// A mode the QoS stage cannot run in is refused, with its line,
	// before anything changes, even with forwarding stopped.
	r.console("stop")
	r.writeConfig(strings.Replace(rigConfig(r.prefix, pcap, r.sock, "", ""), `mode = "roce"`, `mode = "io"`, 1))
	res = r.console("reload")
	if res.code != 1 || !strings.Contains(res.stderr, `rf.toml:13: pipeline.mode: "io": QoS scheduling needs the "roce" mode's classifier`) {
		t.Errorf("mode io with QoS: %d\n%s", res.code, res.stderr)
	}
	if min, _, _ := r.tc3(); min != 40_000 {
		t.Errorf("a refused reload changed TC3 ECN min to %d", min)
	}
	r.console("start")

	// SIGHUP: back to the preset's profile.
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "", ""))
	r.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.stderr.String(), "SIGHUP: config reloaded") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if min, max, _ := r.tc3(); min != 150_000 || max != 1_500_000 {
		t.Errorf("after SIGHUP TC3 ECN %d..%d\n%s", min, max, r.stderr.String())
	}

	// set commands edit the running config the same way.
	res = r.console("set", "qos", "ecn", "out", "3", "min", "20KB", "max", "200KB", "prob", "0.5")
	if res.code != 0 {
		t.Fatalf("set qos ecn: %s", res.stderr)
	}
	if min, max, _ := r.tc3(); min != 20_000 || max != 200_000 {
		t.Errorf("after set qos ecn: %d..%d", min, max)
	}
	if res := r.console("set", "pfc", "watchdog", "in", "3", "action", "alert"); res.code != 0 {
		t.Errorf("set pfc watchdog: %s", res.stderr)
	}
	res = r.console("show", "pfc", "in")
	if !strings.Contains(res.stdout, "on, alert") {
		t.Errorf("show pfc after set:\n%s", res.stdout)
	}
	if res := r.console("set", "pfc", "watchdog", "in", "0", "off"); res.code != 1 || !strings.Contains(res.stderr, "TC 0 of port in is lossy") {
		t.Errorf("watchdog on a lossy TC: %d %s", res.code, res.stderr)
	}
}

// startPTY runs cmd on a pseudo-terminal and returns it with a function
// that waits (up to 20 s) until the session shows want. A terminal has a
// width; readline completes only when it knows it.
func startPTY(t *testing.T, cmd *exec.Cmd, stderr *syncBuffer) (*os.File, func(want string)) {
	t.Helper()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 50, Cols: 200})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	out := &syncBuffer{}
	go io.Copy(out, tty)
	return tty, func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				log := ""
				if stderr != nil {
					log = stderr.String()
				}
				t.Fatalf("no %q in the session:\n%s\n%s", want, out.String(), log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The interactive console through a terminal: prompt, abbreviations,
// Tab completion, errors, quit leaving the daemon running.
func TestConsoleInteractivePTY(t *testing.T) {
	r := startDaemon(t, "", "")
	hist := filepath.Join(t.TempDir(), "hist")
	cmd := exec.Command(binary, "console", "--socket", r.sock, "--history", hist)
	tty, expect := startPTY(t, cmd, nil)
	expect("roce-fwd> ")
	io.WriteString(tty, "sh po su all\r")
	expect("Number of available ports: 2")
	// Tab completes "show po" to "show port " and "summ" to "summary ".
	io.WriteString(tty, "show po\tsumm\tall\r")
	expect("show port summary all")
	io.WriteString(tty, "show port stats 9\r")
	expect("Invalid port 9 (valid ports: 0 1)")
	io.WriteString(tty, "show lcores\r")
	expect("cycles/pkt")
	io.WriteString(tty, "quit\r")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("console exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("console did not quit")
	}
	// The daemon is still there.
	if res := r.console("show", "port", "summary", "all"); res.code != 0 {
		t.Errorf("daemon gone after the client quit: %s", res.stderr)
	}
	// The history persisted, for the next session's up-arrow.
	if h := string(readFileT(t, hist)); !strings.Contains(h, "sh po su all\n") || !strings.Contains(h, "show lcores\n") {
		t.Errorf("history file:\n%s", h)
	}
}

// /metrics parses as Prometheus text and carries the daemon's numbers;
// DPDK telemetry answers /roce/stats.
func TestTelemetry(t *testing.T) {
	r := startDaemon(t, "127.0.0.1:0", "")
	url := r.metricsURL()
	time.Sleep(200 * time.Millisecond)
	fams := scrapeMetrics(t, url)
	fwd := r.fwd()
	rx := fams["rocefwd_port_rx_packets_total"]
	if rx == nil {
		t.Fatalf("no rocefwd_port_rx_packets_total among %d families", len(fams))
	}
	for _, m := range rx.Metric {
		for _, l := range m.Label {
			if l.GetName() == "port" && l.GetValue() == "in" {
				v := uint64(m.GetCounter().GetValue())
				// Scraped before the show: positive and not above it.
				if v == 0 || v > fwd.Ports[0].RxPackets {
					t.Errorf("scraped rx %d, show says %d", v, fwd.Ports[0].RxPackets)
				}
			}
		}
	}
	for _, name := range []string{"rocefwd_drops_total", "rocefwd_qos_enqueued_packets_total", "rocefwd_pfc_rx_frames_total",
		"rocefwd_roce_cnp_frames_total", "rocefwd_lcore_busy_cycles_total"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}

	tool := "/usr/bin/dpdk-telemetry.py"
	if _, err := os.Stat(tool); err != nil {
		t.Skip("dpdk-telemetry.py not installed")
	}
	cmd := exec.Command(tool, "-f", r.prefix)
	cmd.Stdin = strings.NewReader("/roce/stats\n")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dpdk-telemetry.py: %v\n%s", err, outb)
	}
	if !strings.Contains(string(outb), `"/roce/stats"`) || !strings.Contains(string(outb), `"in"`) {
		t.Errorf("dpdk-telemetry.py /roce/stats:\n%s", outb)
	}
}

// run -i: the console on the daemon's own terminal; quit stops roce-fwd
// with its final statistics.
func TestRunInteractive(t *testing.T) {
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, "rf.toml", rigConfig(fmt.Sprintf("rf-con-%d-%s", os.Getpid(), t.Name()), pcap, filepath.Join(dir, "c.sock"), "", ""))
	cmd := exec.Command(binary, "run", "-i", "--config", cfg)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	tty, expect := startPTY(t, cmd, &stderr)
	expect("roce-fwd> ")
	io.WriteString(tty, "show config fwd\r")
	expect("RX P=0/Q=0 (in) -> TX P=1 (out)")
	io.WriteString(tty, "quit\r")
	expect("Forwarded for")
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v\n%s", err, stderr.String())
	}
}

// A second daemon configured with a live daemon's console socket refuses
// to start, naming the other's PID, before it takes any port; the first
// keeps its console.
func TestRunRefusesALiveConsoleSocket(t *testing.T) {
	r := startDaemon(t, "", "")
	second := run(t, "run", "--config", r.cfgPath, "--duration", "1s")
	want := fmt.Sprintf("another roce-fwd (pid %d) is listening on it", r.cmd.Process.Pid)
	if second.code != 1 || !strings.Contains(second.stderr, want) || strings.Contains(second.stderr, "starting EAL") {
		t.Errorf("second daemon: exit %d, stderr:\n%s\nwant exit 1 with %q before EAL", second.code, second.stderr, want)
	}
	if res := r.console("show", "fwd", "stats", "all"); res.code != 0 {
		t.Errorf("the first daemon's console after the refusal: exit %d: %s", res.code, res.stderr)
	}
}
