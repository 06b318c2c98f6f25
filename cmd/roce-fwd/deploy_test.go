package main

// Tests of deploy/: the Grafana dashboard and the Prometheus alert rules.
// Their PromQL is parsed by promtool, every metric they name must be on a
// live daemon's /metrics, and a real Prometheus (Debian's prometheus
// package, which brings promtool) scrapes a running daemon, evaluates the
// rules and the dashboard's queries, and its rate() of rx packets must
// agree with the console's.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"roce-fwd/console"
)

const (
	dashboardPath = "../../deploy/grafana/roce-fwd.json"
	rulesPath     = "../../deploy/prometheus/roce-fwd-rules.yml"
	rulesTestPath = "../../deploy/prometheus/roce-fwd-rules.test.yml"
)

// promTool finds one of the prometheus package's binaries or skips.
func promTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed: apt-get install prometheus (scripts/deps.sh test installs it): %v", name, err)
	}
	return p
}

// promtool check rules, and promtool test rules on the synthetic series
// of roce-fwd-rules.test.yml that fire every alert.
func TestDeployRulesPromtool(t *testing.T) {
	promtool := promTool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", rulesPath).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`SUCCESS: \d+ rules found`).Match(out) {
		t.Errorf("promtool check rules:\n%s", out)
	}
	out, err = exec.Command(promtool, "test", "rules", rulesTestPath).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	// Every alert of the rules file has a unit test that fires it.
	rules, tests := readFileT(t, rulesPath), readFileT(t, rulesTestPath)
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllSubmatch(rules, -1)
	if len(alerts) == 0 {
		t.Fatal("no alert in the rules file")
	}
	for _, a := range alerts {
		fired := regexp.MustCompile(`(?m)^\s*alertname: ` + regexp.QuoteMeta(string(a[1])) + `\n\s*exp_alerts:\n\s*- exp_labels:`)
		if !fired.Match(tests) {
			t.Errorf("alert %s: no unit test in %s expects it to fire", a[1], rulesTestPath)
		}
	}
}

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Datasource any    `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Inputs []grafanaInput `json:"__inputs"`
}

type grafanaInput struct {
	Name string `json:"name"`
}

type dashboardPanel struct {
	ID         int              `json:"id"`
	Type       string           `json:"type"`
	Title      string           `json:"title"`
	Datasource json.RawMessage  `json:"datasource"`
	Panels     []dashboardPanel `json:"panels"` // a collapsed row's
	Targets    []struct {
		Expr       string          `json:"expr"`
		RefID      string          `json:"refId"`
		Datasource json.RawMessage `json:"datasource"`
	} `json:"targets"`
	GridPos *struct{ H, W, X, Y int } `json:"gridPos"`
}

// dashboardQuery is one PromQL expression of the dashboard.
type dashboardQuery struct {
	panel, ref, expr string
}

func readDashboard(t *testing.T) (dashboard, []dashboardQuery) {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFileT(t, dashboardPath), &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var qs []dashboardQuery
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				qs = append(qs, dashboardQuery{p.Title, tg.RefID, tg.Expr})
			}
		}
	}
	walk(d.Panels)
	return d, qs
}

// grafanaVars stands for Grafana's variables in a query: every instance
// and port, and a rate interval of a few scrapes of the tests' Prometheus.
var grafanaVars = strings.NewReplacer("$__rate_interval", "10s", "$__interval", "1s", "$__range", "1m",
	"$instance", ".*", "$port", ".*")

// The dashboard is importable (a datasource variable or input used by
// every panel, a port variable from label_values, unique panel ids), has
// a panel for each thing it must show, and each of its expressions
// parses: promtool checks them as recording rules of a scratch file.
func TestDeployDashboardPromQL(t *testing.T) {
	d, qs := readDashboard(t)
	if d.UID == "" || d.Title == "" || len(qs) == 0 {
		t.Fatalf("dashboard uid %q title %q, %d queries", d.UID, d.Title, len(qs))
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		q, _ := v.Query.(string)
		vars[v.Name] = v.Type + " " + q
	}
	dsRef := ""
	switch {
	case strings.HasPrefix(vars["datasource"], "datasource prometheus"):
		dsRef = "${datasource}"
	case slices.Contains(d.Inputs, grafanaInput{"DS_PROMETHEUS"}):
		dsRef = "${DS_PROMETHEUS}"
	default:
		t.Fatalf("no Prometheus datasource variable or DS_PROMETHEUS input: %v", vars)
	}
	if !regexp.MustCompile(`^query label_values\(rocefwd_\w+(\{[^}]*\})?, *port\)$`).MatchString(vars["port"]) {
		t.Errorf("port variable %q, want a label_values(..., port) query", vars["port"])
	}
	ids := map[int]string{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if prev, ok := ids[p.ID]; ok || p.ID == 0 {
				t.Errorf("panel %q: id %d (also %q)", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
			}
			if p.Type == "row" {
				continue
			}
			if !bytes.Contains(p.Datasource, []byte(dsRef)) {
				t.Errorf("panel %q: datasource %s, want %s", p.Title, p.Datasource, dsRef)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" || tg.RefID == "" || !bytes.Contains(tg.Datasource, []byte(dsRef)) {
					t.Errorf("panel %q: target %q %q datasource %s", p.Title, tg.RefID, tg.Expr, tg.Datasource)
				}
			}
		}
	}
	walk(d.Panels)

	// What the dashboard must show, by the metric each needs.
	uses := func(metric string) bool {
		return slices.ContainsFunc(qs, func(q dashboardQuery) bool { return strings.Contains(q.expr, metric+"{") })
	}
	for what, metric := range map[string]string{
		"rx packet rate": "rocefwd_port_rx_packets_total", "tx packet rate": "rocefwd_port_tx_packets_total",
		"rx bit rate": "rocefwd_port_rx_bytes_total", "tx bit rate": "rocefwd_port_tx_bytes_total",
		"RoCE share": "rocefwd_roce_rocev2_frames_total", "CNP rate": "rocefwd_roce_cnp_frames_total",
		"CE ratio": "rocefwd_roce_ecn_frames_total", "ECN marks per TC": "rocefwd_qos_ecn_marked_packets_total",
		"WRED drops per TC": "rocefwd_qos_dropped_packets_total", "PFC received": "rocefwd_pfc_rx_xoff_frames_total",
		"PFC sent": "rocefwd_pfc_tx_xoff_frames_total", "PFC watchdog": "rocefwd_pfc_watchdog_storms_detected_total",
		"drops by reason": "rocefwd_drops_total", "top QPs": "rocefwd_qp_bytes_total",
		"lcore busy": "rocefwd_lcore_busy_cycles_total",
	} {
		if !uses(metric) {
			t.Errorf("no panel shows %s (%s)", what, metric)
		}
	}
	if !slices.ContainsFunc(qs, func(q dashboardQuery) bool { return strings.HasPrefix(q.expr, "topk(") }) {
		t.Error("no topk query for the top QPs")
	}

	promtool := promTool(t, "promtool")
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, q := range qs {
		rules = append(rules, rule{fmt.Sprintf("dashboard:query_%d", i), grafanaVars.Replace(q.expr)})
	}
	// JSON is YAML: a rules file of one group.
	b, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	f := writeFile(t, "dashboard-rules.yml", string(b))
	out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("SUCCESS: %d rules found", len(rules))) {
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s", len(rules), err, out)
	}
}

// promqlMetricNames lists the metric names an expression selects: the
// identifiers that are neither functions, aggregations, keywords, label
// names (in {} and in by/without/on/ignoring/group_* lists), nor inside
// strings, ranges or numbers. The expression must parse (promtool checks
// that); this only reads names out of it.
func promqlMetricNames(expr string) []string {
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"inf": true, "nan": true, "atan2": true, "start": true, "end": true}
	lists := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	aggregations := map[string]bool{"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true,
		"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "count_values": true, "quantile": true,
		"limitk": true, "limit_ratio": true}
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || !first && '0' <= c && c <= '9'
	}
	s := expr
	// str returns the index after the string opening at s[i].
	str := func(i int) int {
		q := s[i]
		for i++; i < len(s) && s[i] != q; i++ {
			if s[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	// group returns the index after the group opening at s[i], the
	// strings in it skipped whole.
	group := func(i int, open, closing byte) int {
		depth := 0
		for i < len(s) {
			switch s[i] {
			case '"', '\'', '`':
				i = str(i)
				continue
			case open:
				depth++
			case closing:
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	var names []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = str(i)
		case c == '{':
			i = group(i, '{', '}')
		case c == '[':
			i = group(i, '[', ']')
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case '0' <= c && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i], false) || s[i] == '.') {
				i++
			}
		case isIdent(c, true):
			j := i
			for j < len(s) && isIdent(s[j], false) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && strings.ContainsRune(" \t\r\n", rune(s[k])) {
				k++
			}
			paren := k < len(s) && s[k] == '('
			switch {
			case lists[strings.ToLower(word)] && paren:
				j = group(k, '(', ')')
			case lists[strings.ToLower(word)], keywords[strings.ToLower(word)], aggregations[strings.ToLower(word)], paren:
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	return names
}

func TestDeployPromQLMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`rate(a_total{port=~"in|out", x="rate(b)"}[5m])`, []string{"a_total"}},
		{`sum by (port, tc) (rate(a[1m])) / on (instance) group_left () b > 0 and on (job) c offset 5m`, []string{"a", "b", "c"}},
		{`topk(10, 8 * sum without (le) (rate(x_bucket[$__rate_interval]))) or vector(0)`, []string{"x_bucket"}},
		{"sum(rate(a[1m])) by (reason) # a comment naming b\n+ 1e3 * c", []string{"a", "c"}},
		{`label_replace(up, "dst", "$1", "src", "(.*)")`, []string{"up"}},
	} {
		if got := promqlMetricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("promqlMetricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
	typ := func(t dto.MetricType) *dto.MetricFamily { return &dto.MetricFamily{Type: &t} }
	names := seriesNames(map[string]*dto.MetricFamily{"h": typ(dto.MetricType_HISTOGRAM),
		"s": typ(dto.MetricType_SUMMARY), "c_count": typ(dto.MetricType_COUNTER)})
	for name, want := range map[string]bool{"h": false, "h_bucket": true, "h_sum": true, "h_count": true,
		"s": true, "s_sum": true, "s_count": true, "s_bucket": false, "c_count": true, "c": false} {
		if names[name] != want {
			t.Errorf("series %s of a histogram h, a summary s and a counter c_count: %v, want %v", name, names[name], want)
		}
	}
}

// seriesNames is every series name a scrape's families give: a summary's
// and a histogram's _sum and _count (and _bucket) besides the family's.
func seriesNames(fams map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, f := range fams {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// promServer is a Prometheus started by the test.
type promServer struct {
	t    *testing.T
	base string
	cmd  *exec.Cmd
	log  *syncBuffer
}

// startPrometheus runs Debian's prometheus on a free loopback port with
// its storage in a temporary directory, scraping target every second and
// evaluating rules every second. It is stopped when the test ends.
func startPrometheus(t *testing.T, bin, target, rules string) *promServer {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: roce-fwd
    static_configs:
      - targets: [%q]
`, rules, target), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &promServer{t: t, base: "http://" + addr, log: &syncBuffer{}}
	p.cmd = exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready on %s: %v\n%s", addr, err, p.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *promServer) stop() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("prometheus exit: %v\n%s", err, p.log.String())
		}
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-done
		p.t.Errorf("prometheus did not stop on SIGTERM")
	}
}

// api GETs /api/v1/<path> and decodes its data. A status other than
// success (a query Prometheus refused) is returned as the error, with
// Prometheus's text; anything else that goes wrong fails the test.
func (p *promServer) api(path string, params url.Values, data any) error {
	p.t.Helper()
	resp, err := http.Get(p.base + "/api/v1/" + path + "?" + params.Encode())
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		p.t.Fatalf("/api/v1/%s: %v\n%s", path, err, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("/api/v1/%s?%s: %s: %s", path, params.Encode(), r.Status, r.Error)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		p.t.Fatalf("/api/v1/%s: %v\n%s", path, err, body)
	}
	return nil
}

// promSample is one series of an instant query's vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
	Values [][2]any          `json:"values"`
}

func sampleValue(v [2]any) (ts, val float64) {
	ts, _ = v[0].(float64)
	s, _ := v[1].(string)
	val, _ = strconv.ParseFloat(s, 64)
	return ts, val
}

// query runs an instant query at time at (now when zero).
func (p *promServer) query(expr string, at time.Time) ([]promSample, error) {
	p.t.Helper()
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.api("query", params, &data); err != nil {
		return nil, err
	}
	var out []promSample
	if data.ResultType == "vector" || data.ResultType == "matrix" {
		if err := json.Unmarshal(data.Result, &out); err != nil {
			p.t.Fatal(err)
		}
	}
	return out, nil
}

type portStatsJSON []struct {
	Name      string `json:"name"`
	RxPackets uint64 `json:"rx_packets"`
}

// rxIn runs "show port stats all" on the console socket from this
// process (a console subprocess takes tens of milliseconds to start, at
// millions of packets a second) and returns port in's rx_packets with the
// middle of the round trip, when the daemon read it, give or take half
// the round trip, which it returns too.
func rxIn(t *testing.T, cl *console.Client) (rx uint64, at time.Time, rtt time.Duration) {
	t.Helper()
	start := time.Now()
	out, err := cl.Exec("show port stats all", true)
	end := time.Now()
	if err != nil {
		t.Fatalf("show port stats all: %v", err)
	}
	var ps portStatsJSON
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatalf("show port stats: %v\n%s", err, out)
	}
	for _, p := range ps {
		if p.Name == "in" {
			return p.RxPackets, start.Add(end.Sub(start) / 2), end.Sub(start)
		}
	}
	t.Fatalf("no port in: %s", out)
	return
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// rateAgreement reads port in's rx_packets on the console right after
// two scrapes ten seconds apart and asks Prometheus for rate() over the
// window that holds those two scrapes. The pcap replay's rate swings
// twofold from one second to the next on a loaded host, so only the same
// window compares. aligned is false when a scrape was missed or late, or
// a console read came over 50 ms after its scrape: then the windows
// differ.
func rateAgreement(t *testing.T, p *promServer, cl *console.Client) (consoleRate, promRate float64, report string, aligned bool) {
	t.Helper()
	const sel = `rocefwd_port_rx_packets_total{port="in"}`
	// The scrapes' phase: the last sample's timestamp.
	raw, err := p.query(sel+"[5s]", time.Time{})
	if err != nil || len(raw) != 1 || len(raw[0].Values) == 0 {
		t.Fatalf("%s[5s]: %v %+v", sel, err, raw)
	}
	last, _ := sampleValue(raw[0].Values[len(raw[0].Values)-1])
	scrape0 := last
	for scrape0 < unixSeconds(time.Now())+0.3 {
		scrape0++
	}
	const span = 10.0
	scrape1 := scrape0 + span
	readAfter := func(at float64) (uint64, time.Time, time.Duration) {
		time.Sleep(time.Until(time.Unix(0, int64((at+0.005)*1e9))))
		return rxIn(t, cl)
	}
	rx0, t0, rtt0 := readAfter(scrape0)
	rx1, t1, rtt1 := readAfter(scrape1)
	consoleRate = float64(rx1-rx0) / t1.Sub(t0).Seconds()
	time.Sleep(1500 * time.Millisecond) // the scrape after t1 is in

	// The window (scrape0-0.1 s, scrape1+0.1 s] holds both scrapes: rate()
	// extrapolates the samples' rate by 0.1 s at each end, which leaves
	// it (v1-v0)/(ts1-ts0).
	at := time.Unix(0, int64((scrape1+0.1)*1e9))
	window := fmt.Sprintf("%dms", int((span+0.2)*1000))
	raw, err = p.query(sel+"["+window+"]", at)
	if err != nil || len(raw) != 1 || len(raw[0].Values) < 2 {
		t.Fatalf("%s[%s]: %v %+v", sel, window, err, raw)
	}
	ts0, _ := sampleValue(raw[0].Values[0])
	ts1, _ := sampleValue(raw[0].Values[len(raw[0].Values)-1])
	expr := fmt.Sprintf("rate(%s[%s])", sel, window)
	res, err := p.query(expr, at)
	if err != nil || len(res) != 1 {
		t.Fatalf("%s: %v %+v", expr, err, res)
	}
	_, promRate = sampleValue(res[0].Value)
	report = fmt.Sprintf("console %.0f/s (rx_packets %d → %d over %.3f s, round trips %v and %v), Prometheus %s at %.3f = %.0f/s (%+.2f%%; %d samples, first and last %+.3f s and %+.3f s from the console's reads)",
		consoleRate, rx0, rx1, t1.Sub(t0).Seconds(), rtt0.Round(time.Microsecond), rtt1.Round(time.Microsecond),
		expr, scrape1+0.1, promRate, 100*(promRate/consoleRate-1), len(raw[0].Values), ts0-unixSeconds(t0), ts1-unixSeconds(t1))
	aligned = math.Abs(ts0-unixSeconds(t0)) < 0.05 && math.Abs(ts1-unixSeconds(t1)) < 0.05
	return consoleRate, promRate, report, aligned
}

// A real Prometheus scrapes the rig's daemon (roce mode, nvidia-roce):
// every metric the dashboard and the rules name is on its /metrics, the
// rules load and evaluate without error and none fires on the healthy
// rig, every dashboard query runs and returns series, and rate() of port
// in's rx packets agrees with the console's "show port stats" over the
// same ten seconds.
func TestDeployPrometheusLive(t *testing.T) {
	bin := promTool(t, "prometheus")
	rules, err := filepath.Abs(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, "127.0.0.1:0", "")
	metricsURL := r.metricsURL()
	u, err := url.Parse(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	p := startPrometheus(t, bin, u.Host, rules)

	// Every name the dashboard uses is a series of the live scrape.
	live := seriesNames(scrapeMetrics(t, metricsURL))
	d, qs := readDashboard(t)
	checkNames := func(where, expr string) {
		t.Helper()
		names := promqlMetricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			if !live[n] {
				t.Errorf("%s: metric %s is not on the daemon's /metrics (%s)", where, n, expr)
			}
		}
		// Every rocefwd_ word of it was seen as a metric name.
		for _, w := range regexp.MustCompile(`\brocefwd_\w+`).FindAllString(expr, -1) {
			if !slices.Contains(names, w) {
				t.Errorf("%s: %s in %q not read as a metric name (read %q)", where, w, expr, names)
			}
		}
	}
	for _, q := range qs {
		checkNames(fmt.Sprintf("dashboard panel %q query %s", q.panel, q.ref), grafanaVars.Replace(q.expr))
	}
	for _, v := range d.Templating.List {
		if q, _ := v.Query.(string); strings.HasPrefix(q, "label_values(") {
			m := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindStringSubmatch(q)
			if m == nil || !live[m[1]] {
				t.Errorf("variable %s: %q names no metric of /metrics", v.Name, q)
			}
		}
	}

	// The target is up and scraped.
	deadline := time.Now().Add(20 * time.Second)
	for {
		var targets struct {
			Active []struct {
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				ScrapeURL string `json:"scrapeUrl"`
			} `json:"activeTargets"`
		}
		if err := p.api("targets", nil, &targets); err != nil {
			t.Fatal(err)
		}
		if len(targets.Active) == 1 && targets.Active[0].Health == "up" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("target not up: %+v\n%s", targets, p.log.String())
		}
		time.Sleep(200 * time.Millisecond)
	}

	// rate() agrees with the console's counters over the same seconds.
	cl, err := console.Dial(r.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rxIn(t, cl) // the session's first command is slower than the next
	for try := 1; ; try++ {
		consoleRate, promRate, report, aligned := rateAgreement(t, p, cl)
		t.Logf("rx packets of port in: %s", report)
		if consoleRate > 0 && math.Abs(promRate/consoleRate-1) <= 0.05 {
			break
		}
		if !aligned && try < 3 {
			t.Logf("a scrape or a console read was late (loaded host): again")
			continue
		}
		t.Errorf("Prometheus rate %.0f/s, console %.0f/s: more than 5%% apart", promRate, consoleRate)
		break
	}

	// The rules loaded, evaluate cleanly, and none is pending or firing.
	var groups struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Query     string `json:"query"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
				State     string `json:"state"`
				Alerts    []struct {
					Labels map[string]string `json:"labels"`
					State  string            `json:"state"`
				} `json:"alerts"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api("rules", nil, &groups); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range groups.Groups {
		for _, rule := range g.Rules {
			n++
			checkNames("rule "+rule.Name, rule.Query)
			if rule.Health != "ok" || rule.LastError != "" {
				t.Errorf("rule %s: health %q, error %q", rule.Name, rule.Health, rule.LastError)
			}
			if rule.Type != "alerting" || rule.State == "inactive" && len(rule.Alerts) == 0 {
				continue
			}
			// A host busy with other work (go test runs packages side by
			// side) does stall the worker: then the stall alert is right.
			if rule.Name == "RoceFwdWorkerStalls" {
				if stalls, err := p.query(`sum(rocefwd_lcore_stalls_total{over="1ms"})`, time.Time{}); err == nil && len(stalls) > 0 {
					if _, n := sampleValue(stalls[0].Value); n > 0 {
						t.Logf("alert %s is %s: the host stalled the worker %.0f times over 1 ms during the test", rule.Name, rule.State, n)
						continue
					}
				}
			}
			t.Errorf("alert %s is %s on the healthy rig: %+v", rule.Name, rule.State, rule.Alerts)
		}
	}
	if want := len(regexp.MustCompile(`(?m)^\s*- (alert|record): `).FindAll(readFileT(t, rulesPath), -1)); n != want || n == 0 {
		t.Errorf("prometheus loaded %d rules, the file has %d alerts and recording rules", n, want)
	}

	// Every dashboard query runs and finds series on the rig.
	for _, q := range qs {
		res, err := p.query(grafanaVars.Replace(q.expr), time.Time{})
		if err != nil {
			t.Errorf("panel %q query %s: %v", q.panel, q.ref, err)
		} else if len(res) == 0 {
			t.Errorf("panel %q query %s finds nothing: %s", q.panel, q.ref, grafanaVars.Replace(q.expr))
		}
	}
	// The port variable lists the rig's ports.
	var ports []string
	if err := p.api("label/port/values", url.Values{"match[]": {"rocefwd_port_rx_packets_total"}}, &ports); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []string{"in", "out"}) {
		t.Errorf("port label values %q", ports)
	}
}
