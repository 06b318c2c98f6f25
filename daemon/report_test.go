package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"roce-fwd/pipeline"
	"roce-fwd/qpstats"
	"roce-fwd/rocestats"
)

// fullReport has something in every part of the report.
func fullReport() Report {
	r := Report{
		DurationS: 2.5,
		Mode:      "roce",
		Ports: []PortReport{
			{Name: "in", PortID: 0, Driver: "net_pcap", Link: "up, 10 Gbps, full-duplex", RxPackets: 1000, RxBytes: 64000,
				TxPackets: 990, TxBytes: 63360, RxMissed: 3, RxErrors: 1, RxNoMbuf: 2, TxDropped: 10,
				IntervalS: 0.05, RxPPS: 1, TxPPS: 1}, // too short an interval for a rate
			{Name: "out", PortID: 1, Driver: "net_null", Link: "down", TxPackets: 990, TxBytes: 63360,
				IntervalS: 2, TxPPS: 495, TxBPS: 253440},
		},
		Lcores: []LcoreReport{
			{Lcore: 1, Socket: 0, Queues: []string{"in:0", "in:1"}, Packets: 1000, Mpps: 0.0004, CyclesPerPacket: 123.4,
				BusyCycles: 123400, Bursts: 30, EmptyPolls: 10, BurstHist: map[string]uint64{"0": 10, "1": 2, "32-63": 28},
				Stalls: map[string]uint64{"50us": 4, "200us": 2, "1ms": 1, "10ms": 0}, MaxPollGapUS: 1234.56},
			{Lcore: 2, Socket: 1, BurstHist: map[string]uint64{}},
		},
		Drops:     map[string]uint64{"tx_full": 10, "no_route": 0, "bad_icrc": 2},
		Queued:    4,
		Generated: 6,
		QoS: map[string][]pipeline.TCQoS{
			"out": {{TC: 0}, {TC: 3, EnqueuedPackets: 100, TxPackets: 90, ECNMarked: 7,
				Dropped: pipeline.QoSDrops{Tail: 1, WRED: 2, Watchdog: 3, LosslessOverflow: 4}, MaxDepthBytes: 1 << 20, PausedNs: 1500000}},
			"in": {{TC: 0, Dropped: pipeline.QoSDrops{Tail: 5}}, {TC: 1}},
		},
		PFC: map[string]*pipeline.PortPFC{
			"out": {Mode: "nic"},
		},
		RoCE: &RoCEReport{
			Ports: []PortRoCE{
				{Name: "in", Report: rocestats.Report{Frames: 1000, RoCE: 800, CNPs: 5,
					ECN: map[string]uint64{"ect0": 700, "ect1": 0, "ce": 50, "not_ect": 50}, ICRCOK: 798, ICRCBad: 2,
					Malformed: map[string]uint64{"short_bth": 1, "bad_udp_len": 3}}},
				{Name: "out", Report: rocestats.Report{ECN: map[string]uint64{}, Malformed: map[string]uint64{}}},
			},
			QPTable: qpstats.TableStats{Slots: 131072, Used: 6, Bytes: 28 << 20, Evictions: 1, Aged: 2},
			QPFlows: 6,
		},
	}
	in := &pipeline.PortPFC{Mode: "software", RxPause: 6}
	in.RxFrames[3], in.RxXOFF[3], in.RxXON[3], in.PausedNs[3], in.TxXOFF[3], in.TxXON[3] = 4, 3, 1, 2000000, 2, 2
	in.Watchdog[3] = pipeline.Watchdog{StormsDetected: 1, StormsRestored: 1, Dropped: 9}
	r.PFC["in"] = in
	for i := range 6 { // one more than the text shows
		r.TopQPs = append(r.TopQPs, qpstats.FlowReport{Src: "10.0.0.1", Dst: "10.0.0.2", QP: uint32(0x11 + i),
			Packets: uint64(100 - i), Bytes: 6400, Gaps: 1, OutOfOrder: 2, NAKs: map[string]uint64{"seq": 1, "remote_access": 2},
			RNRNAKs: 4, CNPs: 5, CE: 6})
	}
	return r
}

