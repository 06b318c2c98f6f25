package telemetry

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"roce-fwd/daemon"
	"roce-fwd/pipeline"
)

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

// scrape serves src and returns one scrape of /metrics, parsed.
func scrape(t *testing.T, src Source) map[string]*dto.MetricFamily {
	t.Helper()
	s, err := Serve(t.Context(), "127.0.0.1:0", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(get(t, "http://"+s.Addr()+"/metrics")))
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// sample finds the sample of family name whose labels include want.
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	mf := mfs[name]
	if mf == nil {
		return nil, false
	}
	for _, m := range mf.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match == len(want) {
			return m, true
		}
	}
	return nil, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return m.Untyped.GetValue()
}

func TestMetrics(t *testing.T) {
	defer func(f func() uint64) { tscHz = f }(tscHz)
	tscHz = func() uint64 { return 2_400_000_000 }
	var calls atomic.Int32
	mfs := scrape(t, func() daemon.Report { calls.Add(1); return testReport() })
	if n := calls.Load(); n != 1 {
		t.Errorf("one scrape called the source %d times", n)
	}
	type want struct {
		name   string
		labels map[string]string
		value  float64
		typ    dto.MetricType
	}
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	counter, gauge := dto.MetricType_COUNTER, dto.MetricType_GAUGE
	for _, w := range []want{
		{"rocefwd_info", l("mode", "roce"), 1, gauge},
		{"rocefwd_forwarding_duration_seconds", nil, 12.5, gauge},
		{"rocefwd_queued_packets", nil, 21, gauge},
		{"rocefwd_pfc_generated_frames_total", nil, 22, counter},
		{"rocefwd_drops_total", l("reason", "qos_wred"), 7, counter},
		{"rocefwd_drops_total", l("reason", "tx_full"), 11, counter},
		{"rocefwd_drops_total", l("reason", "stop_discard"), 0, counter},

		{"rocefwd_port_rx_packets_total", l("port", "p0", "driver", "net_pcap"), 1234, counter},
		{"rocefwd_port_rx_bytes_total", l("port", "p0"), 5678, counter},
		{"rocefwd_port_tx_packets_total", l("port", "p0"), 1111, counter},
		{"rocefwd_port_tx_bytes_total", l("port", "p0"), 2222, counter},
		{"rocefwd_port_rx_missed_packets_total", l("port", "p0"), 13, counter},
		{"rocefwd_port_rx_errors_total", l("port", "p0"), 14, counter},
		{"rocefwd_port_rx_nombuf_total", l("port", "p0"), 15, counter},
		{"rocefwd_port_tx_errors_total", l("port", "p0"), 16, counter},
		{"rocefwd_port_tx_dropped_packets_total", l("port", "p0"), 17, counter},
		{"rocefwd_port_rx_packets_total", l("port", "p1", "driver", "net_null"), 99, counter},
		{"rocefwd_port_link_up", l("port", "p0"), 1, gauge},
		{"rocefwd_port_link_up", l("port", "p1"), 0, gauge},
		{"rocefwd_port_link_speed_bytes", l("port", "p0"), 100e9 / 8, gauge},

		{"rocefwd_lcore_packets_total", l("lcore", "1", "socket", "0"), 5001, counter},
		{"rocefwd_lcore_busy_cycles_total", l("lcore", "1"), 5002, counter},
		{"rocefwd_lcore_bursts_total", l("lcore", "1"), 5003, counter},
		{"rocefwd_lcore_empty_polls_total", l("lcore", "1"), 5004, counter},
		{"rocefwd_lcore_stalls_total", l("lcore", "1", "over", "50us"), 5006, counter},
		{"rocefwd_lcore_stalls_total", l("lcore", "1", "over", "10ms"), 5009, counter},
		{"rocefwd_lcore_poll_gap_max_seconds", l("lcore", "1"), 5010.5e-6, gauge},
		{"rocefwd_tsc_frequency_hertz", nil, 2.4e9, gauge},

		{"rocefwd_qos_enqueued_packets_total", l("port", "p1", "tc", "3"), 3001, counter},
		{"rocefwd_qos_enqueued_bytes_total", l("port", "p1", "tc", "3"), 3002, counter},
		{"rocefwd_qos_tx_packets_total", l("port", "p1", "tc", "3"), 3003, counter},
		{"rocefwd_qos_tx_bytes_total", l("port", "p1", "tc", "3"), 3004, counter},
		{"rocefwd_qos_ecn_marked_packets_total", l("port", "p1", "tc", "3"), 3005, counter},
		{"rocefwd_qos_ecn_marked_packets_total", l("port", "p1", "tc", "2"), 0, counter},
		{"rocefwd_qos_dropped_packets_total", l("port", "p1", "tc", "3", "reason", "tail"), 3006, counter},
		{"rocefwd_qos_dropped_packets_total", l("port", "p1", "tc", "3", "reason", "wred"), 3007, counter},
		{"rocefwd_qos_dropped_packets_total", l("port", "p1", "tc", "3", "reason", "watchdog"), 3008, counter},
		{"rocefwd_qos_dropped_packets_total", l("port", "p1", "tc", "3", "reason", "lossless_overflow"), 3009, counter},
		{"rocefwd_qos_max_depth_bytes", l("port", "p1", "tc", "3"), 3010, gauge},
		{"rocefwd_qos_depth_bytes", l("port", "p1", "tc", "3"), 3011, gauge},
		{"rocefwd_qos_paused_seconds_total", l("port", "p1", "tc", "3"), 2.5, counter},

		{"rocefwd_pfc_mode_info", l("port", "p0", "mode", "pfc"), 1, gauge},
		{"rocefwd_pfc_rx_frames_total", l("port", "p0", "priority", "3"), 301, counter},
		{"rocefwd_pfc_rx_xoff_frames_total", l("port", "p0", "priority", "3"), 302, counter},
		{"rocefwd_pfc_rx_xon_frames_total", l("port", "p0", "priority", "3"), 303, counter},
		{"rocefwd_pfc_tx_xoff_frames_total", l("port", "p0", "priority", "3"), 304, counter},
		{"rocefwd_pfc_tx_xon_frames_total", l("port", "p0", "priority", "3"), 305, counter},
		{"rocefwd_pfc_tx_xoff_frames_total", l("port", "p0", "priority", "4"), 0, counter},
		{"rocefwd_pfc_paused_seconds_total", l("port", "p0", "priority", "3"), 1.5, counter},
		{"rocefwd_pfc_watchdog_storms_detected_total", l("port", "p0", "tc", "3"), 306, counter},
		{"rocefwd_pfc_watchdog_storms_restored_total", l("port", "p0", "tc", "3"), 307, counter},
		{"rocefwd_pfc_watchdog_dropped_packets_total", l("port", "p0", "tc", "3"), 308, counter},
		{"rocefwd_pfc_watchdog_in_storm", l("port", "p0", "tc", "3"), 1, gauge},
		{"rocefwd_pfc_rx_pause_frames_total", l("port", "p0"), 41, counter},
		{"rocefwd_pfc_tx_frames_total", l("port", "p0"), 42, counter},
		{"rocefwd_pfc_tx_failed_frames_total", l("port", "p0"), 43, counter},

		{"rocefwd_roce_rx_frames_total", l("port", "p0"), 7001, counter},
		{"rocefwd_roce_rx_bytes_total", l("port", "p0"), 7002, counter},
		{"rocefwd_roce_rocev2_frames_total", l("port", "p0"), 7003, counter},
		{"rocefwd_roce_rocev2_bytes_total", l("port", "p0"), 7004, counter},
		{"rocefwd_roce_other_frames_total", l("port", "p0"), 7005, counter},
		{"rocefwd_roce_ip_frames_total", l("port", "p0", "version", "4"), 7006, counter},
		{"rocefwd_roce_ip_frames_total", l("port", "p0", "version", "6"), 7007, counter},
		{"rocefwd_roce_cnp_frames_total", l("port", "p0"), 7008, counter},
		{"rocefwd_roce_ecn_frames_total", l("port", "p0", "ecn", "not_ect"), 7009, counter},
		{"rocefwd_roce_ecn_frames_total", l("port", "p0", "ecn", "ce"), 7012, counter},
		{"rocefwd_roce_icrc_checks_total", l("port", "p0", "result", "ok"), 7013, counter},
		{"rocefwd_roce_icrc_checks_total", l("port", "p0", "result", "bad"), 7014, counter},
		{"rocefwd_roce_malformed_frames_total", l("port", "p0", "reason", "bad_tver"), 7015, counter},
		{"rocefwd_roce_malformed_frames_total", l("port", "p0", "reason", "truncated_udp"), 0, counter},
		{"rocefwd_roce_pfc_frames_total", l("port", "p0"), 7016, counter},
		{"rocefwd_roce_pause_frames_total", l("port", "p0"), 7017, counter},
		{"rocefwd_roce_opcode_frames_total", l("port", "p0", "transport", "RC", "opcode", "RC SEND Only", "code", "0x4"), 7018, counter},
		{"rocefwd_roce_opcode_frames_total", l("port", "p0", "transport", "CNP", "opcode", "CNP", "code", "0x81"), 7008, counter},
		{"rocefwd_roce_tc_frames_total", l("port", "p0", "tc", "3"), 7019, counter},

		{"rocefwd_qp_table_slots", nil, 4096, gauge},
		{"rocefwd_qp_table_used_slots", nil, 33, gauge},
		{"rocefwd_qp_flows", nil, 33, gauge},
		{"rocefwd_qp_table_inserts_total", nil, 34, counter},
		{"rocefwd_qp_table_evictions_total", nil, 35, counter},
		{"rocefwd_qp_table_aged_total", nil, 36, counter},
		{"rocefwd_qp_packets_total", l("src", "10.0.0.1", "dst", "10.0.0.2", "qp", "0x001234"), 8001, counter},
		{"rocefwd_qp_bytes_total", l("src", "10.0.0.1", "dst", "10.0.0.2", "qp", "0x001234"), 8002, counter},
		{"rocefwd_qp_packets_total", l("src", "fd00::1", "dst", "fd00::2", "qp", "0xabcdef"), 8003, counter},
		{"rocefwd_qp_bytes_total", l("src", "fd00::1", "dst", "fd00::2", "qp", "0xabcdef"), 8004, counter},

		{"rocefwd_flow_rule_packets_total", l("port", "p0", "rule", "0", "group", "0", "where", "sw"), 601, counter},
		{"rocefwd_flow_rule_bytes_total", l("port", "p0", "rule", "0", "group", "0", "where", "sw"), 602, counter},
		{"rocefwd_flow_rule_packets_total", l("port", "p0", "rule", "4", "group", "2", "where", "sw"), 603, counter},
		{"rocefwd_flow_rule_bytes_total", l("port", "p0", "rule", "4", "group", "2", "where", "sw"), 604, counter},
		{"rocefwd_flow_meter_packets_total", l("port", "p0", "rule", "4", "color", "green"), 605, counter},
		{"rocefwd_flow_meter_packets_total", l("port", "p0", "rule", "4", "color", "yellow"), 606, counter},
		{"rocefwd_flow_meter_packets_total", l("port", "p0", "rule", "4", "color", "red"), 607, counter},
		{"rocefwd_flow_rule_packets_total", l("port", "p1", "rule", "7", "group", "1", "where", "hw"), 611, counter},
		{"rocefwd_flow_rule_bytes_total", l("port", "p1", "rule", "7", "group", "1", "where", "hw"), 612, counter},
		{"rocefwd_flow_rule_packets_total", l("port", "p1", "rule", "9", "group", "1", "where", "hw"), 613, counter},
		{"rocefwd_flow_rules", l("port", "p0", "where", "sw"), 2, gauge},
		{"rocefwd_flow_rules", l("port", "p0", "where", "hw"), 0, gauge},
		{"rocefwd_flow_rules", l("port", "p1", "where", "hw"), 4, gauge},
		{"rocefwd_flow_rules", l("port", "p1", "where", "sw"), 0, gauge},
		{"rocefwd_flow_backend_info", l("port", "p0", "backend", "software", "engine", "none", "driver", "net_pcap"), 1, gauge},
		{"rocefwd_flow_backend_info", l("port", "p1", "backend", "rte_flow", "engine", "rte_flow", "driver", "mlx5_pci"), 1, gauge},
		{"rocefwd_flow_inserted_total", l("port", "p0"), 0, counter},
		{"rocefwd_flow_inserted_total", l("port", "p1"), 62, counter},
		{"rocefwd_flow_insert_failures_total", l("port", "p0"), 63, counter},
		{"rocefwd_flow_not_applicable_packets_total", l("port", "p0"), 61, counter},
		{"rocefwd_flow_not_applicable_packets_total", l("port", "p1"), 0, counter},
	} {
		m, ok := sample(mfs, w.name, w.labels)
		if !ok {
			t.Errorf("%s%v: missing", w.name, w.labels)
			continue
		}
		if got := value(m); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
		if typ := mfs[w.name].GetType(); typ != w.typ {
			t.Errorf("%s is a %v, want %v", w.name, typ, w.typ)
		}
	}
	// Every drop reason is a series from the start, and every malformed
	// reason but "none".
	if n := len(mfs["rocefwd_drops_total"].GetMetric()); n != int(pipeline.NumReasons) {
		t.Errorf("%d drop reasons, want %d", n, pipeline.NumReasons)
	}
	if _, ok := sample(mfs, "rocefwd_roce_malformed_frames_total", map[string]string{"reason": "none"}); ok {
		t.Error(`malformed reason "none" exported`)
	}
	// One series per QP flow of the report's top list, no more.
	if n := len(mfs["rocefwd_qp_packets_total"].GetMetric()); n != 2 {
		t.Errorf("%d rocefwd_qp_packets_total series, want 2 (the report's top QPs)", n)
	}
	// The dedicated registry carries the runtime and process metrics too.
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", "promhttp_metric_handler_requests_total"} {
		if mfs[name] == nil {
			t.Errorf("%s missing", name)
		}
	}
}

