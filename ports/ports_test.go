package ports

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, "ports") }

// devSeq numbers the vdevs: a closed vdev cannot be probed again under
// the same name in one process.
var devSeq int

func vdev(format string) string {
	devSeq++
	return fmt.Sprintf(format, devSeq)
}

// parse makes a config from [[port]] tables and extra TOML; the first port
// forwards to the last.
func parse(t *testing.T, extra string, portTables ...string) *config.Config {
	t.Helper()
	src := "[eal]\nargs = [\"--no-huge\"]\n" + extra + "\n"
	for _, p := range portTables {
		src += "[[port]]\n" + p + "\n"
	}
	first, last := name(portTables[0]), name(portTables[len(portTables)-1])
	src += fmt.Sprintf("[[forward]]\nfrom = %q\nto = %q\n", first, last)
	cfg, err := config.Parse("t.toml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return cfg
}

func name(table string) string {
	for _, l := range strings.Split(table, "\n") {
		if v, ok := strings.CutPrefix(l, "name = "); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// open opens cfg's ports and closes them when the test ends.
func open(t *testing.T, cfg *config.Config) *Set {
	t.Helper()
	set, err := Open(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	return set
}

func TestOpenVdevs(t *testing.T) {
	ring, null := vdev("net_ring%d"), vdev("net_null%d")
	cfg := parse(t, "",
		fmt.Sprintf("name = \"r\"\nvdev = %q\nrx_queues = 2\ntx_queues = 3\nrx_desc = 256\ntx_desc = 512", ring),
		fmt.Sprintf("name = \"n\"\nvdev = %q\npromiscuous = false\npeer_mac = \"02:AA:bb:cc:dd:ee\"\nsocket = 0", null+",no-rx=1"))
	before := len(dpdk.Ports())
	set := open(t, cfg)
	if len(set.Ports) != 2 || len(dpdk.Ports()) != before+2 {
		t.Fatalf("%d ports in the set, %d ethdevs (%d before)", len(set.Ports), len(dpdk.Ports()), before)
	}
	for i, want := range []struct {
		name, dev, driver string
		rxq, txq          int
		peer              string
	}{
		{"r", ring, "net_ring", 2, 3, "02:00:00:00:00:00"},
		{"n", null, "net_null", 1, 1, "02:aa:bb:cc:dd:ee"},
	} {
		p := set.Ports[i]
		if p.Name != want.name || p.Index != i || p.Cfg.Name != want.name || p.ID.Name() != want.dev {
			t.Errorf("port %d: name %q index %d cfg %q device %q, want %q at %d on %s", i, p.Name, p.Index, p.Cfg.Name, p.ID.Name(), want.name, i, want.dev)
		}
		if got, ok := set.ByName(want.name); !ok || got != p {
			t.Errorf("ByName(%q) = %v, %v", want.name, got, ok)
		}
		if p.Info.Driver != want.driver {
			t.Errorf("%s: driver %q, want %q", p.Name, p.Info.Driver, want.driver)
		}
		info, err := p.ID.Info()
		if err != nil || info.ConfiguredRxQueues != want.rxq || info.ConfiguredTxQueues != want.txq {
			t.Errorf("%s: %d rx and %d tx queues configured (%v), want %d and %d", p.Name, info.ConfiguredRxQueues, info.ConfiguredTxQueues, err, want.rxq, want.txq)
		}
		mac, err := p.ID.MAC()
		if err != nil || !bytes.Equal(p.MAC, mac) || len(p.MAC) != 6 {
			t.Errorf("%s: MAC %v, the device says %v (%v)", p.Name, p.MAC, mac, err)
		}
		if p.PeerMAC.String() != want.peer {
			t.Errorf("%s: peer MAC %v, want %s", p.Name, p.PeerMAC, want.peer)
		}
		// A vdev has no NUMA node of its own; its queues and pool go
		// with the main lcore's socket.
		if p.DevSocket != p.ID.Socket() || p.Socket != max(p.DevSocket, 0) {
			t.Errorf("%s: socket %d, device socket %d (ethdev says %d)", p.Name, p.Socket, p.DevSocket, p.ID.Socket())
		}
		if p.Pool == nil || set.Pools[p.Socket] != p.Pool || p.Pool.Name != fmt.Sprintf("rf_mbuf_s%d", p.Socket) {
			t.Errorf("%s: pool %v, the set's pools %v", p.Name, p.Pool, set.Pools)
		}
		if !p.Started {
			t.Errorf("%s: not started", p.Name)
		}
		link, err := p.ID.Link(false)
		if err != nil || !link.Up {
			t.Errorf("%s: link %v (%v), want up after start", p.Name, link, err)
		}
	}
	if len(set.Pools) != 1 {
		t.Errorf("pools %v, want one for the one socket", set.Pools)
	}
	// [mempool] ops = "auto": the lock-free stack, where DPDK's own
	// choice is the ring.
	if best, got := dpdk.BestMempoolOps(), set.Ports[0].Pool.Ops(); best == "ring_mp_mc" && got != "lf_stack" || best != "ring_mp_mc" && got != best {
		t.Errorf("pool on the %q driver (DPDK's best: %q), want lf_stack", got, best)
	}
	if _, ok := set.ByName("x"); ok {
		t.Error("ByName found a port that is not configured")
	}
	// net_null cannot leave promiscuous mode (ENOTSUP), which is no error.
	if !set.Ports[1].ID.Promiscuous() {
		t.Log("net_null left promiscuous mode")
	}
}

// Snapshots read the counters and link, with rates over the time since the
// previous Snapshot; Peek reads them without moving that mark. net_pcap
// counts bytes too (net_ring and net_null count packets only).
func TestSnapshotRates(t *testing.T) {
	dir := t.TempDir()
	var frames [][]byte
	for i := range 33 {
		size := 100
		if i >= 11 {
			size = 60
		}
		frames = append(frames, bytes.Repeat([]byte{byte(i)}, size))
	}
	testenv.WritePcap(t, filepath.Join(dir, "in.pcap"), frames)
	dev := vdev("net_pcap%d") + ",rx_pcap=" + filepath.Join(dir, "in.pcap") + ",tx_pcap=" + filepath.Join(dir, "out.pcap")
	set := open(t, parse(t, "", fmt.Sprintf("name = \"p\"\nvdev = %q", dev)))
	p := set.Ports[0]
	step, err := dpdk.NewStep(11, 1, p.Socket, []dpdk.Queue{{Port: uint16(p.ID)}}, []dpdk.Queue{{Port: uint16(p.ID)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer step.Free()
	// forward receives a burst of 11 frames from the file and sends them.
	forward := func() {
		t.Helper()
		if n := step.Run(); n != 11 {
			t.Fatalf("received %d frames, want a burst of 11", n)
		}
		for _, m := range step.Rx(0) {
			step.Txq[0].Push(m)
		}
		step.Flush()
	}

	first, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if first.Interval != 0 || first.RxPPS != 0 || first.TxPPS != 0 || first.RxBPS != 0 || first.TxBPS != 0 {
		t.Errorf("first snapshot %+v, want no interval and no rates", first)
	}
	if !first.Link.Up || first.At.IsZero() {
		t.Errorf("first snapshot link %v at %v", first.Link, first.At)
	}

	forward() // 11 frames of 100 bytes
	time.Sleep(20 * time.Millisecond)
	peek, err := p.Peek()
	if err != nil {
		t.Fatal(err)
	}
	if d := peek.Stats; d.RxPackets-first.Stats.RxPackets != 11 || d.TxPackets-first.Stats.TxPackets != 11 ||
		d.RxBytes-first.Stats.RxBytes != 1100 || d.TxBytes-first.Stats.TxBytes != 1100 {
		t.Errorf("peek stats %+v after 11 frames of 100 bytes from %+v", peek.Stats, first.Stats)
	}
	if peek.Interval != 0 || peek.RxPPS != 0 || peek.TxBPS != 0 {
		t.Errorf("peek %+v, want no rates", peek)
	}

	forward() // 22 frames of 60 bytes
	forward()
	second, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Measured from the first Snapshot: the Peek in between moved nothing.
	if second.Interval < 20*time.Millisecond || second.Interval != second.At.Sub(first.At) {
		t.Errorf("interval %v, want the time since the first snapshot (%v)", second.Interval, second.At.Sub(first.At))
	}
	sec := second.Interval.Seconds()
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"rx pps", second.RxPPS, 33 / sec},
		{"tx pps", second.TxPPS, 33 / sec},
		{"rx bps", second.RxBPS, 8 * 2420 / sec},
		{"tx bps", second.TxBPS, 8 * 2420 / sec},
	} {
		if math.Abs(c.got-c.want) > 1e-9*c.want {
			t.Errorf("%s %v, want %v (stats %+v -> %+v over %v)", c.what, c.got, c.want, first.Stats, second.Stats, second.Interval)
		}
	}

	// The next interval starts at the second snapshot.
	third, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if third.Interval != third.At.Sub(second.At) || third.RxPPS != 0 || third.TxBPS != 0 {
		t.Errorf("third snapshot interval %v, rx pps %v, tx bps %v; want the time since the second and no traffic",
			third.Interval, third.RxPPS, third.TxBPS)
	}
	if p.Pool.InUse() != 0 {
		t.Errorf("%d mbufs in use", p.Pool.InUse())
	}
}

func TestStopStartClose(t *testing.T) {
	cfg := parse(t, "",
		fmt.Sprintf("name = \"a\"\nvdev = %q", vdev("net_ring%d")),
		fmt.Sprintf("name = \"b\"\nvdev = %q", vdev("net_null%d")))
	set, err := Open(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	a := set.Ports[0]
	if err := a.Stop(); err != nil || a.Started {
		t.Fatalf("stop: %v, started %v", err, a.Started)
	}
	if link, _ := a.ID.Link(false); link.Up {
		t.Error("link up on a stopped port")
	}
	if err := a.Stop(); err != nil {
		t.Errorf("stopping a stopped port: %v", err)
	}
	// Stopped, the queues stay configured: the port starts again as it was.
	if info, _ := a.ID.Info(); info.ConfiguredRxQueues != 1 {
		t.Errorf("%d rx queues configured after stop", info.ConfiguredRxQueues)
	}
	if err := set.Start(); err != nil || !a.Started || !set.Ports[1].Started {
		t.Fatalf("set start: %v; started %v %v", err, a.Started, set.Ports[1].Started)
	}
	if link, _ := a.ID.Link(false); !link.Up {
		t.Error("link down after start")
	}
	if err := a.Start(); err != nil {
		t.Errorf("starting a started port: %v", err)
	}
	if err := set.Stop(); err != nil || a.Started || set.Ports[1].Started {
		t.Fatalf("set stop: %v; started %v %v", err, a.Started, set.Ports[1].Started)
	}

	// Close refuses to free a pool whose mbufs are not all back, and says
	// so; the ports are closed all the same.
	pool := a.Pool
	held := pool.Alloc()
	ids := []dpdk.Port{a.ID, set.Ports[1].ID}
	err = set.Close()
	if err == nil || !strings.Contains(err.Error(), "1 mbufs still in use after every port closed") {
		t.Errorf("close with an mbuf held: %v", err)
	}
	for _, id := range ids {
		if slices.Contains(dpdk.Ports(), id) {
			t.Errorf("port %d still exists after close", id)
		}
	}
	if set.Ports != nil || len(set.Pools) != 0 {
		t.Errorf("after close: ports %v pools %v", set.Ports, set.Pools)
	}
	dpdk.FreeMbufs([]*dpdk.Mbuf{held})
	pool.Free()
	// Closing again has nothing left to do.
	if err := set.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// OpenWith calls beforeStart on each port once its queues are set up and
// before it starts; an error there undoes everything.
func TestOpenWithBeforeStart(t *testing.T) {
	cfg := parse(t, "",
		fmt.Sprintf("name = \"a\"\nvdev = %q\nrx_queues = 2", vdev("net_null%d")),
		fmt.Sprintf("name = \"b\"\nvdev = %q", vdev("net_null%d")))
	var seen []string
	set, err := OpenWith(cfg, 1, func(p *Port) error {
		info, err := p.ID.Info()
		if err != nil || p.Started || p.Pool == nil || info.ConfiguredRxQueues != p.Cfg.RxQueues {
			t.Errorf("%s before start: started %v pool %v rx queues %d (%v)", p.Name, p.Started, p.Pool, info.ConfiguredRxQueues, err)
		}
		seen = append(seen, p.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a", "b"}) {
		t.Errorf("beforeStart saw %v, want a then b", seen)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}

	cfg = parse(t, "",
		fmt.Sprintf("name = \"a\"\nvdev = %q", vdev("net_null%d")),
		fmt.Sprintf("name = \"b\"\nvdev = %q", vdev("net_null%d")))
	before := dpdk.Ports()
	refused := errors.New("refused")
	calls := 0
	set, err = OpenWith(cfg, 1, func(p *Port) error {
		calls++
		if p.Name == "b" {
			return refused
		}
		return nil
	})
	if !errors.Is(err, refused) || set != nil || calls != 2 {
		t.Fatalf("OpenWith: %v, %v after %d calls; want the callback's error", set, err, calls)
	}
	if got := dpdk.Ports(); !slices.Equal(got, before) {
		t.Errorf("ports %v after a failed open, want %v", got, before)
	}
	// The pool went too: its name is free for the next open.
	open(t, parse(t, "", fmt.Sprintf("name = \"c\"\nvdev = %q", vdev("net_null%d"))))
}

func TestOpenErrors(t *testing.T) {
	before := dpdk.Ports()
	for _, c := range []struct {
		name, extra string
		ports       []string
		want        string
	}{
		// Config validation refuses this for virtual devices already;
		// Open checks it again with the sockets the ports really have.
		{"mbufs too few", "[mempool]\ncache = 0",
			[]string{fmt.Sprintf("name = \"a\"\nvdev = %q\nrx_desc = 64\ntx_desc = 64", vdev("net_null%d"))},
			// 64 + 64 descriptors, 1 worker × burst 32 × (1 port + 2), no cache.
			"t.toml: mempool.mbufs = 100 is too small for socket 0: its rx/tx rings, bursts and lcore caches can hold 224 mbufs at once; set mbufs to at least 224"},
		{"too many rx queues", "",
			[]string{fmt.Sprintf("name = \"a\"\nvdev = %q\nrx_queues = 17\nrx_desc = 64\ntx_desc = 64", vdev("net_ring%d"))},
			"port a (net_ring): rx_queues = 17 but the device has at most 16"},
		{"too many tx queues", "",
			[]string{fmt.Sprintf("name = \"b\"\nvdev = %q\ntx_queues = 17\nrx_desc = 64\ntx_desc = 64", vdev("net_ring%d"))},
			"port b (net_ring): tx_queues = 17 but the device has at most 16"},
		{"unknown driver", "",
			[]string{"name = \"a\"\nvdev = \"net_nosuch0\""},
			`port a: cannot probe "net_nosuch0": `},
		{"PCI device under --no-pci", "",
			[]string{"name = \"a\"\npci = \"0000:3b:00.0\""},
			"; check that 0000:3b:00.0 is not excluded by -b or --no-pci in [eal] args"},
		{"unknown mempool driver", "[mempool]\nops = \"no_such_driver\"",
			[]string{fmt.Sprintf("name = \"a\"\nvdev = %q", vdev("net_null%d"))},
			`t.toml: mempool.ops = "no_such_driver": DPDK has no mempool driver of that name`},
		{"second port fails", "",
			[]string{fmt.Sprintf("name = \"a\"\nvdev = %q", vdev("net_null%d")), "name = \"b\"\nvdev = \"net_nosuch1,x=1\""},
			`port b: cannot probe "net_nosuch1,x=1": `},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := parse(t, c.extra, c.ports...)
			if c.name == "mbufs too few" {
				cfg.Mempool.Mbufs = 100
			}
			set, err := Open(cfg, 1)
			if err == nil {
				set.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q\nwant %q", err, c.want)
			}
			t.Log(err)
			if got := dpdk.Ports(); !slices.Equal(got, before) {
				t.Errorf("ports %v left after a failed open, want %v", got, before)
			}
		})
	}
}

// The hint for a vdev driver that does not exist lists the ones there are.
func TestProbeHintUnknownDriver(t *testing.T) {
	if len(installedPMDs()) == 0 {
		t.Skip("no DPDK PMD directory to list drivers from")
	}
	h := probeHint(config.Port{Name: "a", Vdev: "net_nosuch3,x=1"})
	if !strings.HasPrefix(h, `; no DPDK driver named "net_nosuch" is installed (virtual device drivers: `) || !strings.Contains(h, "net_null") {
		t.Errorf("hint %q", h)
	}
	// A known driver with bad arguments points at the devargs; the legacy
	// eth_ alias and net_bonding (registered by net_bond) count as known.
	for _, v := range []string{"net_null0,bogus=1", "eth_null0", "net_bonding0,mode=9"} {
		if h := probeHint(config.Port{Name: "a", Vdev: v}); h != "; check the devargs (see the EAL log above)" {
			t.Errorf("%s: hint %q", v, h)
		}
	}
}

func TestMbufDemand(t *testing.T) {
	cfg := parse(t, "[mempool]\ncache = 100\n[pipeline]\nburst = 16",
		"name = \"a\"\nvdev = \"net_null90\"\nrx_queues = 2\ntx_queues = 3\nrx_desc = 128\ntx_desc = 256",
		"name = \"b\"\nvdev = \"net_null91\"\nrx_desc = 64\ntx_desc = 32",
		"name = \"c\"\nvdev = \"net_null92\"\nrx_desc = 512\ntx_desc = 512")
	socket := map[string]int{"a": 0, "b": 1, "c": 1}
	got := MbufDemand(cfg, func(p config.Port) int { return socket[p.Name] }, 3, cfg.Pipeline.Burst)
	// Per socket: its ports' descriptors, plus what every worker holds
	// (a received burst, a tx burst per port, a drop list) and every
	// lcore's cache (the workers' and the main lcore's).
	workers := 3*16*(3+2) + 4*100
	want := map[int]int{
		0: 2*128 + 3*256 + workers,
		1: 64 + 32 + 512 + 512 + workers,
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("demand %v, want %v", got, want)
	}
}

func TestCheckPCI(t *testing.T) {
	root := t.TempDir()
	dev := filepath.Join(root, "sys/bus/pci/devices/0000:3b:00.0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"vendor": "0x15b3", "device": "0x1017", "class": "0x020000", "numa_node": "0"} {
		if err := os.WriteFile(filepath.Join(dev, f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := parse(t, "", "name = \"a\"\npci = \"0000:3b:00.0\"", "name = \"b\"\npci = \"0000:3c:00.0\"", "name = \"c\"\nvdev = \"net_null0\"")
	err := CheckPCI(cfg, root)
	if err == nil {
		t.Fatal("no error for an unbound NIC and a missing one")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 {
		t.Fatalf("errors:\n%v\nwant one per PCI port", err)
	}
	// The mlx5 NIC is bifurcated and bound to nothing; the other one does
	// not exist. Each error is at its [[port]]'s line.
	if !strings.HasPrefix(lines[0], fmt.Sprintf("t.toml:%d: port a: ", cfg.Ports[0].Line)) || !strings.Contains(lines[0], "mlx5_core") {
		t.Errorf("unbound mlx5: %s", lines[0])
	}
	if !strings.HasPrefix(lines[1], fmt.Sprintf("t.toml:%d: port b: ", cfg.Ports[1].Line)) || !strings.HasSuffix(lines[1], "(roce-fwd ports lists the NICs this machine has)") {
		t.Errorf("missing device: %s", lines[1])
	}
	if err := CheckPCI(parse(t, "", "name = \"c\"\nvdev = \"net_null0\""), root); err != nil {
		t.Errorf("vdevs only: %v", err)
	}
}

// net_tap, unlike the other vdevs, obeys promiscuous = false.
func TestPromiscuousOnTap(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
	n := devSeq + 1
	cfg := parse(t, "",
		fmt.Sprintf("name = \"a\"\nvdev = %q\npromiscuous = false", vdev("net_tap%d")+fmt.Sprintf(",iface=rfports%d", n)),
		fmt.Sprintf("name = \"b\"\nvdev = %q", vdev("net_tap%d")+fmt.Sprintf(",iface=rfports%d", n+1)))
	set, err := Open(cfg, 1)
	if err != nil {
		t.Skipf("net_tap: %v", err)
	}
	t.Cleanup(func() {
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	if a, b := set.Ports[0], set.Ports[1]; a.ID.Promiscuous() || !b.ID.Promiscuous() {
		t.Errorf("promiscuous: a %v (configured off), b %v (default on)", a.ID.Promiscuous(), b.ID.Promiscuous())
	}
	// The MAC is the tap interface's.
	if iface, err := net.InterfaceByName(fmt.Sprintf("rfports%d", n)); err == nil && !bytes.Equal(iface.HardwareAddr, set.Ports[0].MAC) {
		t.Errorf("MAC %v, the interface has %v", set.Ports[0].MAC, iface.HardwareAddr)
	}
}

// A port with several rx queues spreads them by RSS over addresses and
// UDP ports where the device can (net_null keeps the RSS configuration
// as a NIC would); where it cannot (net_ring), RSS says so. A port with
// one queue has no RSS.
func TestRSS(t *testing.T) {
	null2, ring2, null1 := vdev("net_null%d"), vdev("net_ring%d"), vdev("net_null%d")
	set := open(t, parse(t, "",
		fmt.Sprintf("name = \"n2\"\nvdev = %q\nrx_queues = 2", null2),
		fmt.Sprintf("name = \"r2\"\nvdev = %q\nrx_queues = 2", ring2),
		fmt.Sprintf("name = \"n1\"\nvdev = %q", null1)))
	n2, r2, n1 := set.Ports[0], set.Ports[1], set.Ports[2]

	if n2.Info.RSSHashes&dpdk.RSSUDP == 0 {
		t.Fatalf("net_null offers RSS on %#x: no UDP", n2.Info.RSSHashes)
	}
	// RSSHashes is read back from the device: it applied what was asked.
	if want := (dpdk.RSSIP | dpdk.RSSUDP) & n2.Info.RSSHashes; n2.RSSHashes != want {
		t.Errorf("n2's device spreads by %#x, want %#x", n2.RSSHashes, want)
	}
	if desc, ok := n2.RSS(); !ok || desc != "ip udp over 2 rx queues" {
		t.Errorf("n2: %q %v", desc, ok)
	}
	if desc, ok := r2.RSS(); ok || r2.RSSHashes != 0 || !strings.Contains(desc, "unsupported by net_ring") {
		t.Errorf("r2 (no RSS in the device): %q %v, hashes %#x", desc, ok, r2.RSSHashes)
	}
	if desc, ok := n1.RSS(); !ok || n1.RSSHashes != 0 || desc != "off (1 rx queue)" {
		t.Errorf("n1: %q %v, hashes %#x", desc, ok, n1.RSSHashes)
	}
	for _, p := range set.Ports {
		if want := p.Info.RxOffloadCapa&dpdk.RxOffloadIPv4Cksum != 0; p.IPv4ChecksumOffload() != want {
			t.Errorf("%s: IPv4 checksum offload %v, the device offers it: %v", p.Name, p.IPv4ChecksumOffload(), want)
		}
	}
}