func TestWriteText(t *testing.T) {
	var b bytes.Buffer
	fullReport().WriteText(&b)
	want := []string{
		"  ---------------------- Forward statistics for port 0 (in) ------------------",
		"  RX-packets: 1000           RX-missed: 3              RX-bytes:  64000",
		"  RX-errors:  1              RX-nombuf: 2",
		"  TX-packets: 990            TX-dropped: 10            TX-bytes:  63360",
		"  Link: up, 10 Gbps, full-duplex, driver net_pcap",
		"  ---------------------- Forward statistics for port 1 (out) -----------------",
		"  RX-packets: 0              RX-missed: 0              RX-bytes:  0",
		"  RX-errors:  0              RX-nombuf: 0",
		"  TX-packets: 990            TX-dropped: 0             TX-bytes:  63360",
		"  Throughput (since last show, 2.0 s): Rx-pps: 0            Rx-bps: 0              Tx-pps: 495          Tx-bps: 253440",
		"  Link: down, driver net_null",
		"  " + strings.Repeat("-", 78),
		"  lcore 1 (socket 0) polls in:0 in:1: 1000 packets, 0.00 Mpps, 123.4 cycles/packet, 25.0% empty polls",
		"    packets per poll  0: 25.0%  1: 5.0%  32-63: 70.0%",
		"    longest gap between polls 1234.6 us; gaps over 50us 4, 200us 2, 1ms 1, 10ms 0",
		"  lcore 2 (socket 1) polls : 0 packets, 0.00 Mpps, 0.0 cycles/packet, 0.0% empty polls",
		"  Drops by reason: bad_icrc 2, tx_full 10",
		"  RoCE on port in: 800 of 1000 frames (80.0%), CNP 5, ECN ect0 700 ect1 0 ce 50 not-ect 50, ICRC ok 798 bad 2, malformed: bad_udp_len 3, short_bth 1",
		"  RoCE on port out: 0 of 0 frames (0.0%), CNP 0, ECN ect0 0 ect1 0 ce 0 not-ect 0, ICRC ok 0 bad 0",
		"  QP tables: 6 flows in 131072 slots (28.0 MiB of DPDK memory), 1 evictions, 2 aged out",
		"    10.0.0.1 -> 10.0.0.2 qp 0x000011: 100 packets, 6400 bytes, PSN gaps 1, out of order 2, NAKs 3, RNR 4, CNP 5, CE 6",
		"    10.0.0.1 -> 10.0.0.2 qp 0x000012: 99 packets, 6400 bytes, PSN gaps 1, out of order 2, NAKs 3, RNR 4, CNP 5, CE 6",
		"    10.0.0.1 -> 10.0.0.2 qp 0x000013: 98 packets, 6400 bytes, PSN gaps 1, out of order 2, NAKs 3, RNR 4, CNP 5, CE 6",
		"    10.0.0.1 -> 10.0.0.2 qp 0x000014: 97 packets, 6400 bytes, PSN gaps 1, out of order 2, NAKs 3, RNR 4, CNP 5, CE 6",
		"    10.0.0.1 -> 10.0.0.2 qp 0x000015: 96 packets, 6400 bytes, PSN gaps 1, out of order 2, NAKs 3, RNR 4, CNP 5, CE 6",
		"  QoS on port in:",
		"    TC      ENQUEUED           TX ECN-MARKED     TAIL     WRED    PFCWD  OVERFLOW    MAX-DEPTH  PAUSED-MS",
		"    0              0            0          0        5        0        0         0           0B      0.000",
		"  QoS on port out:",
		"    TC      ENQUEUED           TX ECN-MARKED     TAIL     WRED    PFCWD  OVERFLOW    MAX-DEPTH  PAUSED-MS",
		"    3            100           90          7        1        2        3         4         1MiB      1.500",
		"  PFC on port in (software): prio 3 rx 4 (xoff 3 xon 1) paused 2.000 ms, tx xoff 2 xon 2; TC3 watchdog storms 1 restored 1 dropped 9; 802.3x pause rx 6",
		"  PFC on port out (nic): no frames",
		"  Forwarded for 2.5 s in roce mode",
	}
	got := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, g, w)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", b.String())
	}
}