// Only counted rules have hit series, and only software meters colour
// series; each family carries exactly its labels; a scrape lists each
// port's rules once.
func TestFlowMetrics(t *testing.T) {
	flows := newFakeFlows()
	mfs := scrape(t, func() daemon.Report { r := testReport(); r.Flows = flows; return r })
	if got, want := flows.listed(), map[uint16]int{0: 1, 1: 1}; !maps.Equal(got, want) {
		t.Errorf("one scrape listed the ports' rules %v times, want %v", got, want)
	}
	for _, c := range []struct {
		name string
		n    int
	}{
		// p0 rules 0 and 4, p1 rules 7 and 9: not 8 (no count action)
		// nor 10 (its query failed).
		{"rocefwd_flow_rule_packets_total", 4},
		{"rocefwd_flow_rule_bytes_total", 4},
		// p0 rule 4's colours; not p1 rule 9's, a NIC meter.
		{"rocefwd_flow_meter_packets_total", 3},
		{"rocefwd_flow_rules", 4},
		{"rocefwd_flow_backend_info", 2},
	} {
		if n := len(mfs[c.name].GetMetric()); n != c.n {
			t.Errorf("%d %s series, want %d", n, c.name, c.n)
		}
	}
	for name, want := range map[string][]string{
		"rocefwd_flow_rule_packets_total":           {"group", "port", "rule", "where"},
		"rocefwd_flow_rule_bytes_total":             {"group", "port", "rule", "where"},
		"rocefwd_flow_meter_packets_total":          {"color", "port", "rule"},
		"rocefwd_flow_rules":                        {"port", "where"},
		"rocefwd_flow_backend_info":                 {"backend", "driver", "engine", "port"},
		"rocefwd_flow_inserted_total":               {"port"},
		"rocefwd_flow_insert_failures_total":        {"port"},
		"rocefwd_flow_not_applicable_packets_total": {"port"},
	} {
		for _, m := range mfs[name].GetMetric() {
			var got []string
			for _, lp := range m.GetLabel() {
				got = append(got, lp.GetName())
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s labels %v, want %v", name, got, want)
			}
		}
	}
	if m, ok := sample(mfs, "rocefwd_flow_rule_packets_total", map[string]string{"port": "p1", "rule": "8"}); ok {
		t.Errorf("a rule without a count action exported as %v", m)
	}
	if m, ok := sample(mfs, "rocefwd_flow_meter_packets_total", map[string]string{"port": "p1"}); ok {
		t.Errorf("NIC meter colours exported as %v", m)
	}
}

