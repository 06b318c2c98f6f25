package main

// The systemd notify protocol end to end, without systemd: the test
// binds the unixgram socket systemd would, passes it as NOTIFY_SOCKET
// (with WATCHDOG_USEC) to a running daemon, and reads what it is told.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"roce-fwd/demotraffic"
)

// notifyWatchdog is the WATCHDOG_USEC the tests give: the daemon feeds
// the watchdog every 100 ms.
const notifyWatchdog = 200 * time.Millisecond

// notifyMsg is one datagram: its NAME=value lines.
type notifyMsg struct {
	at     time.Time
	fields map[string]string
	probe  bool // what notifySocket.probe said when it arrived
}

// notifySocket is systemd's end of NOTIFY_SOCKET.
type notifySocket struct {
	path  string
	mu    sync.Mutex  // guards probe and msgs: the listener reads one and appends to the other
	probe func() bool // called as each datagram arrives
	msgs  []notifyMsg
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock"), probe: func() bool { return false }}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			probe := n.probe // set by the test while this goroutine runs
			n.mu.Unlock()
			m := notifyMsg{at: time.Now(), fields: map[string]string{}, probe: probe()}
			for _, line := range strings.Split(strings.TrimSpace(string(buf[:k])), "\n") {
				name, value, _ := strings.Cut(line, "=")
				m.fields[name] = value
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, m)
			n.mu.Unlock()
		}
	}()
	return n
}

func (n *notifySocket) all() []notifyMsg {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notifyMsg(nil), n.msgs...)
}

func (n *notifySocket) len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.msgs)
}

// waitFor returns the index of the first message from index from on
// that has field name (with a value matching re, when re is not nil).
func (n *notifySocket) waitFor(t *testing.T, from int, d time.Duration, name string, re *regexp.Regexp) (int, notifyMsg) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		msgs := n.all()
		for i := from; i < len(msgs); i++ {
			if v, ok := msgs[i].fields[name]; ok && (re == nil || re.MatchString(v)) {
				return i, msgs[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s=%v within %v of message %d; got:\n%s", name, re, d, from, n.dump(from))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// count is how many messages from index from on have field name.
func (n *notifySocket) count(from int, name string) int {
	c := 0
	for _, m := range n.all()[from:] {
		if _, ok := m.fields[name]; ok {
			c++
		}
	}
	return c
}

func (n *notifySocket) dump(from int) string {
	var b strings.Builder
	for i, m := range n.all() {
		if i >= from {
			fmt.Fprintf(&b, "  %d %s %v\n", i, m.at.Format("15:04:05.000"), m.fields)
		}
	}
	return b.String()
}

// startNotifyDaemon runs the daemon with config (given the file prefix
// and console socket) under the notify socket n.
func startNotifyDaemon(t *testing.T, n *notifySocket, config func(prefix, sock string) string) *daemonRig {
	t.Helper()
	dir := t.TempDir()
	r := &daemonRig{t: t, sock: filepath.Join(dir, "ctl", "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-con-%d-%s", os.Getpid(), t.Name()), stderr: &syncBuffer{}}
	r.writeConfig(config(r.prefix, r.sock))
	n.mu.Lock()
	n.probe = func() bool {
		_, err := os.Stat(r.sock)
		return err == nil
	}
	n.mu.Unlock()
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath)
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "NOTIFY_SOCKET=") && !strings.HasPrefix(e, "WATCHDOG_") {
			r.cmd.Env = append(r.cmd.Env, e)
		}
	}
	r.cmd.Env = append(r.cmd.Env, "NOTIFY_SOCKET="+n.path, fmt.Sprintf("WATCHDOG_USEC=%d", notifyWatchdog.Microseconds()))
	r.launch()
	return r
}

func monotonicUsec(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano() / 1000
}

