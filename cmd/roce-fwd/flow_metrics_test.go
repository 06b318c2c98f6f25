package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsURL waits for the /metrics address the daemon logs once it
// bound its listener.
func (r *daemonRig) metricsURL() string {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, l := range strings.Split(r.stderr.String(), "\n") {
			if i := strings.Index(l, "url=http://"); i >= 0 {
				return strings.Fields(l[i+4:])[0]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("no metrics url in the log:\n%s", r.stderr.String())
	return ""
}

func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricValue is the value of the series of family name with exactly the
// labels want; ok is false when there is no such series.
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, lp := range m.GetLabel() {
			got[lp.GetName()] = lp.GetValue()
		}
		if len(got) != len(want) {
			continue
		}
		match := true
		for k, w := range want {
			match = match && got[k] == w
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// Software rules made in the console show on /metrics and in DPDK
// telemetry with the counts "flow query" gives.
func TestFlowRuleMetrics(t *testing.T) {
	r := startDaemon(t, "127.0.0.1:0", "")
	url := r.metricsURL()
	if out := r.must("flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / end"); !strings.HasPrefix(out, "Flow rule #0 created\n") {
		t.Fatalf("flow create counter:\n%s", out)
	}
	// A meter far below the replay's rate, passing red: every colour
	// counts, nothing is dropped.
	if out := r.must("flow create out egress pattern eth / end actions meter srtcm cir 1000000 cbs 1500 ebs 1500 red pass / end"); !strings.HasPrefix(out, "Flow rule #0 created\n") {
		t.Fatalf("flow create meter:\n%s", out)
	}
	time.Sleep(300 * time.Millisecond)
	r.must("stop")

	hits, bytes := r.flowHits("0", "0")
	var meter struct {
		Hits   uint64 `json:"hits"`
		Bytes  uint64 `json:"bytes"`
		Green  uint64 `json:"green"`
		Yellow uint64 `json:"yellow"`
		Red    uint64 `json:"red"`
	}
	r.consoleJSON(&meter, "flow", "query", "1", "0", "count")
	if hits == 0 || meter.Hits == 0 || meter.Red == 0 || meter.Green+meter.Yellow+meter.Red != meter.Hits {
		t.Fatalf("under traffic: counter rule %d hits, meter rule %+v", hits, meter)
	}

	fams := scrapeMetrics(t, url)
	l := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   uint64
	}{
		{"rocefwd_flow_rule_packets_total", l("port", "in", "rule", "0", "group", "0", "where", "sw"), hits},
		{"rocefwd_flow_rule_bytes_total", l("port", "in", "rule", "0", "group", "0", "where", "sw"), bytes},
		{"rocefwd_flow_rule_packets_total", l("port", "out", "rule", "0", "group", "0", "where", "sw"), meter.Hits},
		{"rocefwd_flow_rule_bytes_total", l("port", "out", "rule", "0", "group", "0", "where", "sw"), meter.Bytes},
		{"rocefwd_flow_meter_packets_total", l("port", "out", "rule", "0", "color", "green"), meter.Green},
		{"rocefwd_flow_meter_packets_total", l("port", "out", "rule", "0", "color", "yellow"), meter.Yellow},
		{"rocefwd_flow_meter_packets_total", l("port", "out", "rule", "0", "color", "red"), meter.Red},
		{"rocefwd_flow_rules", l("port", "in", "where", "sw"), 1},
		{"rocefwd_flow_rules", l("port", "in", "where", "hw"), 0},
		{"rocefwd_flow_backend_info", l("port", "in", "backend", "software", "engine", "none", "driver", "net_pcap"), 1},
		{"rocefwd_flow_backend_info", l("port", "out", "backend", "software", "engine", "none", "driver", "net_null"), 1},
		{"rocefwd_flow_inserted_total", l("port", "in"), 0},
		{"rocefwd_flow_insert_failures_total", l("port", "in"), 0},
		{"rocefwd_flow_not_applicable_packets_total", l("port", "in"), 0},
	} {
		v, ok := metricValue(fams, c.name, c.labels)
		if !ok {
			t.Errorf("no %s%v", c.name, c.labels)
		} else if v != float64(c.want) {
			t.Errorf("%s%v = %v, want %d", c.name, c.labels, v, c.want)
		}
	}
	if _, ok := metricValue(fams, "rocefwd_flow_meter_packets_total", l("port", "in", "rule", "0", "color", "green")); ok {
		t.Error("colours exported for a rule without a meter")
	}

	// The same numbers through DPDK's telemetry socket.
	tool := "/usr/bin/dpdk-telemetry.py"
	if _, err := os.Stat(tool); err != nil {
		t.Skip("dpdk-telemetry.py not installed")
	}
	cmd := exec.Command(tool, "-f", r.prefix)
	cmd.Stdin = strings.NewReader("/roce/flows,in\n/roce/offload\n")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dpdk-telemetry.py: %v\n%s", err, outb)
	}
	lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
	if len(lines) != 2 {
		t.Fatalf("dpdk-telemetry.py: want 2 replies, got:\n%s", outb)
	}
	var flows struct {
		Reply map[string]map[string]struct {
			ID      uint32  `json:"id"`
			Where   string  `json:"where"`
			Packets *uint64 `json:"packets"`
			Bytes   *uint64 `json:"bytes"`
		} `json:"/roce/flows"`
	}
	var off struct {
		Reply map[string]struct {
			Backend string `json:"backend"`
			Engine  string `json:"engine"`
			RulesSW int    `json:"rules_sw"`
			RulesHW int    `json:"rules_hw"`
		} `json:"/roce/offload"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &flows); err != nil {
		t.Fatalf("/roce/flows,in: %v\n%s", err, lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &off); err != nil {
		t.Fatalf("/roce/offload: %v\n%s", err, lines[1])
	}
	rule, ok := flows.Reply["in"]["0"]
	if len(flows.Reply) != 1 || len(flows.Reply["in"]) != 1 || !ok || rule.ID != 0 || rule.Where != "sw" ||
		rule.Packets == nil || *rule.Packets != hits || rule.Bytes == nil || *rule.Bytes != bytes {
		t.Errorf("/roce/flows,in, want rule 0 with %d packets and %d bytes:\n%s", hits, bytes, lines[0])
	}
	for _, port := range []string{"in", "out"} {
		if p, ok := off.Reply[port]; !ok || p.Backend != "software" || p.Engine != "none" || p.RulesSW != 1 || p.RulesHW != 0 {
			t.Errorf("/roce/offload port %s:\n%s", port, lines[1])
		}
	}
}
