package telemetry

import (
	"bytes"
	"encoding/json"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"roce-fwd/daemon"
	"roce-fwd/dpdk"
	"roce-fwd/fib"
)

// telQuery sends each command on one connection to EAL's telemetry socket
// and returns the value of each reply.
func telQuery(t *testing.T, cmds ...string) []any {
	t.Helper()
	path := dpdk.TelemetrySocket()
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatalf("telemetry socket %q: %v", path, err)
	}
	defer conn.Close()
	buf := make([]byte, 1<<16)
	read := func() []byte {
		if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		return buf[:n]
	}
	read() // greeting
	var out []any
	for _, cmd := range cmds {
		if _, err := conn.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		raw := read()
		var reply map[string]any
		if err := json.Unmarshal(raw, &reply); err != nil {
			t.Fatalf("%s: %q: %v", cmd, raw, err)
		}
		name, _, _ := strings.Cut(cmd, ",")
		out = append(out, reply[name])
	}
	return out
}

// at walks a decoded JSON value by dict keys and array indexes.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func TestDPDKCommands(t *testing.T) {
	var calls atomic.Int32 // called on DPDK's telemetry thread
	if err := RegisterDPDK(func() daemon.Report { calls.Add(1); return testReport() }); err != nil {
		t.Fatal(err)
	}
	r := telQuery(t, "/roce/stats", "/roce/qos", "/roce/qos,p1", "/roce/qos,nosuch", "/roce/pfc,p0", "/roce/lcores")
	if n := calls.Load(); n != 6 {
		t.Errorf("6 commands called the source %d times", n)
	}
	stats, qosAll, qos1, qosBad, pfc, lcores := r[0], r[1], r[2], r[3], r[4], r[5]
	for _, c := range []struct {
		got  any
		want any
	}{
		{at(stats, "mode"), "roce"},
		{at(stats, "duration_ms"), 12500.0},
		{at(stats, "queued"), 21.0},
		{at(stats, "pfc_generated"), 22.0},
		{at(stats, "ports", "p0", "rx_packets"), 1234.0},
		{at(stats, "ports", "p0", "tx_dropped"), 17.0},
		{at(stats, "ports", "p0", "driver"), "net_pcap"},
		{at(stats, "ports", "p0", "link"), "up, 100 Gbps, full-duplex"},
		{at(stats, "ports", "p1", "port_id"), 1.0},
		{at(stats, "drops", "qos_wred"), 7.0},
		{at(stats, "drops", "stop_discard"), 0.0},
		{at(stats, "roce", "p0", "cnp"), 7008.0},
		{at(stats, "roce", "p0", "ecn", "ce"), 7012.0},
		{at(stats, "roce", "p0", "malformed", "bad_tver"), 7015.0}, // '-' is not allowed in keys
		{at(stats, "qp_table", "evictions"), 35.0},

		{at(qosAll, "p1", "ecn_marked", 3), 3005.0},
		{at(qos1, "p1", "ecn_marked", 3), 3005.0},
		{at(qos1, "p1", "drop_lossless_overflow", 3), 3009.0},
		{at(qos1, "p1", "paused_ns", 3), 2.5e9},
		{at(qos1, "p1", "ecn_marked", 2), 0.0},
		{qosBad, nil},

		{at(pfc, "p0", "mode"), "pfc"},
		{at(pfc, "p0", "tx_xoff", 3), 304.0},
		{at(pfc, "p0", "rx_xoff", 3), 302.0},
		{at(pfc, "p0", "watchdog_storms_detected", 3), 306.0},
		{at(pfc, "p0", "watchdog_in_storm", 3), 1.0},
		{at(pfc, "p0", "rx_pause"), 41.0},

		{at(lcores, "1", "packets"), 5001.0},
		{at(lcores, "1", "busy_cycles"), 5002.0},
		{at(lcores, "1", "cycles_per_packet"), "123.5"},
		{at(lcores, "1", "empty_poll_pct"), "50.0"},
		{at(lcores, "1", "stalls", "1ms"), 5008.0},
		{at(lcores, "1", "max_poll_gap_us"), "5010.5"},
		{at(lcores, "1", "queues", 0), "p0:0"},
	} {
		if c.got != c.want {
			t.Errorf("got %#v, want %#v", c.got, c.want)
		}
	}
	if n := len(at(qosAll, "p1", "tx_bytes").([]any)); n != 8 {
		t.Errorf("%d TCs in /roce/qos, want 8", n)
	}
	for i, b := range r {
		if js, _ := json.Marshal(b); len(js) > 16*1024-64 {
			t.Errorf("reply %d is %d bytes, near DPDK's 16 KiB", i, len(js))
		}
	}
}

