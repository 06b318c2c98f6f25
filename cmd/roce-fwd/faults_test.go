package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"roce-fwd/console"
	"roce-fwd/demotraffic"
)

// Fault injection against the daemon binary: ports stopped and started,
// reload and flow storms, SIGKILL and restart, a console client that
// stops reading. After each, every packet received must have left, be
// counted under a drop reason, or still be queued.

// faultReport is what these tests read of the report (show fwd stats
// all --json and the --stats-json file have the same shape).
type faultReport struct {
	Ports []struct {
		Name      string `json:"name"`
		RxPackets uint64 `json:"rx_packets"`
		TxPackets uint64 `json:"tx_packets"`
	} `json:"ports"`
	Lcores []struct {
		Packets uint64 `json:"packets"`
	} `json:"lcores"`
	Drops     map[string]uint64 `json:"drops"`
	Queued    uint64            `json:"queued"`
	Generated uint64            `json:"generated"`
}

// unaccounted checks the invariant: received (+ PFC frames generated) =
// transmitted + drops + queued, and every packet received reached a
// worker. It is exact only with forwarding stopped.
func (s faultReport) unaccounted() error {
	var rx, tx, drops, handled uint64
	for _, p := range s.Ports {
		rx += p.RxPackets
		tx += p.TxPackets
	}
	for _, v := range s.Drops {
		drops += v
	}
	for _, l := range s.Lcores {
		handled += l.Packets
	}
	if len(s.Drops) == 0 || len(s.Lcores) == 0 {
		return fmt.Errorf("report lacks drops or lcores: %+v", s)
	}
	if rx+s.Generated != tx+drops+s.Queued || handled != rx {
		return fmt.Errorf("received %d, generated %d, workers handled %d, transmitted %d, dropped %d, queued %d: %d unaccounted (drops %v)",
			rx, s.Generated, handled, tx, drops, s.Queued, int64(rx+s.Generated)-int64(tx+drops+s.Queued), nonZero(s.Drops))
	}
	return nil
}

func (s faultReport) port(name string) (rx, tx uint64) {
	for _, p := range s.Ports {
		if p.Name == name {
			return p.RxPackets, p.TxPackets
		}
	}
	return 0, 0
}

func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// checkCleanExit checks a stopped daemon's final report for unaccounted
// packets and that its clean stop left nothing behind; it returns the
// report.
func checkCleanExit(t *testing.T, r *daemonRig, statsPath string) faultReport {
	t.Helper()
	s := readFaultReport(t, statsPath)
	if err := s.unaccounted(); err != nil {
		t.Errorf("at exit: %v", err)
	}
	if l := leftovers(r.prefix, r.sock); len(l) != 0 {
		t.Errorf("left behind after a clean stop: %v", l)
	}
	return s
}

func readFaultReport(t *testing.T, path string) faultReport {
	t.Helper()
	var s faultReport
	if err := json.Unmarshal(readFileT(t, path), &s); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return s
}

// newFaultRig is the console rig (rigConfig) under a "fault" file prefix,
// not yet started: cfg renders its config with extra appended.
func newFaultRig(t *testing.T) (r *daemonRig, cfg func(extra string) string) {
	t.Helper()
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	r = &daemonRig{t: t, sock: filepath.Join(dir, "ctl", "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-fault-%d-%s", os.Getpid(), t.Name()), stderr: &syncBuffer{}}
	return r, func(extra string) string { return rigConfig(r.prefix, pcap, r.sock, "", extra) }
}

// runFaultRig starts r with --stats-json into its directory.
func runFaultRig(r *daemonRig) (statsPath string) {
	statsPath = filepath.Join(filepath.Dir(r.cfgPath), "stats.json")
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath, "--stats-json", statsPath)
	r.launch()
	return statsPath
}

