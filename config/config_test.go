package config

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// src joins lines with newlines; tests number them in comments so the
// expected line numbers can be checked by eye.
func src(lines ...string) []byte { return []byte(strings.Join(lines, "\n") + "\n") }

// valid is a minimal valid file that error cases extend.
var valid = []string{
	/* 1 */ `[[port]]`,
	/* 2 */ `name = "a"`,
	/* 3 */ `vdev = "net_null0"`,
	/* 4 */ `[[port]]`,
	/* 5 */ `name = "b"`,
	/* 6 */ `vdev = "net_null1"`,
	/* 7 */ `[[forward]]`,
	/* 8 */ `from = "a"`,
	/* 9 */ `to = "b"`,
}

func with(extra ...string) []byte { return src(append(append([]string{}, valid...), extra...)...) }

func TestDefault(t *testing.T) {
	cfg, err := Default("/var/lib/roce-fwd/demo.pcap")
	if err != nil {
		t.Fatalf("Default: %v", err)
	}
	if cfg.File != DefaultFile {
		t.Errorf("File = %q", cfg.File)
	}
	wantArgs := []string{"--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix", "roce-fwd", "-l", "0-1"}
	if !reflect.DeepEqual(cfg.EAL.Args, wantArgs) {
		t.Errorf("EAL.Args = %q", cfg.EAL.Args)
	}
	if len(cfg.Ports) != 2 ||
		cfg.Ports[0].Name != "in" || cfg.Ports[0].Vdev != "net_pcap0,rx_pcap=/var/lib/roce-fwd/demo.pcap,infinite_rx=1" ||
		cfg.Ports[1].Name != "out" || cfg.Ports[1].Vdev != "net_null0,no-rx=1" {
		t.Errorf("Ports = %+v", cfg.Ports)
	}
	if len(cfg.Forward) != 1 || cfg.Forward[0].From != "in" || cfg.Forward[0].To != "out" {
		t.Errorf("Forward = %+v", cfg.Forward)
	}
	if cfg.Pipeline.Mode != "roce" || !cfg.RoCE.VerifyICRC || cfg.Pipeline.Burst != 32 {
		t.Errorf("Pipeline = %+v", cfg.Pipeline)
	}
	if cfg.Mempool != (Mempool{Mbufs: 16383, Cache: 256, DataRoom: 2176, Ops: "auto"}) {
		t.Errorf("Mempool = %+v", cfg.Mempool)
	}
	for i, p := range cfg.Ports {
		if p.Line < 1 || p.Promiscuous == nil || !*p.Promiscuous || p.Socket != -1 || p.RxDesc != 1024 {
			t.Errorf("port %d defaults: %+v", i, p)
		}
	}
	if cfg.Ports[1].PeerMAC != "02:00:00:00:00:01" {
		t.Errorf("peer_mac default = %q", cfg.Ports[1].PeerMAC)
	}
	all, main, err := cfg.EAL.Lcores()
	if err != nil || !reflect.DeepEqual(all, []int{0, 1}) || main != 0 {
		t.Errorf("Lcores = %v, %d, %v", all, main, err)
	}
}

func TestDefaultPcapPath(t *testing.T) {
	odd := `/tmp/a "quoted" \ dir/x.pcap`
	cfg, err := Default(odd)
	if err != nil {
		t.Fatalf("Default(%q): %v", odd, err)
	}
	if want := "net_pcap0,rx_pcap=" + odd + ",infinite_rx=1"; cfg.Ports[0].Vdev != want {
		t.Errorf("vdev = %q, want %q", cfg.Ports[0].Vdev, want)
	}
	for _, bad := range []string{"", "a,b.pcap", "a\nb"} {
		if _, err := Default(bad); err == nil {
			t.Errorf("Default(%q) succeeded", bad)
		}
	}
}

