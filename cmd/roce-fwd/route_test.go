package main

import (
	"bytes"
	be "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roce-fwd/demotraffic"
	"roce-fwd/internal/testenv"
	"roce-fwd/roce"
)

// routedFrames is a RoCE workload of 4000 IPv4 and 1000 IPv6 QPs plus one
// frame for each of the routed path's own drop reasons.
func routedFrames(t *testing.T) (frames [][]byte, special map[string][]byte) {
	t.Helper()
	for _, w := range []demotraffic.Workload{
		{Mix: demotraffic.MixControl, QPs: 4000, Frames: 12000, Seed: 1},
		{Mix: demotraffic.MixControl, QPs: 1000, Frames: 3000, Seed: 2, IPv6: true},
	} {
		if _, err := w.Generate(func(f []byte) error { frames = append(frames, bytes.Clone(f)); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	v4 := frames[0]
	mod := func(fn func(ip []byte)) []byte {
		f := bytes.Clone(v4)
		ip := f[14:34]
		fn(ip)
		return f
	}
	fixSum := func(ip []byte) {
		be.BigEndian.PutUint16(ip[10:], 0)
		be.BigEndian.PutUint16(ip[10:], ^ipSum(ip))
	}
	special = map[string][]byte{
		"ttl_expired": mod(func(ip []byte) { ip[8] = 1; fixSum(ip) }),
		"for_us":      mod(func(ip []byte) { copy(ip[16:], []byte{192, 168, 1, 1}); fixSum(ip) }),
		"ip_checksum": mod(func(ip []byte) { ip[10] ^= 0x55 }),
		"route_drop": mod(func(ip []byte) {
			copy(ip[16:], []byte{192, 0, 2, 9}) // a drop route's
			fixSum(ip)
		}),
	}
	for _, name := range []string{"ttl_expired", "for_us", "ip_checksum", "route_drop"} {
		frames = append(frames, special[name])
	}
	return frames, special
}

func ipSum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(be.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// A routed hop with two uplinks and ECMP default routes (IPv4 weighted
// 1:3, IPv6 1:1), in io and roce mode: every frame out is an input
// frame with its MACs set from the neighbour and the egress port, TTL or
// hop limit one less, a valid IPv4 checksum and a valid ICRC; flows
// spread as the weights say; every frame is accounted for.
func TestRunRouted(t *testing.T) {
	frames, _ := routedFrames(t)
	for _, mode := range []string{"io", "roce"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			in, up0, up1 := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "up0.pcap"), filepath.Join(dir, "up1.pcap")
			testenv.WritePcap(t, in, frames)
			cfg := writeFile(t, "routed.toml", fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s"
addresses = ["172.16.0.1/24"]
[[port]]
name = "up0"
vdev = "net_pcap1,tx_pcap=%s"
addresses = ["192.168.0.1/24", "2001:db8:0::1/64"]
[[port]]
name = "up1"
vdev = "net_pcap2,tx_pcap=%s"
addresses = ["192.168.1.1/24", "2001:db8:1::1/64"]
[pipeline]
mode = "%s"
[[route]]
prefix = "0.0.0.0/0"
via = [{ port = "up0", gateway = "192.168.0.2" }, { port = "up1", gateway = "192.168.1.2", weight = 3 }]
[[route]]
prefix = "::/0"
via = [{ port = "up0", gateway = "2001:db8:0::2" }, { port = "up1", gateway = "2001:db8:1::2" }]
[[route]]
prefix = "192.0.2.0/24"
action = "drop"
[[neighbor]]
port = "up0"
ip = "192.168.0.2"
mac = "b8:ce:f6:00:00:02"
[[neighbor]]
port = "up1"
ip = "192.168.1.2"
mac = "b8:ce:f6:00:01:02"
[[neighbor]]
port = "up0"
ip = "2001:db8:0::2"
mac = "b8:ce:f6:00:00:06"
[[neighbor]]
port = "up1"
ip = "2001:db8:1::2"
mac = "b8:ce:f6:00:01:06"
`, ealArgs(t), in, up0, up1, mode))
			statsPath := filepath.Join(dir, "stats.json")
			r := run(t, "run", "--config", cfg, "--duration", "1s", "--stats-json", statsPath)
			if r.code != 0 {
				t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
			}
			s := readStats(t, statsPath)
			wantDrops := map[string]uint64{"ttl_expired": 1, "for_us": 1, "ip_checksum": 1, "route_drop": 1}
			for k, v := range wantDrops {
				if s.Drops[k] != v {
					t.Errorf("drops %s = %d, want %d (all: %v)", k, s.Drops[k], v, s.Drops)
				}
			}
			var drops uint64
			for _, v := range s.Drops {
				drops += v
			}
			// Input frames by their bytes with what the hop changes blanked.
			key := func(f []byte) string {
				k := bytes.Clone(f)
				clear(k[:12])
				switch be.BigEndian.Uint16(k[12:]) {
				case 0x0800:
					k[14+8], k[14+10], k[14+11] = 0, 0, 0
				case 0x86dd:
					k[14+7] = 0
				}
				return string(k)
			}
			inputs := map[string][]byte{}
			for _, f := range frames {
				inputs[key(f)] = f
			}
			dst := map[string][6]byte{"up0/4": {0xb8, 0xce, 0xf6, 0, 0, 2}, "up1/4": {0xb8, 0xce, 0xf6, 0, 1, 2},
				"up0/6": {0xb8, 0xce, 0xf6, 0, 0, 6}, "up1/6": {0xb8, 0xce, 0xf6, 0, 1, 6}}
			flows := map[string]map[string]bool{}
			var out, out6 uint64
			for _, port := range []string{"up0", "up1"} {
				var src []byte
				for i, f := range testenv.ReadPcap(t, filepath.Join(dir, port+".pcap")) {
					out++
					orig, ok := inputs[key(f)]
					if !ok {
						t.Fatalf("%s frame %d is no input frame with MACs, TTL and checksum changed", port, i)
					}
					if src == nil {
						src = f[6:12]
					} else if !bytes.Equal(src, f[6:12]) {
						t.Fatalf("%s frame %d: source MAC %x, earlier %x", port, i, f[6:12], src)
					}
					var r roce.Result
					roce.Classify(f, &roce.TCMap{}, true, &r)
					fam := "4"
					if r.IPVersion == 6 {
						fam, out6 = "6", out6+1
						if f[14+7] != orig[14+7]-1 {
							t.Fatalf("%s frame %d: hop limit %d, input %d", port, i, f[14+7], orig[14+7])
						}
					} else if f[14+8] != orig[14+8]-1 || ipSum(f[14:34]) != 0xffff {
						t.Fatalf("%s frame %d: TTL %d (input %d), header sum %#x", port, i, f[14+8], orig[14+8], ipSum(f[14:34]))
					}
					if [6]byte(f[:6]) != dst[port+"/"+fam] {
						t.Fatalf("%s frame %d: destination MAC %x", port, i, f[:6])
					}
					if !r.RoCE || r.ICRC != roce.ICRCOK {
						t.Fatalf("%s frame %d: RoCE %v ICRC %v (error %v)", port, i, r.RoCE, r.ICRC, r.Err)
					}
					fk := port + "/" + fam
					if flows[fk] == nil {
						flows[fk] = map[string]bool{}
					}
					addrs := f[14+12 : 14+20]
					if fam == "6" {
						addrs = f[14+8 : 14+40]
					}
					flows[fk][string(addrs)+string(f[r.L4:r.L4+2])] = true
				}
			}
			// And as scapy reads them (one port's, in one mode: scapy is
			// slow): IPv4 header checksums and ICRCs recomputed by an
			// independent decoder.
			if mode == "io" {
				for i, f := range scapyFrames(t, "describe", up0)[0] {
					if f.IPChksumOK != nil && !*f.IPChksumOK {
						t.Fatalf("scapy: up0 frame %d: bad IPv4 header checksum", i)
					}
					if !f.RoCE || f.ICRC == "" || f.ICRC != f.ICRCCalc {
						t.Fatalf("scapy: up0 frame %d: RoCE %v, ICRC %s, computed %s", i, f.RoCE, f.ICRC, f.ICRCCalc)
					}
				}
			}
			var rx uint64
			for _, p := range s.Ports {
				rx += p.RxPackets
			}
			if rx != uint64(len(frames)) || rx != out+drops {
				t.Errorf("received %d of %d frames, sent %d, dropped %d (%v)", rx, len(frames), out, drops, s.Drops)
			}
			t.Logf("%s: received %d, sent %d, drops %v; flows up0/up1: IPv4 %d/%d, IPv6 %d/%d", mode, rx, out, s.Drops,
				len(flows["up0/4"]), len(flows["up1/4"]), len(flows["up0/6"]), len(flows["up1/6"]))
			// Every IPv6 frame routed out was looked up, answered by a
			// worker's memo of recent subnets or by a walk of the trie.
			var in6 uint64
			for _, f := range frames {
				if be.BigEndian.Uint16(f[12:]) == 0x86dd {
					in6++
				}
			}
			if s.Route == nil {
				t.Fatal("stats JSON: no route report")
			}
			memo, walk := s.Route.IPv6Lookups["memo"], s.Route.IPv6Lookups["walk"]
			if memo+walk < out6 || memo+walk > in6 || memo == 0 {
				t.Errorf("IPv6 lookups: %d by the memo, %d walked; %d IPv6 frames in, %d out", memo, walk, in6, out6)
			}
			t.Logf("IPv6 lookups: %d by the memo, %d walked; %d IPv6 frames in, %d out", memo, walk, in6, out6)
			share := func(a, b int) float64 { return float64(a) / float64(a+b) }
			if f := share(len(flows["up0/4"]), len(flows["up1/4"])); f < 0.22 || f > 0.28 {
				t.Errorf("IPv4 flows on up0: %.3f of %d, want 0.25", f, len(flows["up0/4"])+len(flows["up1/4"]))
			}
			if f := share(len(flows["up0/6"]), len(flows["up1/6"])); f < 0.45 || f > 0.55 {
				t.Errorf("IPv6 flows on up0: %.3f, want 0.5", f)
			}
		})
	}
}

// Routes and neighbours change from the console while traffic flows: an
// ECMP member leaves and comes back, a more specific route comes and
// goes, 50 routes are added one by one and 100k from a file, reloads
// change the routes. Nothing is dropped, and show ecmp counts each
// member's share.
func TestConsoleRoutesUnderTraffic(t *testing.T) {
	var frames [][]byte
	w := demotraffic.Workload{Mix: demotraffic.MixControl, QPs: 2000, Frames: 6000, Seed: 3}
	if _, err := w.Generate(func(f []byte) error { frames = append(frames, bytes.Clone(f)); return nil }); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	testenv.WritePcap(t, in, frames)
	r := &daemonRig{t: t, sock: filepath.Join(dir, "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-con-%d-%s", os.Getpid(), t.Name()), stderr: &syncBuffer{}}
	cfgText := routedConfig(r.prefix, in, r.sock, true)
	r.writeConfig(cfgText)
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath)
	r.launch()
	type member struct {
		Port    string `json:"port"`
		Packets uint64 `json:"packets"`
		Buckets int    `json:"buckets"`
	}
	type group struct {
		Prefixes []string `json:"prefixes"`
		Members  []member `json:"members"`
	}
	ecmp := func() []group {
		var g []group
		r.consoleJSON(&g, "show", "ecmp")
		return g
	}
	mustRun := func(args ...string) {
		t.Helper()
		if res := r.console(args...); res.code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, res.code, res.stdout, res.stderr)
		}
	}
	time.Sleep(300 * time.Millisecond)
	g := ecmp()
	if len(g) != 1 || len(g[0].Members) != 2 || g[0].Members[0].Packets == 0 || g[0].Members[1].Packets == 0 {
		t.Fatalf("show ecmp: %+v", g)
	}
	if a, b := g[0].Members[0].Packets, g[0].Members[1].Packets; float64(a)/float64(a+b) < 0.4 || float64(a)/float64(a+b) > 0.6 {
		t.Errorf("members' packets %d and %d: not about even", a, b)
	}
	for i := 0; i < 3; i++ {
		mustRun("route", "add", "0.0.0.0/0", "via", "192.168.0.2", "port", "up0")
		mustRun("route", "add", "10.0.0.0/16", "via", "192.168.1.2", "port", "up1")
		mustRun("route", "del", "10.0.0.0/16")
		mustRun("route", "add", "0.0.0.0/0", "via", "192.168.0.2", "port", "up0", "via", "192.168.1.2", "port", "up1")
	}
	// A burst of routes, as a routing protocol converging would send.
	for i := 0; i < 50; i++ {
		mustRun("route", "add", fmt.Sprintf("198.18.%d.0/24", i), "via", "192.168.1.2", "port", "up1")
	}
	var fib struct {
		Routes []struct {
			Prefix string `json:"prefix"`
			Source string `json:"source"`
		} `json:"routes"`
	}
	r.consoleJSON(&fib, "show", "ip", "fib", "198.18.0.0/16")
	if len(fib.Routes) != 50 || fib.Routes[0].Source != "static" {
		t.Errorf("show ip fib 198.18.0.0/16: %+v", fib.Routes)
	}
	// 100k routes at once, as a routing protocol converging would send.
	var lines []string
	for i := 0; i < 100000; i++ {
		lines = append(lines, fmt.Sprintf("%d.%d.%d.0/24 via 192.168.1.2 port up1", 11+i>>16, i>>8&255, i&255))
	}
	routes := filepath.Join(dir, "routes.txt")
	if err := os.WriteFile(routes, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var load struct {
		Seconds float64 `json:"seconds"`
	}
	r.consoleJSON(&load, "route", "load", routes)
	t.Logf("route load: 100000 routes in %.3f s (%.0f routes/s) under traffic", load.Seconds, 100000/load.Seconds)
	r.consoleJSON(&fib, "show", "ip", "fib", "12.134.159.77")
	if len(fib.Routes) != 1 || fib.Routes[0].Prefix != "12.134.159.0/24" {
		t.Errorf("show ip fib 12.134.159.77 after route load: %+v", fib.Routes)
	}
	// A reload that takes up1 out of the default route and adds a route,
	// then one that puts the file back: applied live.
	ecmpRoute := `via = [{ port = "up0", gateway = "192.168.0.2" }, { port = "up1", gateway = "192.168.1.2" }]`
	r.writeConfig(strings.Replace(cfgText, ecmpRoute, `via = [{ port = "up0", gateway = "192.168.0.2" }]
[[route]]
prefix = "10.0.0.0/16"
via = [{ port = "up1", gateway = "192.168.1.2" }]`, 1))
	mustRun("reload")
	r.consoleJSON(&fib, "show", "ip", "fib", "10.0.0.0/16")
	if len(fib.Routes) != 1 || fib.Routes[0].Prefix != "10.0.0.0/16" {
		t.Errorf("after reload, show ip fib 10.0.0.0/16: %+v", fib.Routes)
	}
	if g := ecmp(); len(g) != 0 {
		t.Errorf("after reload, ECMP groups %+v", g)
	}
	r.writeConfig(cfgText)
	mustRun("reload")
	if g := ecmp(); len(g) != 1 {
		t.Errorf("after the second reload, ECMP groups %+v", g)
	}
	time.Sleep(200 * time.Millisecond)
	f := r.fwd()
	for reason, n := range f.Drops {
		if n != 0 {
			t.Errorf("%d frames dropped as %s during the route changes", n, reason)
		}
	}
	if g := ecmp(); len(g) != 1 || g[0].Members[1].Packets == 0 {
		t.Errorf("show ecmp after the changes: %+v", g)
	}
}
