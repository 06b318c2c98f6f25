package impair

import (
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"roce-fwd/internal/roceframe"
	"roce-fwd/roce"
)

const (
	sendOnly = roce.Opcode(0x04)
	readReq  = roce.Opcode(0x0c)
	ack      = roce.Opcode(0x11)
	cnp      = roce.Opcode(0x81)
)

type pkt struct {
	src, dst string
	qp, psn  uint32
	op       roce.Opcode
	ecn      uint8
	dscp     uint8
	syn      roce.AETHSyndrome
	payload  int
}

func frame(t testing.TB, p pkt) ([]byte, roce.Result) {
	t.Helper()
	if p.src == "" {
		p.src, p.dst = "10.0.0.1", "10.0.0.2"
	}
	spec := roce.FrameSpec{
		IPv6:  netip.MustParseAddr(p.src).Is6(),
		SrcIP: netip.MustParseAddr(p.src), DstIP: netip.MustParseAddr(p.dst), ECN: p.ecn, DSCP: p.dscp,
		BTH:     roce.BTHFields{Opcode: p.op, DestQP: p.qp, PSN: p.psn, PKey: 0xffff},
		Ext:     roce.ExtFields{Syndrome: p.syn, DMALength: 64},
		Payload: make([]byte, p.payload),
	}
	if p.op == cnp {
		spec.Payload = make([]byte, 16)
	}
	return roceframe.Build(t, spec)
}

func ports(s string) (uint16, error) {
	switch s {
	case "in", "0":
		return 0, nil
	case "out", "1":
		return 1, nil
	}
	return 0, fmt.Errorf("port %q: not a port", s)
}

func parse(t *testing.T, line string) Rule {
	t.Helper()
	r, err := Parse(strings.Fields(line), ports)
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return r
}

// worker compiles lines into a one-worker engine.
func worker(t *testing.T, seed uint64, lines ...string) *Worker {
	t.Helper()
	var rules []Rule
	for i, l := range lines {
		r := parse(t, l)
		r.ID = i + 1
		rules = append(rules, r)
	}
	return NewWorker(compile(t, rules, seed), 0)
}