var full = src(
	`[eal]`,
	`args = ["-l", "2-5", "--main-lcore", "2", "-a", "0000:3b:00.0"]`,
	`[mempool]`,
	`mbufs = 65535`,
	`cache = 512`,
	`data_room = 9344`,
	`[[port]]`,
	`name = "uplink0"`,
	`pci = "3B:00.0"`,
	`devargs = "dv_flow_en=1"`,
	`rx_queues = 4`,
	`tx_queues = 4`,
	`rx_desc = 4096`,
	`tx_desc = 2048`,
	`mtu = 9000`,
	`socket = 1`,
	`promiscuous = false`,
	`peer_mac = "B8-CE-F6-00-00-01"`,
	`[[port]]`,
	`name = "pcap.in"`,
	`vdev = "net_pcap0,rx_pcap=a.pcap"`,
	`[pipeline]`,
	`mode = "mac"`,
	`burst = 64`,
	`lcores = [3, 4, 5]`,
	`[[forward]]`,
	`from = "uplink0"`,
	`to = "pcap.in"`,
	`[[forward]]`,
	`from = "pcap.in"`,
	`to = "uplink0"`,
)

func TestRoundTrip(t *testing.T) {
	cfg, err := Parse("full.toml", full)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	up := cfg.Ports[0]
	if up.PCI != "0000:3b:00.0" || up.PeerMAC != "b8:ce:f6:00:00:01" || *up.Promiscuous || up.Line != 7 {
		t.Errorf("port 0 not normalised: %+v", up)
	}
	if cfg.Ports[1].PeerMAC != "02:00:00:00:00:01" || cfg.Ports[1].Line != 19 || cfg.Forward[1].Line != 29 {
		t.Errorf("port 1 = %+v, forward 1 = %+v", cfg.Ports[1], cfg.Forward[1])
	}
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	again, err := Parse("encoded.toml", buf.Bytes())
	if err != nil {
		t.Fatalf("re-Parse: %v\n%s", err, buf.String())
	}
	if !equalIgnoringSource(cfg, again) {
		t.Errorf("round trip changed the config:\nbefore %+v\nafter  %+v\n%s", cfg, again, buf.String())
	}
}