// watchdogsIn counts the WATCHDOG=1 that arrive within d from now.
func (n *notifySocket) watchdogsIn(d time.Duration) int {
	from := n.len()
	time.Sleep(d)
	return n.count(from, "WATCHDOG")
}

var rateStatus = regexp.MustCompile(`^forwarding [0-9]+\.[0-9]{2} Mpps in roce mode on 2 ports, [0-9]+ drops/s$`)

// READY=1 once the daemon is up (its console socket already there),
// STATUS= with the rate, RELOADING=1 (with MONOTONIC_USEC=) then READY=1
// around a console reload, a SIGHUP reload and a refused reload,
// WATCHDOG=1 every WATCHDOG_USEC/2 while forwarding and while parked by
// the console's stop, and STOPPING=1 at SIGINT, after which nothing.
func TestNotifyLifecycle(t *testing.T) {
	n := listenNotify(t)
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	var prefix, sock string
	cfg := func(extra string) string { return rigConfig(prefix, pcap, sock, "", extra) }
	r := startNotifyDaemon(t, n, func(p, s string) string {
		prefix, sock = p, s
		return cfg("")
	})

	_, ready := n.waitFor(t, 0, 10*time.Second, "READY", nil)
	first := n.all()[0]
	if first.fields["READY"] != "1" || first.fields["STATUS"] != "forwarding in roce mode on 2 ports" {
		t.Errorf("first notification %v, want READY=1 with the mode and ports", first.fields)
	}
	if !ready.probe {
		t.Errorf("READY=1 arrived before the console socket %s existed", r.sock)
	}
	if !strings.Contains(r.stderr.String(), "worker started") {
		t.Errorf("no worker started before the console opened:\n%s", r.stderr.String())
	}
	if got := n.watchdogsIn(time.Second); got < 3 {
		t.Errorf("%d WATCHDOG=1 in 1s while forwarding, want about 10 (every %v)", got, notifyWatchdog/2)
	}
	_, st := n.waitFor(t, 0, 15*time.Second, "STATUS", rateStatus)
	if mpps, _ := strconv.ParseFloat(strings.Fields(st.fields["STATUS"])[1], 64); mpps <= 0 {
		t.Errorf("status %q: no packets forwarded", st.fields["STATUS"])
	}

	reload := func(how string, trigger func(), status string) {
		t.Helper()
		from := n.len()
		before := monotonicUsec(t)
		trigger()
		i, m := n.waitFor(t, from, 10*time.Second, "RELOADING", nil)
		after := monotonicUsec(t)
		if m.fields["RELOADING"] != "1" {
			t.Errorf("%s: %v", how, m.fields)
		}
		if us, err := strconv.ParseInt(m.fields["MONOTONIC_USEC"], 10, 64); err != nil || us < before || us > after {
			t.Errorf("%s: MONOTONIC_USEC=%q, want CLOCK_MONOTONIC between %d and %d", how, m.fields["MONOTONIC_USEC"], before, after)
		}
		j, m := n.waitFor(t, from, 10*time.Second, "READY", nil)
		if j < i {
			t.Errorf("%s: READY=1 before RELOADING=1:\n%s", how, n.dump(from))
		}
		if m.fields["READY"] != "1" || !strings.HasPrefix(m.fields["STATUS"], status) {
			t.Errorf("%s: after RELOADING=1 got %v, want READY=1 and STATUS=%s...", how, m.fields, status)
		}
	}
	r.writeConfig(cfg("[roce]\nverify_icrc = true\n"))
	reload("console reload", func() {
		if res := r.console("reload"); res.code != 0 {
			t.Errorf("reload: %d %s%s", res.code, res.stdout, res.stderr)
		}
	}, "config reloaded: 1 changes")
	r.writeConfig(cfg("[roce]\nverify_icrc = false\n"))
	reload("SIGHUP", func() { r.cmd.Process.Signal(syscall.SIGHUP) }, "config reloaded: 1 changes")
	r.writeConfig(cfg("[roce]\nverify_icrc = maybe\n"))
	reload("refused reload", func() {
		if res := r.console("reload"); res.code == 0 {
			t.Errorf("reload of a bad config succeeded: %s", res.stdout)
		}
	}, "config not reloaded: ")

	// Parked workers are not stuck.
	from := n.len()
	if res := r.console("stop"); res.code != 0 {
		t.Fatalf("stop: %d %s", res.code, res.stderr)
	}
	n.waitFor(t, from, 5*time.Second, "STATUS", regexp.MustCompile(`^forwarding stopped`))
	if got := n.watchdogsIn(time.Second); got < 3 {
		t.Errorf("%d WATCHDOG=1 in 1s while forwarding is stopped, want about 10", got)
	}
	if res := r.console("start"); res.code != 0 {
		t.Fatalf("start: %d %s", res.code, res.stderr)
	}
	if got := n.watchdogsIn(time.Second); got < 3 {
		t.Errorf("%d WATCHDOG=1 in 1s after start, want about 10", got)
	}

	r.stop()
	i, _ := n.waitFor(t, 0, 5*time.Second, "STOPPING", nil)
	time.Sleep(100 * time.Millisecond)
	if msgs := n.all(); len(msgs) != i+1 {
		t.Errorf("notifications after STOPPING=1:\n%s", n.dump(i))
	}
}

