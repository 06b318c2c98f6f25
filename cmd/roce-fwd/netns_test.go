package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"roce-fwd/internal/testenv"
)

// netnsRig is roce-fwd between two hosts, each a network namespace with
// its own kernel stack: host A — veth — roce-fwd — veth — host B, with
// roce-fwd and its exception-path TAPs in a namespace of their own.
type netnsRig struct {
	t          *testing.T
	a, b, r    string // namespaces
	aIf, bIf   string // roce-fwd's ends of the veths
	dir        string
	daemon     *daemonRig
	namespaces []string
}

// ns runs a command in a namespace and returns its output.
func (n *netnsRig) ns(name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", name}, args...)...).CombinedOutput()
	return string(out), err
}

func (n *netnsRig) must(name string, args ...string) {
	n.t.Helper()
	if out, err := n.ns(name, args...); err != nil {
		n.t.Fatalf("%s: %v: %v\n%s", name, args, err, out)
	}
}

// newNetnsRig makes the namespaces and veths, or skips the test where
// that is not allowed.
func newNetnsRig(t *testing.T) *netnsRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2's ip is not installed")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun: the exception path's TAPs cannot be made")
	}
	id := os.Getpid() % 100000
	n := &netnsRig{t: t, a: fmt.Sprintf("rfA%d", id), b: fmt.Sprintf("rfB%d", id), r: fmt.Sprintf("rfR%d", id),
		aIf: fmt.Sprintf("rfa%d", id), bIf: fmt.Sprintf("rfb%d", id), dir: t.TempDir()}
	t.Cleanup(n.cleanup)
	for _, ns := range []string{n.a, n.b, n.r} {
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot make network namespaces here: %v: %s", err, out)
		}
		n.namespaces = append(n.namespaces, ns)
		n.must(ns, "ip", "link", "set", "lo", "up")
	}
	for _, side := range []struct{ host, ifc, addr, gw, addr6, gw6 string }{
		{n.a, n.aIf, "10.71.1.2/24", "10.71.1.1", "fd71:1::2/64", "fd71:1::1"},
		{n.b, n.bIf, "10.71.2.2/24", "10.71.2.1", "fd71:2::2/64", "fd71:2::1"},
	} {
		if out, err := exec.Command("ip", "link", "add", "h0", "netns", side.host, "type", "veth", "peer", "name", side.ifc, "netns", n.r).CombinedOutput(); err != nil {
			t.Fatalf("veth: %v: %s", err, out)
		}
		n.must(side.host, "ip", "addr", "add", side.addr, "dev", "h0")
		n.must(side.host, "ip", "link", "set", "h0", "up")
		n.must(side.host, "ip", "route", "add", "default", "via", side.gw)
		n.must(side.host, "ip", "addr", "add", side.addr6, "dev", "h0", "nodad")
		n.must(side.host, "ip", "-6", "route", "add", "default", "via", side.gw6)
		n.must(n.r, "ip", "link", "set", side.ifc, "up")
	}
	// The kernel beside roce-fwd forwards what the data path punts to it
	// while a neighbour is being resolved. The veths roce-fwd's
	// af_packet ports read are roce-fwd's: the kernel must not also
	// route what arrives on them (it would send every packet twice).
	n.must(n.r, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
	for _, ifc := range []string{n.aIf, n.bIf} {
		n.must(n.r, "sysctl", "-qw", "net.ipv4.conf."+ifc+".forwarding=0", "net.ipv6.conf."+ifc+".disable_ipv6=1")
	}
	return n
}