// A report without flow rules has no flow series.
func TestFlowMetricsWithoutFlows(t *testing.T) {
	r := testReport()
	r.Flows = nil
	for name := range scrape(t, func() daemon.Report { return r }) {
		if strings.HasPrefix(name, "rocefwd_flow_") {
			t.Errorf("%s exported without flow rules", name)
		}
	}
}

// A report of "io" mode has no QoS, PFC or RoCE section: no such series.
func TestMetricsIOMode(t *testing.T) {
	r := testReport()
	r.Mode, r.QoS, r.PFC, r.RoCE = "io", nil, nil, nil
	mfs := scrape(t, func() daemon.Report { return r })
	for name := range mfs {
		if strings.HasPrefix(name, "rocefwd_qos_") || strings.HasPrefix(name, "rocefwd_roce_") ||
			strings.HasPrefix(name, "rocefwd_pfc_rx") || strings.HasPrefix(name, "rocefwd_qp_") {
			t.Errorf("%s exported in io mode", name)
		}
	}
	if m, ok := sample(mfs, "rocefwd_port_rx_packets_total", map[string]string{"port": "p0"}); !ok || value(m) != 1234 {
		t.Errorf("port counters missing in io mode")
	}
}

// A routed config's counters: packets per route class, and the IPv6
// lookups by how they were answered (only with an IPv6 FIB).
func TestRouteMetrics(t *testing.T) {
	r := testReport()
	r.Route = &daemon.RouteReport{Classes: map[string]uint64{"forward": 9, "ecmp": 4, "fragment": 0},
		IPv6Lookups: map[string]uint64{"memo": 5, "walk": 2}}
	mfs := scrape(t, func() daemon.Report { return r })
	for _, w := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"rocefwd_route_packets_total", map[string]string{"class": "ecmp"}, 4},
		{"rocefwd_fib_lookups_total", map[string]string{"family": "ipv6", "answer": "memo"}, 5},
		{"rocefwd_fib_lookups_total", map[string]string{"family": "ipv6", "answer": "walk"}, 2},
	} {
		if m, ok := sample(mfs, w.name, w.labels); !ok || value(m) != w.value {
			t.Errorf("%s%v: %v (found %v), want %v", w.name, w.labels, m, ok, w.value)
		}
	}
	r.Route.IPv6Lookups = nil // IPv4 routes only
	if mf := scrape(t, func() daemon.Report { return r })["rocefwd_fib_lookups_total"]; mf != nil {
		t.Errorf("IPv6 lookups exported without an IPv6 FIB: %v", mf)
	}
}