func TestDPDKFlowCommands(t *testing.T) {
	flows := newFakeFlows()
	if err := RegisterDPDK(func() daemon.Report { r := testReport(); r.Flows = flows; return r }); err != nil {
		t.Fatal(err)
	}
	r := telQuery(t, "/roce/flows,p0")
	if got, want := flows.listed(), map[uint16]int{0: 1}; !maps.Equal(got, want) {
		t.Errorf("/roce/flows,p0 listed the ports' rules %v times, want %v", got, want)
	}
	r = append(r, telQuery(t, "/roce/flows,1", "/roce/flows", "/roce/flows,nosuch", "/roce/offload", "/roce/offload,p1", "/roce/offload,nosuch")...)
	flows0, flows1, flowsNone, flowsBad, off, off1, offBad := r[0], r[1], r[2], r[3], r[4], r[5], r[6]
	for _, c := range []struct {
		got  any
		want any
	}{
		{at(flows0, "p0", "0", "id"), 0.0},
		{at(flows0, "p0", "0", "group"), 0.0},
		{at(flows0, "p0", "0", "priority"), 1.0},
		{at(flows0, "p0", "0", "where"), "sw"},
		{at(flows0, "p0", "0", "packets"), 601.0},
		{at(flows0, "p0", "0", "bytes"), 602.0},
		{at(flows0, "p0", "0", "green"), nil}, // no meter
		{at(flows0, "p0", "4", "id"), 4.0},
		{at(flows0, "p0", "4", "group"), 2.0},
		{at(flows0, "p0", "4", "packets"), 603.0},
		{at(flows0, "p0", "4", "green"), 605.0},
		{at(flows0, "p0", "4", "yellow"), 606.0},
		{at(flows0, "p0", "4", "red"), 607.0},

		// By port id, as the console's flow commands.
		{at(flows1, "p1", "7", "where"), "hw"},
		{at(flows1, "p1", "7", "packets"), 611.0},
		{at(flows1, "p1", "7", "bytes"), 612.0},
		{at(flows1, "p1", "8", "priority"), 1.0},
		{at(flows1, "p1", "8", "packets"), nil}, // no count action
		{at(flows1, "p1", "9", "packets"), 613.0},
		{at(flows1, "p1", "9", "green"), nil}, // NIC meters' colours are not read
		{at(flows1, "p1", "10", "group"), 3.0},
		{at(flows1, "p1", "10", "packets"), nil},
		{at(flows1, "p1", "10", "count_error"), "query failed"},
		{flowsNone, nil},
		{flowsBad, nil},

		{at(off, "p0", "port_id"), 0.0},
		{at(off, "p0", "backend"), "software"},
		{at(off, "p0", "engine"), "none"},
		{at(off, "p0", "driver"), "net_pcap"},
		{at(off, "p0", "rules_hw"), 0.0},
		{at(off, "p0", "rules_sw"), 2.0},
		{at(off, "p0", "failed"), 63.0},
		{at(off, "p0", "not_applicable"), 61.0},
		{at(off, "p1", "backend"), "rte_flow"},
		{at(off, "p1", "engine"), "rte_flow"},
		{at(off, "p1", "rules_hw"), 4.0},
		{at(off, "p1", "inserted"), 62.0},
		{at(off, "p1", "destroyed"), 64.0},
		{at(off1, "p1", "inserted"), 62.0},
		{at(off1, "p0"), nil},
		{offBad, nil},
	} {
		if c.got != c.want {
			t.Errorf("got %#v, want %#v", c.got, c.want)
		}
	}
	if m, _ := at(flows0, "p0").(map[string]any); len(m) != 2 {
		t.Errorf("%d rules of p0 in /roce/flows,p0, want 2", len(m))
	}
	if m, _ := at(flows1, "p1").(map[string]any); len(m) != 4 {
		t.Errorf("%d rules of p1 in /roce/flows,1, want 4", len(m))
	}
}

// dpdk-telemetry.py, the tool operators use, finds the socket by file
// prefix and shows the replies.
func TestDPDKTelemetryScript(t *testing.T) {
	script, err := exec.LookPath("dpdk-telemetry.py")
	if err != nil {
		t.Skip("dpdk-telemetry.py is not installed")
	}
	if err := RegisterDPDK(testReport); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Base(filepath.Dir(dpdk.TelemetrySocket()))
	cmd := exec.Command(script, "-f", prefix)
	cmd.Stdin = strings.NewReader("/roce/stats\n/roce/pfc,p0\nquit\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s -f %s: %v\n%s", script, prefix, err, stderr.Bytes())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 replies, got:\n%s", out)
	}
	var stats, pfc map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &stats); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &pfc); err != nil {
		t.Fatal(err)
	}
	if got := at(stats, "/roce/stats", "ports", "p0", "rx_packets"); got != 1234.0 {
		t.Errorf("p0 rx_packets %v in:\n%s", got, lines[0])
	}
	if got := at(pfc, "/roce/pfc", "p0", "tx_xoff", 3); got != 304.0 {
		t.Errorf("p0 priority 3 tx_xoff %v in:\n%s", got, lines[1])
	}
}

// /roce/route's reply: not routed, and routed with an IPv6 FIB whose
// lookups the workers' memos answered in part.
func TestDPDKRouteReply(t *testing.T) {
	r := testReport()
	if got, _ := routeReply(r, ""); at(got, "routed") != false {
		t.Errorf("no routes: %v", got)
	}
	r.Route = &daemon.RouteReport{Classes: map[string]uint64{"forward": 9},
		FIB:         map[string]fib.Stats{"ipv4": {Routes: 3}, "ipv6": {Routes: 4}},
		IPv6Lookups: map[string]uint64{"memo": 5, "walk": 2}}
	got, err := routeReply(r, "")
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(got)
	var v any
	json.Unmarshal(js, &v)
	for _, c := range []struct{ got, want any }{
		{at(v, "classes", "forward"), 9.0},
		{at(v, "fib", "ipv6", "routes"), 4.0},
		{at(v, "fib", "ipv6", "lookups_memo"), 5.0},
		{at(v, "fib", "ipv6", "lookups_walk"), 2.0},
		{at(v, "fib", "ipv4", "lookups_memo"), nil},
	} {
		if c.got != c.want {
			t.Errorf("got %#v, want %#v in %s", c.got, c.want, js)
		}
	}
}