func (n *netnsRig) cleanup() {
	if n.daemon != nil {
		n.daemon.stop()
	}
	for _, ns := range n.namespaces {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// start runs roce-fwd in its namespace with af_packet ports on the veths.
func (n *netnsRig) start(mode string, extra ...string) {
	n.run(fmt.Sprintf(`[[port]]
name = "pa"
vdev = "net_af_packet0,iface=%s"
addresses = ["10.71.1.1/24", "fd71:1::1/64"]
[[port]]
name = "pb"
vdev = "net_af_packet1,iface=%s"
addresses = ["10.71.2.1/24", "fd71:2::1/64"]
[pipeline]
mode = %q
%s`, n.aIf, n.bIf, mode, strings.Join(extra, "\n")))
}

// run runs roce-fwd in its namespace with the config's body (ports and
// the rest; the rig adds [eal] and [console]).
func (n *netnsRig) run(body string) {
	r := &daemonRig{t: n.t, sock: filepath.Join(n.dir, "console.sock"), cfgPath: filepath.Join(n.dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-cmd-%d-netns", os.Getpid()), stderr: &syncBuffer{}}
	r.writeConfig(fmt.Sprintf(`[eal]
args = %s
[console]
socket = %q
history = ""
%s
`, noHugeEAL(r.prefix), r.sock, body))
	r.cmd = exec.Command("ip", "netns", "exec", n.r, binary, "run", "--config", r.cfgPath)
	r.launch()
	n.daemon = r
}

// Host A pings host B through roce-fwd and roce-fwd's own address, over
// IPv4 and IPv6, with no static MAC anywhere: the kernels resolve each other and roce-fwd
// through its exception path, and roce-fwd learns their neighbours back
// from its own kernel and then forwards in its data path.
func TestNetnsPing(t *testing.T) {
	n := newNetnsRig(t)
	n.start("roce")
	// The first ping waits for ARP on both sides.
	var out string
	var err error
	for try := 0; try < 5; try++ {
		if out, err = n.ns(n.a, "ping", "-c", "1", "-W", "2", "10.71.2.2"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ping host B: %v\n%s\n%s", err, out, n.daemon.stderr.String())
	}
	if out, err := n.ns(n.a, "ping", "-c", "2", "-W", "2", "10.71.1.1"); err != nil {
		t.Fatalf("ping roce-fwd's own address: %v\n%s", err, out)
	}
	// IPv6: neighbour discovery through the exception path too.
	for try := 0; try < 5; try++ {
		if out, err = n.ns(n.a, "ping", "-6", "-c", "1", "-W", "2", "fd71:2::2"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ping -6 host B: %v\n%s", err, out)
	}
	if out, err := n.ns(n.a, "ping", "-6", "-c", "2", "-W", "2", "fd71:1::1"); err != nil {
		t.Fatalf("ping -6 roce-fwd's own address: %v\n%s", err, out)
	}
	// A TTL that expires here: the kernel answers with ICMP time exceeded.
	if out, _ := n.ns(n.a, "ping", "-c", "1", "-t", "1", "-W", "2", "10.71.2.2"); !strings.Contains(out, "Time to live exceeded") {
		t.Errorf("ping -t 1: no time exceeded from roce-fwd:\n%s", out)
	}
	var neighbors []struct {
		Port string `json:"port"`
		IP   string `json:"ip"`
		MAC  string `json:"mac"`
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n.daemon.consoleJSON(&neighbors, "show", "neighbors")
		if len(neighbors) >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	learned := map[string]string{}
	for _, nb := range neighbors {
		learned[nb.Port+" "+nb.IP] = nb.MAC
	}
	if learned["pa 10.71.1.2"] == "" || learned["pb 10.71.2.2"] == "" || learned["pa fd71:1::2"] == "" || learned["pb fd71:2::2"] == "" {
		t.Fatalf("neighbours learned from the kernel: %+v", neighbors)
	}
	// With both neighbours known, the data path forwards by itself.
	before := n.routed()
	if out, err := n.ns(n.a, "ping", "-c", "20", "-i", "0.01", "-W", "2", "10.71.2.2"); err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("ping host B again: %v\n%s", err, out)
	}
	if out, err := n.ns(n.a, "ping", "-6", "-c", "20", "-i", "0.01", "-W", "2", "fd71:2::2"); err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("ping -6 host B again: %v\n%s", err, out)
	}
	if got := n.routed() - before; got < 80 {
		t.Errorf("the data path routed %d packets of 40 echo requests and their replies", got)
	}
	var f fwdJSON
	n.daemon.consoleJSON(&f, "show", "fwd", "stats", "all")
	var fib fibJSON
	n.daemon.consoleJSON(&fib, "show", "ip", "fib")
	t.Logf("drops %v, punts %v", f.Drops, fib.Punts)
	if fib.Punts["arp"] == 0 || fib.Punts["for_us"] == 0 || fib.Punts["ttl_expired"] != 1 {
		t.Errorf("punts %v: want ARP, the pings of roce-fwd's address, one expired TTL", fib.Punts)
	}
}

// fibJSON is show ip fib --json, what the tests read of it.
type fibJSON struct {
	Routes []struct {
		Prefix string `json:"prefix"`
		Source string `json:"source"`
		Kind   string `json:"kind"`
		Via    []struct {
			Gateway string `json:"gateway"`
			Packets uint64 `json:"packets"`
		} `json:"via"`
	} `json:"routes"`
	FIB struct {
		Routes int `json:"Routes"`
	} `json:"fib"`
	Punts map[string]uint64 `json:"punts"`
}

// waitFIB polls show ip fib ADDR into fib until ok, or fails the test
// after wait, saying what the kernel beside roce-fwd has.
func (n *netnsRig) waitFIB(fib *fibJSON, addr string, wait time.Duration, ok func() bool) {
	t := n.t
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		n.daemon.consoleJSON(fib, "show", "ip", "fib", addr)
		if ok() {
			return
		}
		if time.Now().After(deadline) {
			out, _ := n.ns(n.r, "ip", "route", "show", "match", addr)
			t.Fatalf("show ip fib %s: %+v; the kernel has: %s", addr, fib.Routes, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resolve has host A ping host B until it answers: ARP on both sides,
// and roce-fwd's neighbours learnt.
func (n *netnsRig) resolve() {
	for try := 0; try < 5; try++ {
		if _, err := n.ns(n.a, "ping", "-c", "1", "-W", "2", "10.71.2.2"); err == nil {
			return
		}
	}
}

// gatewayMAC is the MAC host A resolved for roce-fwd's address.
func (n *netnsRig) gatewayMAC() string {
	n.t.Helper()
	neigh, _ := n.ns(n.a, "ip", "neigh", "show", "10.71.1.1")
	f := strings.Fields(neigh)
	i := slices.Index(f, "lladdr")
	if i < 0 || i+1 >= len(f) {
		n.t.Fatalf("host A has no MAC for its gateway: %q", neigh)
	}
	return f[i+1]
}

// sniff starts netns_roce.py's capture in a namespace and returns once
// it says it is capturing; wait for the command to end.
func (n *netnsRig) sniff(ns string, args ...string) *exec.Cmd {
	t := n.t
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, "/usr/bin/python3", filepath.Join("testdata", "netns_roce.py")}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		cmd.Wait()
		t.Fatalf("netns_roce.py %v: %q %v\n%s", args, line, err, stderr.String())
	}
	return cmd
}

// routed is the packets roce-fwd's data path routed to a next hop.
func (n *netnsRig) routed() uint64 {
	var fib fibJSON
	var total uint64
	for _, family := range []string{"ip", "ipv6"} {
		n.daemon.consoleJSON(&fib, "show", family, "fib")
		for _, r := range fib.Routes {
			for _, h := range r.Via {
				total += h.Packets
			}
		}
	}
	return total
}

// Routes a routing daemon puts in the kernel beside roce-fwd (here, ip
// route) are routed in its data path: a route via host B, then the same
// prefix over two gateways (an ECMP group), a withdrawal, and 100k routes
// at once while host A pings through.
func TestNetnsKernelRoutes(t *testing.T) {
	n := newNetnsRig(t)
	n.must(n.b, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	n.must(n.b, "ip", "addr", "add", "10.71.2.3/24", "dev", "h0")
	n.start("io", "[kernel]", "routes = true")
	n.resolve()
	var fib fibJSON
	waitFIB := func(addr string, ok func() bool) {
		t.Helper()
		n.waitFIB(&fib, addr, 5*time.Second, ok)
	}
	n.must(n.r, "ip", "route", "add", "10.99.0.0/16", "via", "10.71.2.2")
	waitFIB("10.99.0.1", func() bool {
		return len(fib.Routes) == 1 && fib.Routes[0].Source == "kernel" && fib.Routes[0].Prefix == "10.99.0.0/16"
	})
	if out, err := n.ns(n.a, "ping", "-c", "3", "-i", "0.1", "-W", "2", "10.99.0.1"); err != nil {
		t.Fatalf("ping over the kernel's route: %v\n%s", err, out)
	}
	// The same prefix over two gateways: an ECMP group.
	n.must(n.r, "ip", "route", "replace", "10.99.0.0/16", "nexthop", "via", "10.71.2.2", "nexthop", "via", "10.71.2.3")
	waitFIB("10.99.0.1", func() bool {
		return len(fib.Routes) == 1 && fib.Routes[0].Kind == "ecmp" && len(fib.Routes[0].Via) == 2
	})
	// 100k routes at once, with traffic through.
	var batch strings.Builder
	for i := 0; i < 100000; i++ {
		fmt.Fprintf(&batch, "route add %d.%d.%d.0/24 via 10.71.2.2\n", 11+i>>16, i>>8&255, i&255)
	}
	script := filepath.Join(n.dir, "routes.batch")
	if err := os.WriteFile(script, []byte(batch.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	ping := exec.Command("ip", "netns", "exec", n.a, "ping", "-c", "200", "-i", "0.01", "-W", "2", "10.99.0.1")
	var pingOut strings.Builder
	ping.Stdout = &pingOut
	if err := ping.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n.must(n.r, "ip", "-batch", script)
	installed := time.Since(start) // the kernel's own time for the batch
	waitFIB("12.134.159.1", func() bool { return len(fib.Routes) == 1 && fib.Routes[0].Prefix == "12.134.159.0/24" })
	learned := time.Since(start)
	n.daemon.consoleJSON(&fib, "show", "ip", "fib", "10.99.0.1")
	t.Logf("100000 kernel routes learned in %v after the batch started; ip -batch itself took %v (%d routes in the FIB)",
		learned.Round(time.Millisecond), installed.Round(time.Millisecond), fib.FIB.Routes)
	if err := ping.Wait(); err != nil || !strings.Contains(pingOut.String(), " 0% packet loss") {
		t.Errorf("ping during the route burst: %v\n%s", err, pingOut.String())
	}
	// A withdrawal: the prefix is gone from the FIB.
	n.must(n.r, "ip", "route", "del", "10.99.0.0/16")
	waitFIB("10.99.0.1", func() bool { return len(fib.Routes) == 0 })
}

// frr runs one FRR daemon in a namespace in the foreground, stopped when
// the test ends; its vty socket is in dir.
func (n *netnsRig) frr(ns, daemon, dir, conf string, args ...string) {
	t := n.t
	t.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777) // FRR drops to its own user
	cfg := filepath.Join(dir, daemon+".conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{"netns", "exec", ns, "/usr/lib/frr/" + daemon, "-P", "0",
		"--vty_socket", dir, "-i", filepath.Join(dir, daemon+".pid"), "-f", cfg,
		"--log", "file:" + filepath.Join(dir, daemon+".log")}, args...)
	cmd := exec.Command("ip", argv...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		// FRR keeps a directory per process for its crash logs ("ip netns
		// exec" execs the daemon: same pid).
		os.RemoveAll(fmt.Sprintf("/var/tmp/frr/%s.%d", daemon, cmd.Process.Pid))
	})
}

// BGP through the exception path: FRR beside roce-fwd (zebra and bgpd
// in roce-fwd's namespace) peers with two BGP speakers on host B over
// roce-fwd's port; the prefix they announce reaches roce-fwd's FIB
// through the kernel, as an ECMP group of both, traffic from host A
// follows it, and a withdrawal takes it away.
func TestNetnsBGP(t *testing.T) {
	if _, err := os.Stat("/usr/lib/frr/bgpd"); err != nil {
		t.Skip("FRR is not installed (Debian package frr)")
	}
	n := newNetnsRig(t)
	n.must(n.b, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	n.must(n.b, "ip", "addr", "add", "10.71.2.3/24", "dev", "h0")
	n.start("io", "[kernel]", "routes = true")
	n.resolve()
	// FRR keeps per-process directories in /var/tmp/frr: removed with
	// the daemons, and the directory too if the test made it.
	if _, err := os.Stat("/var/tmp/frr"); os.IsNotExist(err) {
		t.Cleanup(func() { os.Remove("/var/tmp/frr") })
	}
	// FRR runs as its own user: its files go where it can reach them.
	frrDir, err := os.MkdirTemp("", "rf-frr-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(frrDir, 0o755)
	t.Cleanup(func() { os.RemoveAll(frrDir) })
	n.dir = frrDir
	zsock := filepath.Join(n.dir, "frr-r", "zserv.api")
	n.frr(n.r, "zebra", filepath.Join(n.dir, "frr-r"), "hostname rf\n", "-z", zsock)
	n.frr(n.r, "bgpd", filepath.Join(n.dir, "frr-r"), `hostname rf
router bgp 65001
 bgp router-id 10.71.2.1
 no bgp ebgp-requires-policy
 neighbor 10.71.2.2 remote-as 65002
 neighbor 10.71.2.2 timers connect 1
 neighbor 10.71.2.3 remote-as 65002
 neighbor 10.71.2.3 timers connect 1
 address-family ipv4 unicast
  maximum-paths 4
 exit-address-family
`, "-z", zsock)
	speaker := func(addr string) string {
		dir := filepath.Join(n.dir, "frr-b-"+addr)
		n.frr(n.b, "bgpd", dir, fmt.Sprintf(`hostname b
router bgp 65002
 bgp router-id %s
 no bgp ebgp-requires-policy
 no bgp network import-check
 neighbor 10.71.2.1 remote-as 65001
 neighbor 10.71.2.1 update-source %s
 neighbor 10.71.2.1 timers connect 1
 address-family ipv4 unicast
  network 10.99.0.0/16
 exit-address-family
`, addr, addr), "-Z", "-n", "-l", addr)
		return dir
	}
	b1 := speaker("10.71.2.2")
	speaker("10.71.2.3")
	var fib fibJSON
	wait := func(what string, ok func() bool) {
		t.Helper()
		t.Log("waiting for", what)
		n.waitFIB(&fib, "10.99.0.1", 30*time.Second, ok)
	}
	wait("the announcement, over both sessions", func() bool {
		return len(fib.Routes) == 1 && fib.Routes[0].Source == "kernel" && fib.Routes[0].Kind == "ecmp" && len(fib.Routes[0].Via) == 2
	})
	if out, err := n.ns(n.a, "ping", "-c", "5", "-i", "0.1", "-W", "2", "10.99.0.1"); err != nil {
		t.Fatalf("ping the announced prefix: %v\n%s", err, out)
	}
	// One speaker withdraws: one next hop left; the other too: gone.
	vtysh := func(dir string, cmds ...string) {
		t.Helper()
		args := []string{"netns", "exec", n.b, "vtysh", "--vty_socket", dir, "-d", "bgpd"}
		for _, c := range cmds {
			args = append(args, "-c", c)
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("vtysh %v: %v\n%s", cmds, err, out)
		}
	}
	vtysh(b1, "configure terminal", "router bgp 65002", "address-family ipv4 unicast", "no network 10.99.0.0/16")
	wait("one speaker's withdrawal", func() bool {
		return len(fib.Routes) == 1 && fib.Routes[0].Kind == "forward" && fib.Routes[0].Via[0].Gateway == "10.71.2.3"
	})
}

// RoCEv2 from host A (scapy, real ICRCs) reaches host B through roce-fwd
// in roce mode, every frame as a router should leave it: TTL one less,
// MACs those of roce-fwd's port and host B, DSCP and ECN as sent, the
// ICRC still valid (scapy recomputes it).
func TestNetnsRoCE(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import scapy.contrib.roce").Run(); err != nil {
		t.Skip("python3-scapy is not installed")
	}
	n := newNetnsRig(t)
	n.start("roce")
	n.resolve()
	gwMAC := n.gatewayMAC()
	portMAC, _ := n.ns(n.r, "cat", "/sys/class/net/"+n.bIf+"/address")
	hostMAC, _ := n.ns(n.b, "cat", "/sys/class/net/h0/address")
	script := filepath.Join("testdata", "netns_roce.py")
	out := filepath.Join(n.dir, "b.pcap")
	const frames = 200
	// Every frame must come once: the capture goes on for a second after
	// the last, to see a duplicate.
	recv := n.sniff(n.b, "recv", "h0", out, fmt.Sprint(frames), "30")
	if out, err := n.ns(n.a, "/usr/bin/python3", script, "send", "h0", gwMAC, "10.71.1.2", "10.71.2.2", fmt.Sprint(frames)); err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	if err := recv.Wait(); err != nil {
		t.Fatalf("recv: %v", err)
	}
	got := scapyFrames(t, "describe", out)[0]
	if len(got) != frames {
		t.Fatalf("host B saw %d RoCEv2 frames, %d sent", len(got), frames)
	}
	for i, f := range got {
		b := f.bytes(t)
		if mac := net.HardwareAddr(b[6:12]).String(); mac != strings.TrimSpace(portMAC) {
			t.Fatalf("frame %d: source MAC %s, want roce-fwd's port %s", i, mac, portMAC)
		}
		if mac := net.HardwareAddr(b[0:6]).String(); mac != strings.TrimSpace(hostMAC) {
			t.Fatalf("frame %d: destination MAC %s, want host B's %s", i, mac, hostMAC)
		}
		if b[14+8] != 63 || f.IPChksumOK == nil || !*f.IPChksumOK {
			t.Fatalf("frame %d: TTL %d (sent 64), header checksum ok %v", i, b[14+8], f.IPChksumOK)
		}
		if f.DSCP != 26 || f.ECN != 2 || !f.RoCE || f.ICRC != f.ICRCCalc {
			t.Fatalf("frame %d: DSCP %d ECN %d RoCE %v ICRC %s (computed %s)", i, f.DSCP, f.ECN, f.RoCE, f.ICRC, f.ICRCCalc)
		}
	}
}

// PFC with real hosts: roce-fwd's egress to host B is shaped far below
// what host A sends on the lossless TC3, so the queue crosses xoff, and
// the PFC XOFF roce-fwd sends out of the port facing host A arrives
// there, for priority 3 with a non-zero quanta; and the XOFF host B sends
// pauses roce-fwd's TC3 towards it.
func TestNetnsPFC(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import scapy.contrib.roce").Run(); err != nil {
		t.Skip("python3-scapy is not installed")
	}
	n := newNetnsRig(t)
	// scapy sends about 1000 frames a second: 2 Mbps is well below.
	n.start("roce", "[qos]", `preset = "nvidia-roce"`, "[[qos.port]]", `name = "pb"`, `rate = "2Mbps"`,
		"[pfc]", `xoff = "64KB"`, `xon = "32KB"`)
	n.resolve()
	gwMAC := n.gatewayMAC()
	script := filepath.Join("testdata", "netns_roce.py")
	out := filepath.Join(n.dir, "a-macctl.pcap")
	capture := n.sniff(n.a, "macctl", "h0", out, "30", "3") // until the first XOFF for priority 3
	if out, err := n.ns(n.a, "/usr/bin/python3", script, "send", "h0", gwMAC, "10.71.1.2", "10.71.2.2", "2000", "1000"); err != nil {
		t.Fatalf("send: %v\n%s", err, out)
	}
	if err := capture.Wait(); err != nil {
		t.Fatalf("capture: %v", err)
	}
	frames := testenv.ReadPcap(t, out)
	xoff := 0
	for _, fr := range frames {
		// 802.1Qbb: opcode 0x0101, class-enable vector, 8 quanta.
		if len(fr) >= 34 && fr[14] == 0x01 && fr[15] == 0x01 && fr[17]&(1<<3) != 0 && (fr[18+2*3] != 0 || fr[19+2*3] != 0) {
			xoff++
		}
	}
	if xoff == 0 {
		res := n.daemon.console("--json", "show", "fwd", "stats", "all")
		t.Fatalf("host A saw %d MAC control frames, no PFC XOFF for priority 3:\n%s", len(frames), res.stdout)
	}
	t.Logf("host A saw %d MAC control frames, %d XOFF for priority 3", len(frames), xoff)

	// And the other way: host B pauses priority 3; roce-fwd honours it on
	// its port towards B.
	if out, err := n.ns(n.b, "/usr/bin/python3", script, "pfc", "h0", "3", "65535", "30"); err != nil {
		t.Fatalf("pfc: %v\n%s", err, out)
	}
	var rep struct {
		PFC map[string]struct {
			RxXOFF   [8]uint64 `json:"rx_xoff"`
			PausedNs [8]int64  `json:"paused_ns"`
		} `json:"pfc"`
	}
	n.daemon.consoleJSON(&rep, "show", "fwd", "stats", "all")
	if pb := rep.PFC["pb"]; pb.RxXOFF[3] != 30 || pb.PausedNs[3] <= 0 {
		t.Errorf("host B's PFC for priority 3: %+v, want 30 XOFF received and paused time", pb)
	}
}

// A port's wire goes down and comes back while host A pings through:
// roce-fwd takes the port's TAP down, the kernel withdraws the routes and
// neighbours through it, and roce-fwd follows; with the link back and the
// route put back (as a routing daemon would), pings go through again.
// Every packet is accounted for: forwarded, or counted under a reason.
func TestNetnsLinkDown(t *testing.T) {
	n := newNetnsRig(t)
	n.must(n.b, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	n.start("io", "[kernel]", "routes = true")
	n.resolve()
	n.must(n.r, "ip", "route", "add", "10.99.0.0/16", "via", "10.71.2.2")
	var fib fibJSON
	n.waitFIB(&fib, "10.99.0.1", 5*time.Second, func() bool { return len(fib.Routes) == 1 })
	if out, err := n.ns(n.a, "ping", "-c", "3", "-i", "0.1", "-W", "2", "10.99.0.1"); err != nil {
		t.Fatalf("ping before the link goes down: %v\n%s", err, out)
	}
	n.must(n.b, "ip", "link", "set", "h0", "down")
	n.waitFIB(&fib, "10.99.0.1", 5*time.Second, func() bool { return len(fib.Routes) == 0 })
	if out, _ := n.ns(n.r, "ip", "link", "show", "pb"); !strings.Contains(out, "state DOWN") {
		t.Errorf("port pb's TAP after its link went down:\n%s", out)
	}
	// Pings now have no route: dropped and counted.
	n.ns(n.a, "ping", "-c", "3", "-i", "0.1", "-W", "1", "10.99.0.1")
	n.must(n.b, "ip", "link", "set", "h0", "up")
	n.must(n.b, "ip", "route", "replace", "default", "via", "10.71.2.1") // host B's kernel flushed it too
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := n.ns(n.r, "ip", "link", "show", "pb")
		if strings.Contains(out, "state UP") || strings.Contains(out, "state UNKNOWN") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("port pb's TAP after its link came back:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.must(n.r, "ip", "route", "replace", "10.99.0.0/16", "via", "10.71.2.2")
	n.waitFIB(&fib, "10.99.0.1", 5*time.Second, func() bool { return len(fib.Routes) == 1 })
	var out string
	var err error
	for try := 0; try < 5; try++ {
		if out, err = n.ns(n.a, "ping", "-c", "1", "-W", "2", "10.99.0.1"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("ping after the link came back: %v\n%s", err, out)
	}
	var f fwdJSON
	n.daemon.consoleJSON(&f, "show", "fwd", "stats", "all")
	if f.Drops["no_route"] == 0 {
		t.Errorf("drops %v: the pings while the link was down should be no_route", f.Drops)
	}
}

// A port that is not an af_packet interface follows the link state DPDK
// reports: a net_tap data port (whose link is its interface's) taken down
// takes the port's exception-path TAP down, and up again.
func TestNetnsLinkDownDPDK(t *testing.T) {
	n := newNetnsRig(t)
	data := fmt.Sprintf("rft%d", os.Getpid()%100000)
	n.run(fmt.Sprintf(`[[port]]
name = "pt"
vdev = "net_tap0,iface=%s"
addresses = ["10.73.1.1/24"]
[[port]]
name = "pn"
vdev = "net_null0"
addresses = ["10.73.2.1/24"]
[pipeline]
mode = "io"
[kernel]
exception_path = "on"`, data))
	r := n.daemon
	waitState := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			out, _ := n.ns(n.r, "ip", "link", "show", "pt")
			for _, w := range want {
				if strings.Contains(out, "state "+w) {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("port pt's TAP, want state %v:\n%s\n%s", want, out, r.stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitState("UP", "UNKNOWN")
	n.must(n.r, "ip", "link", "set", data, "down")
	waitState("DOWN")
	n.must(n.r, "ip", "link", "set", data, "up")
	waitState("UP", "UNKNOWN")
	if !strings.Contains(r.stderr.String(), "the NIC's link (DPDK)") {
		t.Errorf("no link change logged:\n%s", r.stderr.String())
	}
}