// equalIgnoringSource compares configs except for where they were read from.
func equalIgnoringSource(a, b *Config) bool {
	strip := func(c *Config) Config {
		s := *c
		s.File = ""
		if c.Capture != nil {
			cp := *c.Capture
			cp.Line = 0
			s.Capture = &cp
		}
		s.Ports = append([]Port(nil), c.Ports...)
		for i := range s.Ports {
			s.Ports[i].Line, s.Ports[i].VdevLine = 0, 0
		}
		s.Forward = append([]Forward(nil), c.Forward...)
		for i := range s.Forward {
			s.Forward[i].Line = 0
		}
		s.Routes = append([]Route(nil), c.Routes...)
		for i := range s.Routes {
			s.Routes[i].Line = 0
		}
		s.Neighbors = append([]Neighbor(nil), c.Neighbors...)
		for i := range s.Neighbors {
			s.Neighbors[i].Line = 0
		}
		return s
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

func TestPortByName(t *testing.T) {
	cfg, err := Parse("t.toml", with())
	if err != nil {
		t.Fatal(err)
	}
	if i, ok := cfg.PortByName("b"); !ok || i != 1 {
		t.Errorf(`PortByName("b") = %d, %v`, i, ok)
	}
	if _, ok := cfg.PortByName("c"); ok {
		t.Error(`PortByName("c") found a port`)
	}
}

// Each case lists the expected errors in order; each entry must be a prefix
// of the corresponding line of the error text.
var errorCases = []struct {
	name string
	src  []byte
	want []string
}{
	{"impair rules: each at its line, and the mode", with(
		/* 10 */ `[impair]`,
		/* 11 */ `hold = -1`,
		/* 12 */ `rules = [`,
		/* 13 */ `  "port a rx qp 0x11 action drop",`,
		/* 14 */ `  "port nosuch action drop",`,
		/* 15 */ `  "qp 1 action explode",`,
		/* 16 */ `]`,
	), []string{
		"t.toml:11: impair.hold: -1 is out of range",
		"t.toml:12: impair.rules: impairment rules need [pipeline] mode = \"roce\"",
		"t.toml:14: impair.rules[1]: port \"nosuch\": not a port (\"a\", \"b\")",
		"t.toml:15: impair.rules[2]: action \"explode\": want drop, set_ce",
	}},

	{"syntax error", src(
		/* 1 */ `[pipeline]`,
		/* 2 */ `mode = "io"`,
		/* 3 */ `burst = = 3`,
	), []string{"t.toml:3: pipeline.burst: expected value but found '='"}},

	{"syntax error in second port", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `[[port]]`,
		/* 4 */ `name = "b"`,
		/* 5 */ `rx_queues = 3x`,
	), []string{"t.toml:5: port[1].rx_queues: "}},

	{"syntax error inside multi-line array", src(
		/* 1 */ `[eal]`,
		/* 2 */ `args = [`,
		/* 3 */ `  "-l", "0-1",`,
		/* 4 */ `  ,`,
		/* 5 */ `]`,
	), []string{"t.toml:4: eal.args: unexpected comma"}},

	{"syntax error on a bare word", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `vdev`,
	), []string{"t.toml:3: port[0].vdev: "}},

	{"syntax error with no key", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `= 3`,
	), []string{"t.toml:2: syntax: "}},

	{"unterminated table header", src(
		/* 1 */ `[eal]`,
		/* 2 */ `args = []`,
		/* 3 */ `[pipeline`,
		/* 4 */ `mode = "io"`,
	), []string{"t.toml:3: pipeline: expected '.' or ']' to end table name"}},

	{"duplicate key", src(
		/* 1 */ `[pipeline]`,
		/* 2 */ `burst = 32`,
		/* 3 */ `burst = 64`,
	), []string{"t.toml:3: pipeline.burst: Key 'pipeline.burst' has already been defined"}},

	{"unknown key in second port", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `vdev = "net_null0"`,
		/* 4 */ ``,
		/* 5 */ `[[port]]  # the second port`,
		/* 6 */ `name = "b"`,
		/* 7 */ `rx_queue = 2`,
		/* 8 */ `vdev = "net_null1"`,
		/* 9 */ `[[forward]]`,
		/* 10 */ `from = "a"`,
		/* 11 */ `to = "b"`,
	), []string{`t.toml:7: port[1].rx_queue: unknown key "rx_queue" (did you mean "rx_queues"?)`}},

	{"unknown key without a suggestion", with(
		/* 10 */ `[pipeline]`,
		/* 11 */ `workers = 4`,
	), []string{`t.toml:11: pipeline.workers: unknown key "workers"` + "\x00"}},

	{"unknown section", with(
		/* 10 */ `[shaping]`,
		/* 11 */ `dscp = 26`,
	), []string{`t.toml:10: shaping: unknown key "shaping"`}},

	{"unknown key in inline table", with(
		/* 10 */ `[mempool]`,
		/* 11 */ `mbufs = 8191`,
		/* 12 */ `[eal]`,
		/* 13 */ `x = { y = 1 }`,
	), []string{`t.toml:13: eal.x: unknown key "x"`}},

	{"type error", with(
		/* 10 */ `[pipeline]`,
		/* 11 */ `burst = "32"`,
	), []string{"t.toml:11: pipeline.burst: expected an integer, got string"}},

	{"type errors in array and bool", with(
		/* 10 */ `[pipeline]`,
		/* 11 */ `lcores = [`,
		/* 12 */ `  1,`,
		/* 13 */ `  "2",`,
		/* 14 */ `]`,
		/* 15 */ `[eal]`,
		/* 16 */ `args = "-l 0-1"`,
	), []string{
		"t.toml:13: pipeline.lcores[1]: expected an integer, got string",
		"t.toml:16: eal.args: expected an array of strings, got string",
	}},

	{"type error on promiscuous and name", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = 7`,
		/* 3 */ `vdev = "net_null0"`,
		/* 4 */ `promiscuous = "yes"`,
	), []string{
		"t.toml:1: forward: no [[forward]] defined",
		"t.toml:2: port[0].name: expected a string, got integer",
		"t.toml:4: port[0].promiscuous: expected a boolean, got string",
	}},

	{"table instead of array of tables", src(
		/* 1 */ `[port]`,
		/* 2 */ `name = "a"`,
	), []string{
		"t.toml:1: forward: no [[forward]] defined",
		"t.toml:1: port: expected an array of tables, got table (write [[port]], not [port])",
	}},

	{"out of range values", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `vdev = "net_null0"`,
		/* 4 */ `rx_queues = 0`,
		/* 5 */ `tx_queues = 1025`,
		/* 6 */ `rx_desc = 16`,
		/* 7 */ `tx_desc = 65536`,
		/* 8 */ `mtu = 10`,
		/* 9 */ `socket = 8`,
		/* 10 */ `[pipeline]`,
		/* 11 */ `burst = 513`,
		/* 12 */ `[mempool]`,
		/* 13 */ `cache = 513`,
		/* 14 */ `data_room = 100`,
		/* 15 */ `ops = ""`,
		/* 16 */ `[[forward]]`,
		/* 17 */ `from = "a"`,
		/* 18 */ `to = "a"`,
	), []string{
		"t.toml:4: port[0].rx_queues: 0 is out of range 1..1024",
		"t.toml:5: port[0].tx_queues: 1025 is out of range 1..1024",
		"t.toml:6: port[0].rx_desc: 16 is out of range 32..32768",
		"t.toml:7: port[0].tx_desc: 65536 is out of range 32..32768",
		"t.toml:8: port[0].mtu: 10 is out of range: use 68..9600, or 0",
		"t.toml:9: port[0].socket: 8 is out of range: use 0..7, or -1",
		"t.toml:11: pipeline.burst: 513 is out of range 1..512",
		"t.toml:13: mempool.cache: 513 is out of range 0..512",
		"t.toml:14: mempool.data_room: 100 is out of range 192..65535",
		`t.toml:15: mempool.ops: "" is not a mempool driver's name: want auto, ring_mp_mc, stack, lf_stack or another driver DPDK has`,
	}},

	{"mempool sizing", src(
		/* 1 */ `[mempool]`,
		/* 2 */ `mbufs = 1023`,
		/* 3 */ `cache = 700`,
		/* 4 */ `[[port]]`,
		/* 5 */ `name = "a"`,
		/* 6 */ `pci = "3b:00.0"`,
		/* 7 */ `mtu = 9000`,
		/* 8 */ `[[forward]]`,
		/* 9 */ `from = "a"`,
		/* 10 */ `to = "a"`,
	), []string{
		`t.toml:2: mempool.mbufs: 1023 is too few for port "a": its RX rings alone hold 1024`,
		"t.toml:3: mempool.cache: 700 is out of range 0..512",
		`t.toml:7: mempool.data_room: 2176 is too small for port "a" with mtu 9000: need at least 9146`,
	}},

	{"cache above mbufs/1.5 and explicit data_room", src(
		/* 1 */ `[mempool]`,
		/* 2 */ `mbufs = 700`,
		/* 3 */ `cache = 512`,
		/* 4 */ `data_room = 4096`,
		/* 5 */ `[[port]]`,
		/* 6 */ `name = "a"`,
		/* 7 */ `pci = "3b:00.0"`,
		/* 8 */ `mtu = 9000`,
		/* 9 */ `rx_desc = 512`,
		/* 10 */ `[[forward]]`,
		/* 11 */ `from = "a"`,
		/* 12 */ `to = "a"`,
	), []string{
		"t.toml:3: mempool.cache: 512 is more than mbufs/1.5 (466)",
		`t.toml:4: mempool.data_room: 4096 is too small for port "a" with mtu 9000`,
	}},

	{"port identity errors", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `vdev = "net_pcap0,iface=eth0"`,
		/* 4 */ `[[port]]`,
		/* 5 */ `name = "a"`,
		/* 6 */ `vdev = "net_pcap0,iface=eth1"`,
		/* 7 */ `[[port]]`,
		/* 8 */ `name = "c"`,
		/* 9 */ `vdev = "net_null0"`,
		/* 10 */ `pci = "3b:00.0"`,
		/* 11 */ `[[port]]`,
		/* 12 */ `name = "d"`,
		/* 13 */ `[[port]]`,
		/* 14 */ `name = "9e"`,
		/* 15 */ `vdev = "Net_Null1"`,
		/* 16 */ `devargs = "x=1"`,
		/* 17 */ `peer_mac = "02:00:00:00:00"`,
		/* 18 */ `[[port]]`,
		/* 19 */ `name = "f"`,
		/* 20 */ `pci = "3b:20.0"`,
		/* 21 */ `[[port]]`,
		/* 22 */ `name = "g"`,
		/* 23 */ `pci = "0000:3B:00.0"`,
		/* 24 */ `[[port]]`,
		/* 25 */ `name = "h"`,
		/* 26 */ `pci = "3b:00.0"`,
		/* 27 */ `[[forward]]`,
		/* 28 */ `from = "a"`,
		/* 29 */ `to = "c"`,
	), []string{
		`t.toml:5: port[1].name: "a" is already the name of port[0] (line 1)`,
		"t.toml:6: port[1].vdev: device net_pcap0 is already used by port[0] (line 1)",
		"t.toml:10: port[2].pci: set either vdev or pci, not both",
		"t.toml:11: port[3].vdev: missing; set vdev",
		`t.toml:14: port[4].name: "9e" is not a valid name`,
		`t.toml:15: port[4].vdev: "Net_Null1": the driver name`,
		"t.toml:16: port[4].devargs: only valid with pci",
		`t.toml:17: port[4].peer_mac: "02:00:00:00:00" is not a MAC address`,
		`t.toml:20: port[5].pci: "3b:20.0" is not a PCI address`,
		"t.toml:26: port[7].pci: device 0000:3b:00.0 is already used by port[6] (line 21)",
	}},

	{"forward errors", with(
		/* 10 */ `[[forward]]`,
		/* 11 */ `from = "a"`,
		/* 12 */ `to = "z"`,
		/* 13 */ `[[forward]]`,
		/* 14 */ `from = "b"`,
	), []string{
		`t.toml:11: forward[1].from: port "a" is already forwarded by forward[0] (line 7)`,
		`t.toml:12: forward[1].to: unknown port "z"; valid ports: "a", "b"`,
		`t.toml:13: forward[2].to: missing; name a port (valid ports: "a", "b")`,
	}},

	{"no port", src(
		/* 1 */ `# nothing configured`,
		/* 2 */ `[pipeline]`,
	), []string{
		"t.toml:1: port: no [[port]] defined",
		`t.toml:2: forward: no [[forward]] defined; add [[forward]] from = "..." to = "..."`,
	}},

	{"empty file", nil, []string{
		"t.toml:1: forward: no [[forward]] defined",
		"t.toml:1: port: no [[port]] defined",
	}},

	{"no forward", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "in"`,
		/* 3 */ `vdev = "net_null0"`,
		/* 4 */ `[[port]]`,
		/* 5 */ `name = "out"`,
		/* 6 */ `vdev = "net_null1"`,
		/* 7 */ `[pipeline]`,
		/* 8 */ `mode = "io"`,
	), []string{`t.toml:7: forward: no [[forward]] defined; add [[forward]] from = "in" to = "out"`}},

	{"pipeline errors", with(
		/* 10 */ `[eal]`,
		/* 11 */ `args = ["-l", "0-3", "--main-lcore", "1"]`,
		/* 12 */ `[pipeline]`,
		/* 13 */ `mode = "5tswap"`,
		/* 14 */ `lcores = [0,`,
		/* 15 */ `  1,`,
		/* 16 */ `  4, 0]`,
	), []string{
		`t.toml:13: pipeline.mode: unknown mode "5tswap"; valid modes: io, mac, roce`,
		"t.toml:15: pipeline.lcores[1]: lcore 1 is the EAL main lcore",
		"t.toml:16: pipeline.lcores[2]: lcore 4 is not enabled by eal.args (lcores 0-3)",
		"t.toml:16: pipeline.lcores[3]: lcore 0 is already listed at lcores[0]",
	}},

	{"eal lcore error", with(
		/* 10 */ `[eal]`,
		/* 11 */ `args = ["-l", "0-x", ""]`,
	), []string{
		`t.toml:11: eal.args: -l "0-x": "x" is not an lcore id`,
		"t.toml:11: eal.args[2]: empty argument",
	}},

	{"inline tables and dotted keys", src(
		/* 1 */ `port = [`,
		/* 2 */ `  { name = "a", vdev = "net_null0" },`,
		/* 3 */ `  { name = "b", vdev = "net_null1", mtu = 1 },`,
		/* 4 */ `]`,
		/* 5 */ `forward = [{ from = "a", to = "b" }]`,
		/* 6 */ `pipeline.burst = 0`,
		/* 7 */ `mempool = { mbufs = 4095,`,
		/* 8 */ `  cach = 1 }`,
	), []string{
		"t.toml:3: port[1].mtu: 1 is out of range",
		"t.toml:6: pipeline.burst: 0 is out of range 1..512",
		`t.toml:8: mempool.cach: unknown key "cach" (did you mean "cache"?)`,
	}},

	{"multi-line strings and quoted keys", src(
		/* 1 */ `[eal]`,
		/* 2 */ `args = ["""`,
		/* 3 */ `--no-huge`,
		/* 4 */ `""", '''[not a table] # nor a comment`,
		/* 5 */ `''']`,
		/* 6 */ `"odd key" = 1`,
		/* 7 */ `[[port]]`,
		/* 8 */ `"name" = "a"`,
		/* 9 */ `vdev = "net_null0,x=#1" # ok`,
		/* 10 */ `'rx_desc' = 1`,
		/* 11 */ `[[forward]]`,
		/* 12 */ `from = "a"`,
		/* 13 */ `to = "a"`,
	), []string{
		`t.toml:6: eal."odd key": unknown key "odd key"`,
		"t.toml:10: port[0].rx_desc: 1 is out of range",
	}},
}

