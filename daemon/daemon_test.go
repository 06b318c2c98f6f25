package daemon

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"roce-fwd/config"
	"roce-fwd/hugepages"
	"roce-fwd/qpstats"
)

func parseConfig(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("t.toml", []byte(src))
	if err != nil {
		t.Fatalf("%v\n%s", err, src)
	}
	return cfg
}

// sysfsDevice writes a PCI device's sysfs files under root.
func sysfsDevice(t *testing.T, root, addr, numaNode string) {
	t.Helper()
	dir := filepath.Join(root, "sys/bus/pci/devices", addr)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, v := range map[string]string{"vendor": "0x15b3", "device": "0x1017", "class": "0x020000", "numa_node": numaNode} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const demandPorts = `
[[port]]
name = "v"
vdev = "net_null0"
rx_queues = 2
rx_desc = 512
tx_desc = 256
[[port]]
name = "nic1"
pci = "0000:3b:00.0"
tx_queues = 4
[[port]]
name = "pinned"
pci = "0000:5e:00.0"
socket = 1
rx_desc = 128
tx_desc = 128
[[port]]
name = "gone"
pci = "0000:af:00.0"
rx_desc = 64
tx_desc = 64
[[forward]]
from = "v"
to = "nic1"
`

func TestDemands(t *testing.T) {
	root := t.TempDir()
	sysfsDevice(t, root, "0000:3b:00.0", "1")
	sysfsDevice(t, root, "0000:5e:00.0", "0") // overridden by socket = 1
	cfg := parseConfig(t, `
[eal]
args = ["-l", "0-3"]
[mempool]
mbufs = 8191
cache = 128
data_room = 4224
[roce]
qp_table = 4096
[pipeline]
lcores = [1, 2]
`+demandPorts)
	got := Demands(cfg, root)
	// Every socket with ports is counted as holding every worker's QP
	// table and its copy: the two workers of pipeline.lcores.
	tables := 2 * uint64(qpstats.Footprint(4096)+qpstats.CopyFootprint(4096))
	want := []hugepages.Demand{
		// "v" (a vdev: socket 0) and "gone" (no sysfs entry: socket 0).
		{Socket: 0, Mbufs: 8191, DataRoom: 4224, Cache: 128, Lcores: 4,
			RxDesc: 2*512 + 64, TxDesc: 256 + 64, TableBytes: tables},
		// "nic1" (numa_node 1 in sysfs) and "pinned" (socket = 1).
		{Socket: 1, Mbufs: 8191, DataRoom: 4224, Cache: 128, Lcores: 4,
			RxDesc: 1024 + 128, TxDesc: 4*1024 + 128, TableBytes: tables},
	}
	if !slices.Equal(got, want) {
		t.Errorf("demands\n%+v\nwant\n%+v", got, want)
	}
	if tables < uint64(2*qpstats.SlotBytes*4096) {
		t.Errorf("two tables of 4096 slots take %d bytes", tables)
	}

	// Without pipeline.lcores every lcore but the main one is a worker.
	cfg = parseConfig(t, "[eal]\nargs = [\"-l\", \"0-3\"]\n[roce]\nqp_table = 1024\n"+demandPorts)
	for _, d := range Demands(cfg, root) {
		if d.TableBytes != 3*uint64(qpstats.Footprint(1024)+qpstats.CopyFootprint(1024)) || d.Lcores != 4 {
			t.Errorf("socket %d: %d table bytes with %d lcores, want three workers' tables", d.Socket, d.TableBytes, d.Lcores)
		}
	}
	// Without -l the lcores are the machine's CPUs.
	cfg = parseConfig(t, "[eal]\nargs = [\"--file-prefix\", \"x\"]\n"+demandPorts)
	n := runtime.NumCPU()
	for _, d := range Demands(cfg, root) {
		if d.Lcores != n || d.TableBytes != uint64(max(n-1, 1))*uint64(qpstats.Footprint(cfg.RoCE.QPTable)+qpstats.CopyFootprint(cfg.RoCE.QPTable)) {
			t.Errorf("socket %d: %d lcores, %d table bytes; want %d CPUs and their workers' tables", d.Socket, d.Lcores, d.TableBytes, n)
		}
	}
}

func TestHasMemoryArg(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"-l", "0-1", "-m", "512"}, true},
		{[]string{"-m512"}, true},
		{[]string{"--no-huge"}, true},
		{[]string{"--socket-mem", "1024,0"}, true},
		{[]string{"--socket-mem=1024,1024"}, true},
		{[]string{"--in-memory"}, true},
		{[]string{"-l", "0-1", "--file-prefix", "m", "-n", "4"}, false},
		{[]string{"--socket-limit=2048", "--huge-dir", "/mnt/huge"}, false},
		{[]string{"--mbuf-pool-ops-name", "ring_mp_mc"}, false},
		{nil, false},
	} {
		if got := HasMemoryArg(c.args); got != c.want {
			t.Errorf("HasMemoryArg(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// EAL args that size the memory are taken as they are; without, the
// hugepage plan adds its own.
func TestEALArgs(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := parseConfig(t, "[eal]\nargs = [\"--no-huge\", \"-m\", \"256\", \"-l\", \"0-1\"]\n"+demandPorts)
	d := &Daemon{Cfg: cfg, log: quiet}
	if err := d.ealArgs(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if d.HugePlan != nil || !slices.Equal(d.EALArgs, cfg.EAL.Args) {
		t.Errorf("args %q, plan %v; want the config's args and no plan", d.EALArgs, d.HugePlan)
	}
	d.EALArgs[0] = "changed"
	if cfg.EAL.Args[0] != "--no-huge" {
		t.Error("the EAL args share the config's slice")
	}

	var logged bytes.Buffer
	cfg = parseConfig(t, "[eal]\nargs = [\"-l\", \"0-1\"]\n"+demandPorts)
	d = &Daemon{Cfg: cfg, log: slog.New(slog.NewTextHandler(&logged, nil))}
	if err := d.ealArgs(t.TempDir()); err != nil { // no hugepages at all
		t.Fatal(err)
	}
	if d.HugePlan == nil || len(d.HugePlan.EALArgs) == 0 {
		t.Fatalf("plan %+v, want one with EAL args", d.HugePlan)
	}
	if want := append(slices.Clone(cfg.EAL.Args), d.HugePlan.EALArgs...); !slices.Equal(d.EALArgs, want) {
		t.Errorf("args %q, want %q", d.EALArgs, want)
	}
	if !HasMemoryArg(d.EALArgs) {
		t.Errorf("args %q set no memory", d.EALArgs)
	}
	for _, w := range d.HugePlan.Warnings {
		if !strings.Contains(logged.String(), w[:min(len(w), 30)]) {
			t.Errorf("warning %q not logged:\n%s", w, logged.String())
		}
	}
}

func TestLiveKey(t *testing.T) {
	for key, want := range map[string]bool{
		"forward[0].to":            true,
		"forward":                  true,
		"roce.verify_icrc":         true,
		"roce.bad_icrc":            true,
		"roce.malformed":           true,
		"roce.qp_table":            false,
		"roce.qp_max_age":          false,
		"qos.dscp_to_tc.26":        true,
		"qos.port[0].rate":         true,
		"qos.pfc_mode":             false,
		"pfc.xoff":                 true,
		"pfc.watchdog.action":      true,
		"port[1].promiscuous":      true,
		"port[1].rx_desc":          false,
		"port[0].vdev":             false,
		"pipeline.mode":            true,
		"pipeline.burst":           false,
		"eal.args":                 false,
		"mempool.mbufs":            false,
		"forwarding":               false,
		"offload.backend":          false,
		"port[1].promiscuous_mode": false,
	} {
		if got := liveKey(key); got != want {
			t.Errorf("liveKey(%q) = %v, want %v", key, got, want)
		}
	}
}

const applyBase = `
[eal]
args = ["--no-huge", "-m", "256"]
[[port]]
name = "a"
vdev = "net_null0"
[[port]]
name = "b"
vdev = "net_null1"
[[forward]]
from = "a"
to = "b"
`

// A reload that changes what only a restart can change is refused as a
// whole, listing every such change; the running config stays.
func TestApplyConfigRefusesRestartChanges(t *testing.T) {
	old := parseConfig(t, applyBase)
	d := &Daemon{Cfg: old, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	changes, err := d.ApplyConfig(parseConfig(t, applyBase))
	if err != nil || changes != nil {
		t.Errorf("same config: %v, %v; want nothing to do", changes, err)
	}

	next := parseConfig(t, strings.Replace(applyBase, `vdev = "net_null1"`, "vdev = \"net_null1\"\nrx_desc = 512\n", 1)+
		"[mempool]\nmbufs = 8191\n[roce]\nverify_icrc = false\n")
	changes, err = d.ApplyConfig(next)
	if err == nil || changes != nil {
		t.Fatalf("applied %v", changes)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "t.toml: not applied, the running config is unchanged: these changes need a restart of roce-fwd:\n  ") {
		t.Errorf("error %q", msg)
	}
	lines := strings.Split(msg, "\n")[1:]
	want := []string{"  port[1].rx_desc: 1024 → 512", "  mempool.mbufs: 16383 → 8191"}
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("error lacks %q:\n%s", w, msg)
		}
	}
	// The live change that came with them is not listed, nor applied.
	if len(lines) != len(want) || strings.Contains(msg, "verify_icrc") {
		t.Errorf("error lists %d changes, want %d:\n%s", len(lines), len(want), msg)
	}
	if d.Cfg != old {
		t.Error("the running config was replaced")
	}
}