func compile(t testing.TB, rules []Rule, seed uint64) *Set {
	t.Helper()
	s, err := Compile(rules, seed, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseRoundTrip(t *testing.T) {
	for _, line := range []string{
		"action drop",
		"port 0 rx qp 0x11 action drop count 1",
		"port 1 tx src 10.0.0.0/8 dst 2001:db8::/32 tc 3 dscp 26 qp 0x100-0x1ff class data,cnp psn 100-200 every 7 probability 0.25 action drop burst 3 count 9 for 5s seed 42",
		"class ack,nak action delay 200µs jitter 50µs",
		"class read_request action reorder 3",
		"qp 0x5 action rate_limit 1000",
		"tc 3 action set_ce",
		"action clear_ecn", "action corrupt_icrc", "class send action corrupt_payload", "qp 0x7 psn 10 action duplicate",
	} {
		r := parse(t, line)
		if got := r.String(); got != line {
			t.Errorf("parsed %q, printed %q", line, got)
		}
		again := parse(t, r.String())
		if !reflect.DeepEqual(again, r) {
			t.Errorf("%q: read back %+v, want %+v", line, again, r)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Errorf("%q: JSON: %v", line, err)
		}
	}
	// Names instead of numbers, and a host address as a /32.
	r := parse(t, "port out src 10.0.0.1 action drop")
	if r.Port != 1 || r.Src != netip.MustParsePrefix("10.0.0.1/32") {
		t.Errorf("port %d src %s", r.Port, r.Src)
	}
	j, _ := json.Marshal(parse(t, "port 0 rx class data action delay 1ms"))
	for _, want := range []string{`"dir":"rx"`, `"class":"data"`, `"action":"delay"`, `"delay":"1ms"`, `"line":"port 0 rx class data action delay 1ms"`} {
		if !strings.Contains(string(j), want) {
			t.Errorf("JSON %s lacks %s", j, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for line, want := range map[string]string{
		"":                            "no action",
		"qp 5":                        "no action",
		"port nosuch action drop":     `port "nosuch": not a port`,
		"qp 0x1000000 action drop":    `qp "0x1000000"`,
		"qp 9-3 action drop":          "n <= m",
		"psn x action drop":           `psn "x"`,
		"class bogus action drop":     `class "bogus": want data, send`,
		"tc 8 action drop":            "want 0-7",
		"dscp 64 action drop":         "want 0-63",
		"probability 1.5 action drop": "(0, 1]",
		"probability 0 action drop":   "(0, 1]",
		"every 0 action drop":         "above 0",
		"action explode":              `action "explode": want drop`,
		"action delay":                "needs a duration",
		"action delay 2s":             "up to 1s",
		"action delay 1ms jitter 1s":  "jitter",
		"action reorder 0":            "1-65535",
		"action rate_limit":           "needs packets per second",
		"action drop action set_ce":   "has action drop",
		"rx tx action drop":           "already rx",
		"action drop for -1s":         "duration",
		"action drop frobnicate 3":    `unknown word "frobnicate"`,
		"action drop count":           "count needs a value",
	} {
		_, err := Parse(strings.Fields(line), ports)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want it to say %q", line, err, want)
		}
	}
}

// run applies w to n packets of QP 1 with PSNs 0..n-1 and returns the
// PSNs of the packets each action took.
func run(t *testing.T, w *Worker, n int, p pkt) map[Action][]uint32 {
	t.Helper()
	out := map[Action][]uint32{}
	f, r := frame(t, p)
	for i := range n {
		r.PSN = uint32(i)
		v := w.Apply(0, 1, f, &r, int64(i)*1000+1)
		if v.Act != 0 {
			out[v.Act] = append(out[v.Act], r.PSN)
		}
	}
	return out
}

func TestEveryNthPSNAndBurstAreExact(t *testing.T) {
	got := run(t, worker(t, 1, "qp 1 every 100 action drop"), 1000, pkt{qp: 1, op: sendOnly})
	want := []uint32{99, 199, 299, 399, 499, 599, 699, 799, 899, 999}
	if !reflect.DeepEqual(got[ActDrop], want) {
		t.Errorf("every 100: dropped %v, want %v", got[ActDrop], want)
	}
	got = run(t, worker(t, 1, "psn 500-502 action drop"), 1000, pkt{qp: 1, op: sendOnly})
	if !reflect.DeepEqual(got[ActDrop], []uint32{500, 501, 502}) {
		t.Errorf("psn 500-502: dropped %v", got[ActDrop])
	}
	got = run(t, worker(t, 1, "every 300 action drop burst 3"), 1000, pkt{qp: 1, op: sendOnly})
	if !reflect.DeepEqual(got[ActDrop], []uint32{299, 300, 301, 599, 600, 601, 899, 900, 901}) {
		t.Errorf("every 300 burst 3: dropped %v", got[ActDrop])
	}
	// A QP the rule does not name is left alone.
	if got := run(t, worker(t, 1, "qp 2 action drop"), 100, pkt{qp: 1, op: sendOnly}); len(got) != 0 {
		t.Errorf("qp 2 rule acted on QP 1: %v", got)
	}
}

func TestCountAndForExpire(t *testing.T) {
	w := worker(t, 1, "every 10 action drop count 5")
	got := run(t, w, 1000, pkt{qp: 1, op: sendOnly})
	if !reflect.DeepEqual(got[ActDrop], []uint32{9, 19, 29, 39, 49}) {
		t.Errorf("count 5: dropped %v", got[ActDrop])
	}
	c := make([]Counter, 1)
	w.Counters(c)
	if c[0] != (Counter{Matched: 50, Acted: 5, Expired: true}) {
		t.Errorf("counters %+v", c[0])
	}
	// 1000 packets 1 µs apart: a rule for 100 µs drops the first 100.
	w = worker(t, 1, "action drop for 100us")
	got = run(t, w, 1000, pkt{qp: 1, op: sendOnly})
	if len(got[ActDrop]) != 100 || got[ActDrop][99] != 99 {
		t.Errorf("for 100us: dropped %d packets, the last %v", len(got[ActDrop]), got[ActDrop][len(got[ActDrop])-1:])
	}
}

// A probability selects within binomial bounds over a million packets,
// the same packets for the same seed, others for another seed.
func TestProbabilityIsSeededAndBinomial(t *testing.T) {
	const n, p = 1_000_000, 0.05
	a := run(t, worker(t, 7, "probability 0.05 action drop"), n, pkt{qp: 1, op: sendOnly})[ActDrop]
	b := run(t, worker(t, 7, "probability 0.05 action drop"), n, pkt{qp: 1, op: sendOnly})[ActDrop]
	c := run(t, worker(t, 8, "probability 0.05 action drop"), n, pkt{qp: 1, op: sendOnly})[ActDrop]
	sd := math.Sqrt(n * p * (1 - p))
	if d := math.Abs(float64(len(a)) - n*p); d > 5*sd {
		t.Errorf("dropped %d of %d, want %v ± %.0f", len(a), n, n*p, 5*sd)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("the same seed dropped other packets")
	}
	if reflect.DeepEqual(a, c) {
		t.Error("another seed dropped the same packets")
	}
	// A rule's own seed wins over the set's.
	d := run(t, worker(t, 8, "probability 0.05 action drop seed 7"), n, pkt{qp: 1, op: sendOnly})[ActDrop]
	if !reflect.DeepEqual(a, d) {
		t.Error("seed 7 on the rule differs from seed 7 for the set")
	}
}

func TestClassesAndAddresses(t *testing.T) {
	w := worker(t, 1, "class nak action drop", "class cnp action delay 1ms", "src 10.9.0.0/16 action drop", "dst 2001:db8::2 action reorder 2")
	for _, c := range []struct {
		p    pkt
		want Action
	}{
		{pkt{qp: 1, op: ack, syn: roce.SyndromeACK(31)}, 0},
		{pkt{qp: 1, op: ack, syn: roce.SyndromeNAK(roce.NAKPSNSequenceError)}, ActDrop},
		{pkt{qp: 1, op: cnp}, ActDelay},
		{pkt{qp: 1, op: sendOnly}, 0},
		{pkt{src: "10.9.3.4", dst: "10.0.0.2", qp: 1, op: sendOnly}, ActDrop},
		{pkt{src: "10.8.3.4", dst: "10.0.0.2", qp: 1, op: sendOnly}, 0},
		{pkt{src: "2001:db8::1", dst: "2001:db8::2", qp: 1, op: sendOnly}, ActReorder},
		{pkt{src: "2001:db8::1", dst: "2001:db8::3", qp: 1, op: sendOnly}, 0},
	} {
		f, r := frame(t, c.p)
		if v := w.Apply(0, 1, f, &r, 1); v.Act != c.want {
			t.Errorf("%+v: %s, want %s", c.p, v.Act, c.want)
		}
	}
}

func TestPortsAndDirections(t *testing.T) {
	f, r := frame(t, pkt{qp: 1, op: sendOnly})
	for _, c := range []struct {
		line   string
		rx, tx uint16
		want   bool
	}{
		{"port 0 rx action drop", 0, 1, true},
		{"port 0 rx action drop", 1, 0, false},
		{"port 1 tx action drop", 0, 1, true},
		{"port 0 tx action drop", 0, 1, false},
		{"port 1 action drop", 0, 1, true}, // either side
		{"port 1 action drop", 1, 0, true},
		{"action drop", 5, 6, true},
	} {
		v := worker(t, 1, c.line).Apply(c.rx, c.tx, f, &r, 1)
		if (v.Act == ActDrop) != c.want {
			t.Errorf("%s, rx %d tx %d: %s", c.line, c.rx, c.tx, v.Act)
		}
	}
}

// CE is set on ECT packets only, ECN cleared on ECN-capable ones; the ICRC
// stays valid (ECN is masked out of it) and so does the IPv4 checksum.
// The corrupting actions make the ICRC wrong.
func TestRewritesKeepOrBreakTheICRC(t *testing.T) {
	m := roce.DefaultTCMap()
	classify := func(f []byte) roce.Result {
		var r roce.Result
		roce.Classify(f, &m, true, &r)
		return r
	}
	for _, c := range []struct {
		line    string
		p       pkt
		acted   bool
		ecn     uint8
		badICRC bool
	}{
		{"action set_ce", pkt{qp: 1, op: sendOnly, ecn: roce.ECNECT0}, true, roce.ECNCE, false},
		{"action set_ce", pkt{qp: 1, op: sendOnly, ecn: roce.ECNECT1, src: "2001:db8::1", dst: "2001:db8::2"}, true, roce.ECNCE, false},
		{"action set_ce", pkt{qp: 1, op: sendOnly, ecn: roce.ECNNotECT}, false, roce.ECNNotECT, false},
		{"action clear_ecn", pkt{qp: 1, op: sendOnly, ecn: roce.ECNCE}, true, roce.ECNNotECT, false},
		{"action corrupt_icrc", pkt{qp: 1, op: sendOnly, ecn: roce.ECNECT0}, true, roce.ECNECT0, true},
		{"action corrupt_payload", pkt{qp: 1, op: sendOnly, ecn: roce.ECNECT0, payload: 64}, true, roce.ECNECT0, true},
		{"action corrupt_payload", pkt{qp: 1, op: ack}, false, roce.ECNNotECT, false}, // no payload
	} {
		w := worker(t, 1, c.line)
		f, r := frame(t, c.p)
		v := w.Apply(0, 1, f, &r, 1)
		if (v.Rule == 1) != c.acted || v.Act != 0 {
			t.Errorf("%s on %+v: verdict %+v, want acted %v and forwarded", c.line, c.p, v, c.acted)
		}
		got := classify(f)
		if got.ECN != c.ecn || r.ECN != c.ecn {
			t.Errorf("%s on %+v: ECN %d (result %d), want %d", c.line, c.p, got.ECN, r.ECN, c.ecn)
		}
		if (got.Err == roce.ErrBadICRC) != c.badICRC || got.Err != roce.ReasonNone && got.Err != roce.ErrBadICRC {
			t.Errorf("%s on %+v: classified again as %v, want bad ICRC %v", c.line, c.p, got.Err, c.badICRC)
		}
		if !c.p.v6() && !roce.IPv4(f[got.L3:]).ChecksumValid() {
			t.Errorf("%s: IPv4 checksum wrong", c.line)
		}
	}
}

func (p pkt) v6() bool { return strings.Contains(p.src, ":") }

func TestHoldVerdicts(t *testing.T) {
	w := worker(t, 3, "action delay 100us jitter 20us")
	f, r := frame(t, pkt{qp: 1, op: sendOnly})
	seen := map[uint64]bool{}
	for i := range 1000 {
		now := int64(i) * 1000
		v := w.Apply(0, 1, f, &r, now)
		d := int64(v.Until) - now
		if v.Act != ActDelay || d < 100_000 || d > 120_000 {
			t.Fatalf("packet %d: %+v (delay %d ns), want a delay of 100-120 µs", i, v, d)
		}
		seen[uint64(d)] = true
	}
	if len(seen) < 100 {
		t.Errorf("jitter gave %d distinct delays in 1000 packets", len(seen))
	}
	// Reorder 2, every 5th packet: it lets the next two go first.
	w = worker(t, 3, "every 5 action reorder 2")
	for i := range 10 {
		v := w.Apply(0, 1, f, &r, 1)
		switch {
		case i == 4 || i == 9:
			if v.Act != ActReorder || v.Until != 2 {
				t.Errorf("packet %d: %+v", i, v)
			}
		case v.Act != 0:
			t.Errorf("packet %d: %+v", i, v)
		}
	}
}

func TestRateLimit(t *testing.T) {
	// 100k packets over one second at 10k pps: 10k pass, plus the
	// bucket's 10 at the start.
	w := worker(t, 1, "action rate_limit 10000")
	f, r := frame(t, pkt{qp: 1, op: sendOnly})
	passed := 0
	for i := range 100_000 {
		if v := w.Apply(0, 1, f, &r, int64(i)*10_000+1); v.Act == 0 {
			passed++
		} else if v.Act != ActRateLimit {
			t.Fatalf("verdict %+v", v)
		}
	}
	if passed < 10_000 || passed > 10_010 {
		t.Errorf("%d packets passed, want 10000 (+10)", passed)
	}
}

// A rule kept across a change of the set keeps its counters and its place
// in its cycle; a new one starts afresh.
func TestNewWorkerCarriesState(t *testing.T) {
	r1, r2 := parse(t, "every 10 action drop"), parse(t, "class cnp action drop")
	r1.ID, r2.ID = 1, 2
	old := NewWorker(compile(t, []Rule{r1}, 1), 0)
	run(t, old, 15, pkt{qp: 1, op: sendOnly})
	w := NewWorker(compile(t, []Rule{r2, r1}, 1), 0)
	w.Carry(old)
	got := run(t, w, 5, pkt{qp: 1, op: sendOnly})
	if !reflect.DeepEqual(got[ActDrop], []uint32{4}) { // the 20th packet of rule 1
		t.Errorf("dropped %v after the change, want PSN 4", got[ActDrop])
	}
	c := make([]Counter, 2)
	w.Counters(c)
	if c[1] != (Counter{Matched: 20, Acted: 2}) || c[0] != (Counter{}) {
		t.Errorf("counters %+v", c)
	}
}

func TestApplyDoesNotAllocate(t *testing.T) {
	w := worker(t, 1, "qp 9 action drop", "src 10.0.0.0/8 probability 0.5 action set_ce", "every 3 action delay 10us jitter 5us", "action rate_limit 1000000")
	f, r := frame(t, pkt{qp: 1, op: sendOnly, ecn: roce.ECNECT0})
	now := int64(0)
	if a := testing.AllocsPerRun(1000, func() {
		now += 100
		w.Apply(0, 1, f, &r, now)
	}); a != 0 {
		t.Errorf("%v allocations per packet", a)
	}
}

func BenchmarkApply(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			var rules []Rule
			for i := range n {
				r, _ := Parse(strings.Fields(fmt.Sprintf("qp %d every 1000 action drop", 100+i)), ports)
				r.ID = i + 1
				rules = append(rules, r)
			}
			w := NewWorker(compile(b, rules, 1), 0)
			f, r := frame(b, pkt{qp: 100, op: sendOnly})
			i := int64(0)
			for b.Loop() {
				i++
				w.Apply(0, 1, f, &r, i)
			}
		})
	}
}

// The prefilter by QP groups keeps every QP of a range, also one that
// wraps around the groups, and a set holds at most MaxRules rules.
func TestQPRangesAndRuleLimit(t *testing.T) {
	w := worker(t, 1, "qp 62-65 action drop", "qp 0x1000-0x1fff class cnp action drop")
	f, r := frame(t, pkt{qp: 1, op: sendOnly})
	for qp := uint32(0); qp < 0x2100; qp++ {
		r.DestQP = qp
		want := qp >= 62 && qp <= 65
		if got := w.Apply(0, 1, f, &r, 1).Act == ActDrop; got != want {
			t.Fatalf("QP %d: dropped %v, want %v", qp, got, want)
		}
	}
	f, r = frame(t, pkt{qp: 0x1abc, op: cnp})
	if w.Apply(0, 1, f, &r, 1).Act != ActDrop {
		t.Error("CNP to QP 0x1abc not dropped")
	}
	rules := make([]Rule, MaxRules+1)
	if _, err := Compile(rules, 1, 1); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("%d rules: %v", len(rules), err)
	}
}