func TestErrors(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.toml", tc.src)
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("config returned along with errors")
			}
			var es Errors
			if !errors.As(err, &es) {
				t.Fatalf("error is %T, not Errors", err)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tc.want) || len(es) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), err)
			}
			for i, w := range tc.want {
				// A trailing NUL marks an entry that must match the whole line.
				if whole, ok := strings.CutSuffix(w, "\x00"); ok {
					if got[i] != whole {
						t.Errorf("error %d:\n got %s\nwant %s", i, got[i], whole)
					}
				} else if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, got[i], w)
				}
				if es[i].File != "t.toml" || es[i].Line < 1 || es[i].Key == "" {
					t.Errorf("error %d has File %q Line %d Key %q", i, es[i].File, es[i].Line, es[i].Key)
				}
			}
		})
	}
}

func TestErrorAs(t *testing.T) {
	_, err := Parse("t.toml", with(`[pipeline]`, `burst = 0`))
	var e *Error
	if !errors.As(err, &e) || e.Line != 11 || e.Key != "pipeline.burst" {
		t.Fatalf("errors.As: %v (%+v)", err, e)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.toml"))
	var e *Error
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &e) || e.Line != 0 {
		t.Fatalf("Load(missing) = %v", err)
	}
	if !strings.HasPrefix(err.Error(), filepath.Join(dir, "missing.toml")+": ") {
		t.Errorf("message %q", err)
	}
}