// A report of "io" mode with nothing dropped has no RoCE, QoS or PFC
// part and says there were no drops.
func TestWriteTextMinimal(t *testing.T) {
	r := Report{DurationS: 0.04, Mode: "io", Drops: map[string]uint64{"tx_full": 0},
		Ports: []PortReport{{Name: "p", PortID: 3, Driver: "net_ring", Link: "down", IntervalS: 0.1, RxPPS: 12.4}}}
	var b bytes.Buffer
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"  Throughput (since last show, 0.1 s): Rx-pps: 12 ",
		"\n  Drops by reason: none\n",
		"\n  Forwarded for 0.0 s in io mode\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"RoCE", "QP tables", "QoS", "PFC", "lcore"} {
		if strings.Contains(out, absent) {
			t.Errorf("output has %q:\n%s", absent, out)
		}
	}
}

func TestEmptyPollPct(t *testing.T) {
	for _, c := range []struct {
		bursts, empty uint64
		want          float64
	}{{0, 0, 0}, {3, 1, 25}, {0, 7, 100}, {5, 0, 0}} {
		l := LcoreReport{Bursts: c.bursts, EmptyPolls: c.empty}
		if got := l.EmptyPollPct(); got != c.want {
			t.Errorf("%d bursts, %d empty polls: %v%%, want %v%%", c.bursts, c.empty, got, c.want)
		}
	}
}

// The JSON keeps the documented --stats-json keys, indented by two spaces;
// the optional parts are left out when empty, and the flow rules are never
// part of it.
func TestWriteJSON(t *testing.T) {
	r := fullReport()
	r.Flows = nil
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "{\n  \"duration_s\": 2.5,\n") || !strings.HasSuffix(b.String(), "}\n") {
		t.Errorf("layout:\n%s", b.String())
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"duration_s", "mode", "ports", "lcores", "drops", "queued", "generated", "qos", "pfc", "roce", "top_qps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q in %s", k, b.String())
		}
	}
	if _, ok := m["Flows"]; ok || len(m) != 11 {
		t.Errorf("%d keys: %v", len(m), m)
	}
	port := m["ports"].([]any)[0].(map[string]any)
	for k, v := range map[string]float64{"port_id": 0, "rx_packets": 1000, "rx_bytes": 64000, "tx_packets": 990, "tx_bytes": 63360,
		"rx_missed": 3, "tx_dropped": 10, "rx_errors": 1, "rx_nombuf": 2, "interval_s": 0.05} {
		if port[k] != v {
			t.Errorf("ports[0].%s = %v, want %v", k, port[k], v)
		}
	}
	if port["name"] != "in" || port["driver"] != "net_pcap" || port["link"] != "up, 10 Gbps, full-duplex" {
		t.Errorf("ports[0] = %v", port)
	}
	lc := m["lcores"].([]any)[0].(map[string]any)
	if lc["lcore"] != 1.0 || lc["socket"] != 0.0 || lc["packets"] != 1000.0 || lc["cycles_per_packet"] != 123.4 ||
		fmt.Sprint(lc["queues"]) != "[in:0 in:1]" || fmt.Sprint(lc["burst_hist"]) != "map[0:10 1:2 32-63:28]" {
		t.Errorf("lcores[0] = %v", lc)
	}
	if d := m["drops"].(map[string]any); d["tx_full"] != 10.0 || d["no_route"] != 0.0 || len(d) != 3 {
		t.Errorf("drops = %v", d)
	}
	if m["queued"] != 4.0 || m["generated"] != 6.0 {
		t.Errorf("queued %v generated %v", m["queued"], m["generated"])
	}
	roce := m["roce"].(map[string]any)
	if roce["qp_flows"] != 6.0 || len(roce["ports"].([]any)) != 2 {
		t.Errorf("roce = %v", roce)
	}
	// Every flow is in the JSON, not just the text's five.
	if n := len(m["top_qps"].([]any)); n != 6 {
		t.Errorf("%d top QPs, want 6", n)
	}

	small := Report{DurationS: 1, Mode: "io", Ports: []PortReport{}, Lcores: []LcoreReport{}, Drops: map[string]uint64{}}
	b.Reset()
	if err := small.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	m = nil
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"qos", "pfc", "roce", "top_qps"} {
		if _, ok := m[k]; ok {
			t.Errorf("empty %q in %s", k, b.String())
		}
	}
	if m["queued"] != 0.0 || m["drops"] == nil || m["ports"] == nil {
		t.Errorf("minimal report %s", b.String())
	}
}
