package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type impairStatsJSON struct {
	Rules []struct {
		Rule struct {
			ID     int    `json:"id"`
			Action string `json:"action"`
			Line   string `json:"line"`
		} `json:"rule"`
		Matched uint64 `json:"matched"`
		Acted   uint64 `json:"acted"`
		Expired bool   `json:"expired"`
	} `json:"rules"`
	Held   int `json:"held"`
	Storms []struct {
		Active bool   `json:"active"`
		Sent   uint64 `json:"sent"`
		Failed uint64 `json:"failed"`
	} `json:"storms"`
}

// Impairment on a running daemon: a rule from the config and one added
// from the console act on the demo traffic; their drops are counted
// under impair_drop alone and agree with the rules' counters, the console,
// Prometheus and a drop capture whose verdicts name the rule.
func TestImpairRulesLive(t *testing.T) {
	r := startDaemon(t, "127.0.0.1:0", `
[impair]
seed = 7
rules = ["port in rx class cnp action drop"]
`)
	out := r.must("impair add port in qp 291 class data every 10 action set_ce")
	if !strings.Contains(out, "impair rule 2 added: port 0 qp 0x123 class data every 10 action set_ce") {
		t.Errorf("impair add said %q", out)
	}
	if res := r.console("impair", "add", "qp", "1", "action", "explode"); res.code == 0 || !strings.Contains(res.stderr, `action "explode": want drop`) {
		t.Errorf("a bad rule: exit %d, %s%s", res.code, res.stdout, res.stderr)
	}
	rx := filepath.Join(t.TempDir(), "drops.pcapng")
	r.must("capture start port in drop file " + rx + " count 20")
	r.waitCapture(t)
	var comments int
	for _, l := range tsharkFields(t, rx, "frame.comment") {
		if strings.Contains(l, "drop impair_drop at impair") && strings.Contains(l, "impairment rule 1") && strings.Contains(l, "(CNP)") {
			comments++
		}
	}
	if comments != 20 {
		t.Errorf("%d of 20 dropped packets' verdicts name impair_drop, rule 1 and a CNP", comments)
	}
	r.must("impair storm start port out pfc 3 every 1ms for 30ms")
	r.must("impair storm start port in pause for 1h")
	time.Sleep(200 * time.Millisecond)
	r.must("impair storm stop in")
	r.must("stop")
	var st impairStatsJSON
	r.consoleJSON(&st, "show", "impair", "stats")
	if len(st.Rules) != 2 || st.Held != 0 {
		t.Fatalf("show impair stats: %+v", st)
	}
	// A 30 ms storm, a frame a millisecond (on the worker that sends
	// out of "out"); a PAUSE storm of an hour, stopped after 200 ms.
	if len(st.Storms) != 2 || st.Storms[0].Active || st.Storms[0].Sent != 30 ||
		st.Storms[1].Active || st.Storms[1].Sent < 100 {
		t.Errorf("storms %+v", st.Storms)
	}
	cnp, ce := st.Rules[0], st.Rules[1]
	if cnp.Rule.ID != 1 || cnp.Acted == 0 || cnp.Acted != cnp.Matched || ce.Rule.ID != 2 || ce.Matched < 100 || ce.Acted != ce.Matched/10 {
		t.Errorf("rules %+v", st.Rules)
	}
	f := r.fwd()
	if f.Drops["impair_drop"] != cnp.Acted {
		t.Errorf("impair_drop %d, rule 1 acted %d times", f.Drops["impair_drop"], cnp.Acted)
	}
	for reason, n := range f.Drops {
		if n != 0 && reason != "impair_drop" {
			t.Errorf("%d drops under %s", n, reason)
		}
	}
	fams := scrapeMetrics(t, r.metricsURL())
	if v, ok := metricValue(fams, "rocefwd_impair_acted_packets_total", map[string]string{"rule": "1", "action": "drop"}); !ok || uint64(v) != cnp.Acted {
		t.Errorf("rocefwd_impair_acted_packets_total{rule=1} %v (%v), want %d", v, ok, cnp.Acted)
	}
	stats := r.must("show impair stats")
	if !strings.Contains(stats, "port 0 rx class cnp action drop") || !strings.Contains(stats, "packets held back (delay, reorder): 0") ||
		!strings.Contains(stats, "storm port 1 pfc 3 quanta 65535 every 1ms for 30ms: ended") {
		t.Errorf("show impair stats:\n%s", stats)
	}
	// The demo traffic carries no pause frames: the history is empty.
	if h := r.must("show pfc history all"); !strings.Contains(h, "port in: 0 pauses, 0 watchdog storms") || !strings.Contains(h, "port out: 0 pauses") {
		t.Errorf("show pfc history:\n%s", h)
	}
	r.must("impair del 1")
	if list := r.must("impair list"); strings.Contains(list, "cnp") || !strings.HasPrefix(list, "2\t") {
		t.Errorf("impair list after del 1:\n%s", list)
	}
	if res := r.console("impair", "del", "9"); res.code == 0 || !strings.Contains(res.stderr, "no such rule") {
		t.Errorf("impair del 9: exit %d %s", res.code, res.stderr)
	}
}

// A reload applies [impair] live: a rule that stays keeps its ID and its
// counters, a new one gets the next ID; the hold size needs a restart.
func TestImpairReload(t *testing.T) {
	const rule1 = `"port in rx class cnp every 2 action drop"`
	r := startDaemon(t, "", "[impair]\nrules = ["+rule1+"]\n")
	pcap := filepath.Join(filepath.Dir(r.cfgPath), "demo.pcap")
	time.Sleep(100 * time.Millisecond)
	var before impairStatsJSON
	r.consoleJSON(&before, "show", "impair", "stats")
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "", "[impair]\nrules = ["+rule1+`, "psn 0-100 action clear_ecn"]`+"\n"))
	if res := r.console("reload"); res.code != 0 {
		t.Fatalf("reload: %s%s", res.stdout, res.stderr)
	}
	var after impairStatsJSON
	r.consoleJSON(&after, "show", "impair", "stats")
	if len(before.Rules) != 1 || len(after.Rules) != 2 || after.Rules[0].Rule.ID != 1 || after.Rules[1].Rule.ID != 2 ||
		before.Rules[0].Matched == 0 || after.Rules[0].Matched < before.Rules[0].Matched {
		t.Errorf("before %+v\nafter %+v", before.Rules, after.Rules)
	}
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "", "[impair]\nhold = 10\nrules = ["+rule1+"]\n"))
	if res := r.console("reload"); res.code == 0 || !strings.Contains(res.stderr, "impair.hold") {
		t.Errorf("a hold change was not refused: %d %s%s", res.code, res.stdout, res.stderr)
	}
}