func TestLcores(t *testing.T) {
	cases := []struct {
		args []string
		all  []int
		main int
		err  string
	}{
		{nil, nil, -1, ""},
		{[]string{"--no-huge", "-m", "512"}, nil, -1, ""},
		{[]string{"-l", "0-3,5"}, []int{0, 1, 2, 3, 5}, 0, ""},
		{[]string{"-l0-3"}, []int{0, 1, 2, 3}, 0, ""},
		{[]string{"-l", "3-1,7"}, []int{1, 2, 3, 7}, 1, ""},
		{[]string{"-l", "2,2,4"}, []int{2, 4}, 2, ""},
		{[]string{"--lcores", "1,2-4"}, []int{1, 2, 3, 4}, 1, ""},
		{[]string{"--lcores=1,2-4"}, []int{1, 2, 3, 4}, 1, ""},
		{[]string{"-c", "0xf"}, []int{0, 1, 2, 3}, 0, ""},
		{[]string{"-c0x30"}, []int{4, 5}, 4, ""},
		{[]string{"-c", "A"}, []int{1, 3}, 1, ""},
		{[]string{"-l", "0-3", "--main-lcore", "2"}, []int{0, 1, 2, 3}, 2, ""},
		{[]string{"--main-lcore=3", "-l", "1-3"}, []int{1, 2, 3}, 3, ""},
		{[]string{"--main-lcore", "5"}, nil, 5, ""},
		{[]string{"--file-prefix", "x", "-a", "3b:00.0", "-l", "1"}, []int{1}, 1, ""},
		{[]string{"-l", "0-3", "--main-lcore", "4"}, nil, -1, "not among the enabled lcores 0-3"},
		{[]string{"--lcores", "(0-1)@0"}, nil, -1, "use -l"},
		{[]string{"--lcores", "1@2"}, nil, -1, "use -l"},
		{[]string{"-l", "0-1", "-c", "0x3"}, nil, -1, "-l and -c both set"},
		{[]string{"-l"}, nil, -1, "-l needs a value"},
		{[]string{"-l", "x"}, nil, -1, `"x" is not an lcore id`},
		{[]string{"-l", "1,"}, nil, -1, `"" is not an lcore id`},
		{[]string{"-l", "0-5000"}, nil, -1, "too large"},
		{[]string{"-c", "0x0"}, nil, -1, "no lcore"},
		{[]string{"-c", "zz"}, nil, -1, "not a hexadecimal coremask"},
		{[]string{"--main-lcore", "x"}, nil, -1, "expected an lcore id"},
	}
	for _, tc := range cases {
		all, main, err := EAL{Args: tc.args}.Lcores()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err = %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(all, tc.all) || main != tc.main {
			t.Errorf("%q = %v, %d, %v; want %v, %d", tc.args, all, main, err, tc.all, tc.main)
		}
	}
}