func TestParseStorm(t *testing.T) {
	s, err := ParseStorm(strings.Fields("port out pfc 3,4 quanta 1000 every 50us for 300ms"), ports)
	if err != nil || s != (Storm{Port: 1, Prios: 0x18, Quanta: 1000, Every: 50 * time.Microsecond, For: 300 * time.Millisecond}) {
		t.Fatalf("%+v %v", s, err)
	}
	if again, err := ParseStorm(strings.Fields(s.String()), ports); err != nil || again != s {
		t.Errorf("%q read back as %+v %v", s, again, err)
	}
	s, err = ParseStorm(strings.Fields("port 0 pause for 1s"), ports)
	if err != nil || !s.Pause || s.Quanta != 0xffff || s.Every != DefaultStormEvery {
		t.Errorf("pause: %+v %v", s, err)
	}
	for line, want := range map[string]string{
		"pfc 3 for 1s":                 "which port",
		"port 0 for 1s":                "pfc <priorities> or pause",
		"port 0 pfc 3":                 "for how long",
		"port 0 pfc 9 for 1s":          "priorities 0-7",
		"port 0 pfc 3 pause for 1s":    "not both",
		"port 0 pfc 3 for 2h":          "up to 1h",
		"port 0 pfc 3 quanta x for 1s": "0-65535",
		"port 0 pfc 3 for 1s bogus 1":  `unknown word "bogus"`,
	} {
		if _, err := ParseStorm(strings.Fields(line), ports); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", line, err, want)
		}
	}
}

func TestDSCPAndTC(t *testing.T) {
	w := worker(t, 1, "dscp 26 action drop", "tc 6 action delay 1ms")
	for _, c := range []struct {
		dscp uint8
		want Action
	}{{26, ActDrop}, {48, ActDelay}, {0, 0}} { // the default map: TC = DSCP >> 3
		f, r := frame(t, pkt{qp: 1, op: sendOnly, dscp: c.dscp})
		if v := w.Apply(0, 1, f, &r, 1); v.Act != c.want {
			t.Errorf("DSCP %d (TC %d): %s, want %s", c.dscp, r.TC, v.Act, c.want)
		}
	}
}