// A worker stuck inside its PMD: its rx queue reads a FIFO that stops
// being written, so rte_eth_rx_burst blocks in read(2). WATCHDOG=1 stops
// (STATUS says which lcore) and comes back once the worker polls again.
// The stall costs the daemon no test hook.
func TestNotifyWatchdogStalledWorker(t *testing.T) {
	n := listenNotify(t)
	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pcap)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "in.fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Read-write: the open does not wait for a reader, and the pipe (with
	// the header in it) outlives the config check's open and close.
	f, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data[:24]); err != nil { // the pcap file header
		t.Fatal(err)
	}
	stall := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for {
			select {
			case <-stall:
				return
			default:
			}
			if _, err := f.Write(data[24:]); err != nil {
				return
			}
		}
	}()
	r := startNotifyDaemon(t, n, func(prefix, sock string) string {
		return inOutConfig(noHugeEAL(prefix), "net_pcap0,rx_pcap="+fifo, fmt.Sprintf(`[pipeline]
mode = "io"
[console]
socket = %q
history = ""
`, sock))
	})
	// Before the daemon stops: a worker blocked in read(2) never would.
	t.Cleanup(func() {
		f.Close()
		<-fed
	})

	n.waitFor(t, 0, 10*time.Second, "READY", nil)
	if got := n.watchdogsIn(time.Second); got < 3 {
		t.Fatalf("%d WATCHDOG=1 in 1s while fed, want about 10", got)
	}
	close(stall)
	<-fed
	i, m := n.waitFor(t, 0, 10*time.Second, "STATUS", regexp.MustCompile(`^stuck: lcore 1 not polling`))
	t.Logf("stalled: %s", m.fields["STATUS"])
	if got := n.watchdogsIn(2 * time.Second); got != 0 {
		t.Errorf("%d WATCHDOG=1 while lcore 1 is stuck, want none:\n%s", got, n.dump(i))
	}
	if !strings.Contains(r.stderr.String(), "worker lcores stopped polling") {
		t.Errorf("the stall is not logged:\n%s", r.stderr.String())
	}

	// End of file: the worker polls (empty) again.
	from := n.len()
	f.Close()
	n.waitFor(t, from, 10*time.Second, "STATUS", regexp.MustCompile(`^forwarding in io mode on 2 ports$`))
	if got := n.watchdogsIn(time.Second); got < 3 {
		t.Errorf("%d WATCHDOG=1 in 1s after the worker came back, want about 10", got)
	}
	r.stop()
	n.waitFor(t, 0, 5*time.Second, "STOPPING", nil)
}