func TestFormatLcores(t *testing.T) {
	for _, tc := range []struct {
		ids  []int
		want string
	}{{nil, ""}, {[]int{0}, "0"}, {[]int{0, 1, 2, 3, 5, 7, 8}, "0-3,5,7-8"}} {
		if got := formatLcores(tc.ids); got != tc.want {
			t.Errorf("formatLcores(%v) = %q, want %q", tc.ids, got, tc.want)
		}
	}
}

func TestRoCEAndQoSSections(t *testing.T) {
	cfg, err := Parse("t.toml", []byte(with(
		`[roce]`,
		`verify_icrc = true`,
		`bad_icrc = "forward"`,
		`qp_table = 128`,
		`qp_max_age = "5m"`,
		`[qos]`,
		`trust = "dscp"`,
		`dscp_to_tc = { 26 = 3, 48 = 6, 0 = 1 }`,
		`pcp_to_tc = { 3 = 4 }`,
	)))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.RoCE.VerifyICRC || cfg.RoCE.BadICRC != "forward" || cfg.RoCE.Malformed != "forward" || cfg.RoCE.QPTable != 128 {
		t.Errorf("roce %+v", cfg.RoCE)
	}
	if cfg.RoCE.QPMaxAgeDuration().Minutes() != 5 {
		t.Errorf("qp_max_age %v", cfg.RoCE.QPMaxAgeDuration())
	}
	tcm := cfg.TCMap()
	dscp, pcp := tcm.DSCP, tcm.PCP
	if dscp[26] != 3 || dscp[48] != 6 || dscp[0] != 1 || dscp[46] != 5 || dscp[8] != 1 || pcp[3] != 4 || pcp[5] != 5 {
		t.Errorf("tables %v %v", dscp, pcp)
	}
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	again, err := Parse("again.toml", buf.Bytes())
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if again.TCMap().DSCP != dscp {
		t.Errorf("round trip changed the DSCP map")
	}

	_, err = Parse("t.toml", []byte(with(
		/* 10 */ `[roce]`,
		/* 11 */ `bad_icrc = "keep"`,
		/* 12 */ `qp_max_age = "soon"`,
		/* 13 */ `[qos]`,
		/* 14 */ `trust = "cos"`,
		/* 15 */ `dscp_to_tc = { 64 = 1, 10 = 9 }`,
	)))
	want := []string{
		`t.toml:11: roce.bad_icrc: "keep" is not one of drop, forward`,
		`t.toml:12: roce.qp_max_age: "soon" is not a duration`,
		`t.toml:14: qos.trust: "cos" is not one of dscp, pcp, none`,
		`t.toml:15: qos.dscp_to_tc.10: `,
		`t.toml:15: qos.dscp_to_tc.64: "64" is not a DSCP value (0..63)`,
	}
	if err == nil {
		t.Fatal("bad [roce]/[qos] accepted")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("errors lack %q:\n%v", w, err)
		}
	}
}