// Before EAL measured the TSC there is no frequency to give.
func TestTSCFrequencyUnknown(t *testing.T) {
	defer func(f func() uint64) { tscHz = f }(tscHz)
	tscHz = func() uint64 { return 0 }
	if mf := scrape(t, testReport)["rocefwd_tsc_frequency_hertz"]; mf != nil {
		t.Errorf("TSC frequency exported as %v while unknown", mf)
	}
}

func TestLint(t *testing.T) {
	problems, err := testutil.CollectAndLint(NewCollector(testReport))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
}

func TestIndexPage(t *testing.T) {
	s, err := Serve(t.Context(), "127.0.0.1:0", testReport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if body := get(t, "http://"+s.Addr()+"/"); !strings.Contains(body, "/metrics") {
		t.Errorf("index page %q does not link /metrics", body)
	}
	resp, err := http.Get("http://" + s.Addr() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/nope: %s", resp.Status)
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	s, err := Serve(t.Context(), ln.Addr().String(), testReport, nil)
	if err == nil {
		s.Close()
		t.Fatal("listening on a busy address succeeded")
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("error %v is not EADDRINUSE", err)
	}
}

func TestServeStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s, err := Serve(ctx, "127.0.0.1:0", testReport, nil)
	if err != nil {
		t.Fatal(err)
	}
	get(t, "http://"+s.Addr()+"/metrics")
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("tcp", s.Addr())
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still listening after the context ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close after the context ended: %v", err)
	}
}

func TestParseLink(t *testing.T) {
	for _, c := range []struct {
		link  string
		up    bool
		speed float64
	}{
		{"down", false, 0},
		{"up, speed unknown, full-duplex", true, 0},
		{"up, 25 Gbps, full-duplex", true, 25e9 / 8},
		{"up, 100 Mbps, half-duplex", true, 100e6 / 8},
		{"", false, 0},
	} {
		up, speed := parseLink(c.link)
		if up != c.up || speed != c.speed {
			t.Errorf("parseLink(%q) = %v, %v; want %v, %v", c.link, up, speed, c.up, c.speed)
		}
	}
}