// dialT opens a console connection: one connection carries any number
// of commands, without a process per command.
func dialT(t *testing.T, sock string) *console.Client {
	t.Helper()
	cl, err := console.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func execT(t *testing.T, cl *console.Client, line string) string {
	t.Helper()
	out, err := cl.Exec(line, false)
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return out
}

func reportT(t *testing.T, cl *console.Client, line string) faultReport {
	t.Helper()
	out, err := cl.Exec(line, true)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var s faultReport
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	return s
}

// waitTx waits until port out has sent more than from: forwarding runs.
func waitTx(t *testing.T, cl *console.Client, port string, from uint64) uint64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, tx := reportT(t, cl, "show fwd stats all").port(port)
		if tx > from {
			return tx
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %s sent nothing more than %d in 10 s: forwarding did not resume", port, from)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// leftovers lists what a daemon under prefix with console socket sock
// left behind: the socket and EAL's runtime directory.
func leftovers(prefix, sock string) []string {
	var out []string
	if _, err := os.Lstat(sock); err == nil {
		out = append(out, sock)
	}
	for _, base := range []string{"/var/run/dpdk", filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "dpdk"), "/tmp/dpdk"} {
		d := filepath.Join(base, prefix)
		if ents, err := os.ReadDir(d); err == nil {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			out = append(out, fmt.Sprintf("%s %v", d, names))
		}
	}
	return out
}

// processesWith lists the processes whose command line holds s.
func processesWith(s string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), s) {
			out = append(out, filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// A table swap the worker did not take in time, in the daemon's words.
var swapTimeout = regexp.MustCompile(`(?i)time ?out|timed out|did not (take|finish)`)

// Ports stopped and started again and again under traffic: each start
// resumes forwarding, the counters add up exactly at every stop and at
// exit, and SIGINT still exits 0.
func TestFaultPortStopStartUnderTraffic(t *testing.T) {
	r, cfg := newFaultRig(t)
	r.writeConfig(cfg(""))
	statsPath := runFaultRig(r)
	cl := dialT(t, r.sock)

	// The workers poll every port: a port stops only with forwarding
	// stopped.
	if out, err := cl.Exec("port stop 1", false); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("port stop while forwarding: %q, %v", out, err)
	}
	tx := waitTx(t, cl, "out", 0)
	for i := range 20 {
		which := "1"
		if i%5 == 4 {
			which = "all"
		}
		rep := reportT(t, cl, "stop")
		if err := rep.unaccounted(); err != nil {
			t.Fatalf("round %d, after stop: %v", i, err)
		}
		if rep.Queued != 0 {
			t.Errorf("round %d: %d packets queued after stop", i, rep.Queued)
		}
		execT(t, cl, "port stop "+which)
		if _, err := cl.Exec("start", false); err == nil || !strings.Contains(err.Error(), "is stopped: start it first") {
			t.Fatalf("round %d: start with port %s stopped: %v", i, which, err)
		}
		if out := execT(t, cl, "show port summary all"); !strings.Contains(out, "stopped") {
			t.Errorf("round %d: port %s stopped, summary:\n%s", i, which, out)
		}
		// Nothing moves while the port is down.
		_, txStop := rep.port("out")
		if _, got := reportT(t, cl, "show fwd stats all").port("out"); got != txStop {
			t.Errorf("round %d: out sent %d while stopped, %d at stop", i, got, txStop)
		}
		execT(t, cl, "port start "+which)
		execT(t, cl, "start")
		tx = waitTx(t, cl, "out", txStop)
	}
	r.stop()
	if t.Failed() {
		return
	}
	s := checkCleanExit(t, r, statsPath)
	if _, out := s.port("out"); out < tx {
		t.Errorf("at exit out sent %d, earlier %d", out, tx)
	}
	t.Logf("out sent %d; drops %v", tx, nonZero(s.Drops))
}

// ecnBlock is a [[qos.port]] that reload applies live: TC3's ECN range.
func ecnBlock(minKB int) string {
	return fmt.Sprintf(`[[qos.port]]
name = "out"
[[qos.port.tc]]
tc = 3
ecn = { min = "%dKB", max = "%dKB", probability = 0.2 }
`, minKB, minKB*10)
}

// A storm of 1000 changes under traffic, from two clients at once:
// software flow rules created and destroyed, and live reloads of the
// ECN profile. Every command succeeds, no table swap times out, the
// rules in force are those the test left, forwarding still runs and the
// counters add up at exit.
func TestFaultReloadAndFlowStormUnderTraffic(t *testing.T) {
	r, cfg := newFaultRig(t)
	r.writeConfig(cfg(ecnBlock(40)))
	statsPath := runFaultRig(r)
	flows, reloads := dialT(t, r.sock), dialT(t, r.sock)
	tx := waitTx(t, flows, "out", 0)

	const nFlow, nReload = 600, 400
	// Counting, marking, rewriting and dropping rules; the drop wins
	// whenever the rules of higher priority are gone.
	rules := []string{
		"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end",
		"flow create 0 ingress priority 1 pattern eth / ipv4 / end actions mark id 7 / count / end",
		"flow create 1 egress pattern eth / end actions count / end",
		"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions set_ipv4_dscp dscp_value 26 / count / end",
		"flow create 0 ingress priority 2 pattern eth / ipv4 / udp / end actions drop / end",
	}
	created := regexp.MustCompile(`^Flow rule #(\d+) created\n`)
	type live struct{ port, id string }
	var alive []live // the rules the test believes exist, oldest first
	var slowest [2]time.Duration
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range nFlow {
			var line, want string
			if len(alive) < 4 && (i%3 != 2 || len(alive) == 0) {
				line = rules[i%len(rules)]
			} else {
				victim := alive[0]
				alive = alive[1:]
				line = fmt.Sprintf("flow destroy %s rule %s", victim.port, victim.id)
				want = fmt.Sprintf("Flow rule #%s destroyed\n", victim.id)
			}
			t0 := time.Now()
			out, err := flows.Exec(line, false)
			slowest[0] = max(slowest[0], time.Since(t0))
			if err != nil {
				t.Errorf("flow op %d: %s: %v\n%s", i, line, err, out)
				return
			}
			if want == "" {
				m := created.FindStringSubmatch(out)
				if m == nil {
					t.Errorf("flow op %d: %s:\n%s", i, line, out)
					return
				}
				alive = append(alive, live{strings.Fields(line)[2], m[1]})
			} else if out != want {
				t.Errorf("flow op %d: %s: %q, want %q", i, line, out, want)
				return
			}
		}
	}()
	lastMin := 40
	go func() {
		defer wg.Done()
		for i := range nReload {
			minKB := 20 + (i%9)*10
			if minKB == lastMin {
				minKB += 5
			}
			// Not r.writeConfig: Fatal belongs to the test's goroutine.
			if err := os.WriteFile(r.cfgPath, []byte(cfg(ecnBlock(minKB))), 0o644); err != nil {
				t.Error(err)
				return
			}
			t0 := time.Now()
			out, err := reloads.Exec("reload", false)
			slowest[1] = max(slowest[1], time.Since(t0))
			want := fmt.Sprintf(`qos.port[0].tc[0].ecn.min: "%dKB" → "%dKB"`, lastMin, minKB)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("reload %d: %v\n%s\nwant %s", i, err, out, want)
				return
			}
			lastMin = minKB
		}
	}()
	wg.Wait()
	t.Logf("%d flow operations and %d reloads in %v; slowest flow operation %v, slowest reload %v",
		nFlow, nReload, time.Since(start).Round(time.Millisecond), slowest[0], slowest[1])
	if t.Failed() {
		return
	}

	// The daemon's rules are those the test left.
	var got []string
	for _, port := range []string{"0", "1"} {
		var list []struct {
			ID uint32 `json:"id"`
		}
		out, err := flows.Exec("flow list "+port, true)
		if err != nil || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("flow list %s: %v\n%s", port, err, out)
		}
		for _, e := range list {
			got = append(got, fmt.Sprintf("%s/%d", port, e.ID))
		}
	}
	var want []string
	for _, port := range []string{"0", "1"} {
		for _, a := range alive {
			if a.port == port {
				want = append(want, a.port+"/"+a.id)
			}
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("rules in the daemon %v, want %v", got, want)
	}
	// The last reload is in force.
	if min, max, _ := r.tc3(); min != uint64(lastMin)*1000 || max != uint64(lastMin)*10000 {
		t.Errorf("TC3 ECN %d..%d after the storm, last reload %dKB", min, max, lastMin)
	}
	execT(t, flows, "flow flush 0")
	execT(t, flows, "flow flush 1")
	tx = waitTx(t, flows, "out", tx)
	_, tx0 := reportT(t, flows, "show fwd stats all").port("out")
	waitTx(t, flows, "out", tx0)
	if m := swapTimeout.FindString(r.stderr.String()); m != "" {
		t.Errorf("the daemon's log says %q:\n%s", m, r.stderr.String())
	}
	r.stop()
	if t.Failed() {
		return
	}
	s := checkCleanExit(t, r, statsPath)
	t.Logf("drops %v", nonZero(s.Drops))
}