// An edit of the running config that breaks it names the key, not a line
// of the generated text; a good copy keeps the file's name and lines.
func TestCopyOfRunningConfig(t *testing.T) {
	src := "[[port]]\nname = \"in\"\nvdev = \"net_null0\"\n\n[[port]]\nname = \"out\"\nvdev = \"net_null1\"\n\n[[forward]]\nfrom = \"in\"\nto = \"out\"\n"
	cfg, err := Parse("r.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	cp, err := cfg.Copy()
	if err != nil {
		t.Fatal(err)
	}
	if cp.File != "r.toml" || cp.Ports[1].Line != 5 || cp.Forward[0].Line != 9 {
		t.Errorf("copy: file %q, port[1] line %d, forward[0] line %d; want r.toml, 5, 9", cp.File, cp.Ports[1].Line, cp.Forward[0].Line)
	}
	cp.Pipeline.Burst = 0
	_, err = cp.Copy()
	if err == nil || !strings.HasPrefix(err.Error(), "r.toml (running config): pipeline.burst: ") {
		t.Errorf("broken copy: %v, want the key under \"r.toml (running config)\" without a line", err)
	}
}

func TestImpairSection(t *testing.T) {
	cfg, err := Parse("t.toml", with(
		/* 10 */ `[pipeline]`,
		/* 11 */ `mode = "roce"`,
		/* 12 */ `[impair]`,
		/* 13 */ `seed = 42`,
		/* 14 */ `rules = ["port b tx class cnp action drop",`,
		/* 15 */ `  "qp 7 psn 10-20 action set_ce"]`,
	))
	if err != nil {
		t.Fatal(err)
	}
	if im := cfg.Impair; im == nil || im.Seed != 42 || len(im.Rules) != 2 || !reflect.DeepEqual(im.Lines, []int{14, 15}) {
		t.Errorf("impair %+v", cfg.Impair)
	}
}