// Where TestFaultSIGKILLAndRestart kills the daemon.
var killPoints = []string{"starting", "running", "reloading", "stopping"}

// SIGKILL at a random point of the daemon's life, then a restart with
// the same config: the restart copes with the stale console socket and
// EAL runtime files, forwards, adds up and stops cleanly, leaving
// nothing behind. ROCE_FWD_FAULTS=1 runs 50 iterations instead of 5;
// ROCE_FWD_SEED replays a seed.
func TestFaultSIGKILLAndRestart(t *testing.T) {
	n := 5
	if os.Getenv("ROCE_FWD_FAULTS") == "1" {
		n = 50
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("ROCE_FWD_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseInt(s, 10, 64); err != nil {
			t.Fatalf("ROCE_FWD_SEED=%q: %v", s, err)
		}
	}
	t.Logf("seed %d (ROCE_FWD_SEED=%d replays it), %d iterations", seed, seed, n)
	rng := rand.New(rand.NewSource(seed))
	base, cfg := newFaultRig(t)
	base.writeConfig(cfg(ecnBlock(40)))
	statsPath := filepath.Join(filepath.Dir(base.cfgPath), "stats.json")

	var order []int
	for i := range n {
		if i%len(killPoints) == 0 {
			order = append(order, rng.Perm(len(killPoints))...)
		}
		point := killPoints[order[i]]
		victim := exec.Command(binary, "run", "--config", base.cfgPath, "--stats-json", statsPath)
		log := &syncBuffer{}
		victim.Stderr = log
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		listening := func() bool {
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(log.String(), "console listening") {
				if time.Now().After(deadline) {
					return false
				}
				time.Sleep(5 * time.Millisecond)
			}
			return true
		}
		var delay time.Duration
		var conn net.Conn // the reload's, open until the daemon is dead
		switch point {
		case "starting":
			// Startup takes 0.3 to 1 s here: from before EAL to the console.
			delay = time.Duration(rng.Intn(400)) * time.Millisecond
			time.Sleep(delay)
		case "running":
			if !listening() {
				victim.Process.Kill()
				t.Fatalf("iteration %d: the daemon did not start:\n%s", i, log.String())
			}
			delay = time.Duration(rng.Intn(300)) * time.Millisecond
			time.Sleep(delay)
		case "reloading":
			if !listening() {
				victim.Process.Kill()
				t.Fatalf("iteration %d: the daemon did not start:\n%s", i, log.String())
			}
			base.writeConfig(cfg(ecnBlock(50 + 10*rng.Intn(10))))
			var err error
			if conn, err = net.Dial("unix", base.sock); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write([]byte(`{"line":"reload"}` + "\n")); err != nil {
				t.Fatal(err)
			}
			delay = time.Duration(rng.Intn(3000)) * time.Microsecond
			time.Sleep(delay)
		case "stopping":
			if !listening() {
				victim.Process.Kill()
				t.Fatalf("iteration %d: the daemon did not start:\n%s", i, log.String())
			}
			victim.Process.Signal(syscall.SIGINT)
			delay = time.Duration(rng.Intn(100)) * time.Millisecond
			time.Sleep(delay)
		}
		victim.Process.Kill()
		done := make(chan error, 1)
		go func() { done <- victim.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("iteration %d: the daemon did not die of SIGKILL", i)
		}
		if conn != nil {
			conn.Close()
		}
		stale := leftovers(base.prefix, base.sock)
		stage := "before EAL"
		for _, s := range []string{"starting EAL", "worker started", "console listening", "config change applied", "stopping"} {
			if strings.Contains(log.String(), s) {
				stage = s
			}
		}
		t.Logf("iteration %d: SIGKILL %s after %v (%s, %s); left %v", i, point, delay, stage, victim.ProcessState, stale)
		if point == "running" && len(stale) != 2 {
			// SIGKILL cannot clean up: the restart must meet both.
			t.Errorf("iteration %d: SIGKILL of a running daemon left %v, want its socket and runtime directory", i, stale)
		}

		// The operator's restart, with the same config.
		r := &daemonRig{t: t, sock: base.sock, cfgPath: base.cfgPath, prefix: base.prefix, stderr: &syncBuffer{}}
		os.Remove(statsPath)
		runFaultRig(r)
		if len(stale) > 0 && stale[0] == base.sock && !strings.Contains(r.stderr.String(), "removed a stale console socket") {
			t.Errorf("iteration %d: the restart does not say it replaced the stale socket:\n%s", i, r.stderr.String())
		}
		a := r.fwd()
		deadline := time.Now().Add(10 * time.Second)
		for b := r.fwd(); b.Ports[1].TxPackets <= a.Ports[1].TxPackets; b = r.fwd() {
			if time.Now().After(deadline) {
				t.Fatalf("iteration %d: the restarted daemon does not forward: %+v", i, b.Ports)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r.stop() // fails the test unless it exits 0 and removes its socket
		if ps := r.cmd.ProcessState; ps == nil || !ps.Success() {
			t.Fatalf("iteration %d: the restarted daemon did not stop cleanly", i)
		}
		if err := readFaultReport(t, statsPath).unaccounted(); err != nil {
			t.Errorf("iteration %d: the restarted daemon at exit: %v", i, err)
		}
		if l := leftovers(base.prefix, base.sock); len(l) != 0 {
			t.Fatalf("iteration %d: the restarted daemon left behind after its clean stop: %v", i, l)
		}
	}
	if p := processesWith(base.cfgPath); len(p) != 0 {
		t.Errorf("processes left: %v", p)
	}
}

// routedConfig routes a capture replayed on port in by a default route
// via up0, or via up0 and up1 (ecmp); up0 and up1 are null ports with
// static neighbours.
func routedConfig(prefix, pcap, sock string, ecmp bool) string {
	via := `{ port = "up0", gateway = "192.168.0.2" }`
	if ecmp {
		via += `, { port = "up1", gateway = "192.168.1.2" }`
	}
	return fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s,infinite_rx=1"
addresses = ["172.16.0.1/24"]
[[port]]
name = "up0"
vdev = "net_null0,no-rx=1"
addresses = ["192.168.0.1/24"]
[[port]]
name = "up1"
vdev = "net_null1,no-rx=1"
addresses = ["192.168.1.1/24"]
[pipeline]
mode = "roce"
[[route]]
prefix = "0.0.0.0/0"
via = [%s]
[[neighbor]]
port = "up0"
ip = "192.168.0.2"
mac = "b8:ce:f6:00:00:02"
[[neighbor]]
port = "up1"
ip = "192.168.1.2"
mac = "b8:ce:f6:00:01:02"
[console]
socket = %q
history = ""
`, noHugeEAL(prefix), pcap, via, sock)
}

// A console client that sends a command with a multi-megabyte answer
// (show ip fib of 100k routes) and never reads it stalls only itself:
// another client's commands are answered promptly, the worker forwards,
// the daemon survives the client hanging up mid-answer and stops
// cleanly with a client still stalled and another one busy.
func TestFaultConsoleClientStall(t *testing.T) {
	r, _ := newFaultRig(t)
	dir := filepath.Dir(r.cfgPath)
	r.writeConfig(routedConfig(r.prefix, filepath.Join(dir, "demo.pcap"), r.sock, false))
	statsPath := runFaultRig(r)
	cl := dialT(t, r.sock)

	var lines []string
	for i := range 100000 {
		lines = append(lines, fmt.Sprintf("%d.%d.%d.0/24 via 192.168.1.2 port up1", 11+i>>16, i>>8&255, i&255))
	}
	routes := filepath.Join(dir, "routes.txt")
	if err := os.WriteFile(routes, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	execT(t, cl, "route load "+routes)

	// Two stalled clients: the first hangs up unread, the second is read
	// at the end to show its answer was pending all along.
	stall := func() net.Conn {
		c, err := net.Dial("unix", r.sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte(`{"line":"show ip fib"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		return c
	}
	hangUp, slow := stall(), stall()

	rx := func() uint64 { in, _ := reportT(t, cl, "show fwd stats all").port("in"); return in }
	last := rx()
	var slowest time.Duration
	var slowestLine string
	for i := range 5 {
		// Commands on the other client answer within a few seconds.
		for _, line := range []string{"show fwd stats all", "show ip fib 12.134.159.77",
			fmt.Sprintf("route add 198.18.%d.0/24 via 192.168.1.2 port up1", i), "show ip fib 198.18.0.0/16"} {
			t0 := time.Now()
			out := execT(t, cl, line)
			el := time.Since(t0)
			if el > slowest {
				slowest, slowestLine = el, line
			}
			if el > 3*time.Second {
				t.Errorf("%s took %v with a stalled client", line, el)
			}
			if line == "show ip fib 12.134.159.77" && !strings.Contains(out, "12.134.159.0/24") {
				t.Errorf("%s:\n%s", line, out)
			}
		}
		// A new client process connects and is served too.
		t0 := time.Now()
		if res := r.console("show", "port", "summary", "all"); res.code != 0 || !strings.Contains(res.stdout, "up1") || time.Since(t0) > 5*time.Second {
			t.Errorf("a new console client: exit %d after %v: %s", res.code, time.Since(t0), res.stderr)
		}
		// And the worker keeps forwarding.
		deadline := time.Now().Add(5 * time.Second)
		for now := rx(); now <= last; now = rx() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: in received nothing more than %d with a stalled client", i, last)
			}
			time.Sleep(20 * time.Millisecond)
		}
		last = rx()
	}
	t.Logf("slowest command with two stalled clients: %s, %v", slowestLine, slowest)

	// The first hangs up in the middle of its answer.
	hangUp.Close()
	execT(t, cl, "show fwd stats all")
	// The second's answer was pending: megabytes no socket buffer holds.
	slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	in := bufio.NewReaderSize(slow, 1<<20)
	line, err := in.ReadBytes('\n')
	var rep struct {
		Output string `json:"output"`
		Error  string `json:"error"`
	}
	if err != nil || json.Unmarshal(line, &rep) != nil || rep.Error != "" || !strings.Contains(rep.Output, "12.134.159.0/24") {
		t.Fatalf("the stalled client's answer (%d bytes): %v %s", len(line), err, rep.Error)
	}
	if len(line) < 2<<20 {
		t.Errorf("the stalled answer was %d bytes: too small to have stalled the server", len(line))
	}
	// Stalled again at the stop, with another client busy: the daemon
	// still stops cleanly and promptly.
	if _, err := slow.Write([]byte(`{"line":"show ip fib"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int64
	busyDone := make(chan error, 1)
	go func() {
		busy, err := console.Dial(r.sock)
		if err != nil {
			busyDone <- err
			return
		}
		defer busy.Close()
		for {
			if _, err := busy.Exec("show fwd stats all", true); err != nil {
				busyDone <- err
				return
			}
			answered.Add(1)
		}
	}()
	// SIGINT while the busy client is under way: its commands meet the
	// daemon stopping.
	deadline := time.Now().Add(10 * time.Second)
	for answered.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if answered.Load() < 5 {
		t.Fatalf("the busy client had %d answers in 10 s", answered.Load())
	}
	t0 := time.Now()
	r.stop()
	// The busy client is hung up on, not answered with an error.
	if err := <-busyDone; !errors.Is(err, console.ErrDisconnected) {
		t.Errorf("the busy client during the stop: %v", err)
	}
	t.Logf("stopped in %v with a stalled client and a busy one (%d answers)", time.Since(t0), answered.Load())
	if t.Failed() {
		return
	}
	checkCleanExit(t, r, statsPath)
}
