package config

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"roce-fwd/flowrule"
)

// offloadWith is valid (ports "a" with 2 rx queues and "b", lines 1-10)
// followed by extra, which starts on line 11.
func offloadWith(extra ...string) []byte {
	v := append([]string{}, valid...)
	v = append(v[:3:3], append([]string{`rx_queues = 2`}, v[3:]...)...)
	return src(append(v, extra...)...)
}

func TestOffloadDefault(t *testing.T) {
	cfg := parseQoS(t, with())
	if cfg.Offload.Backend != "auto" || cfg.Offload.Rules != nil {
		t.Errorf("Offload = %+v", cfg.Offload)
	}
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.HasSuffix(out, "[offload]\nbackend = \"auto\"\n") || strings.Contains(out, "offload.rule") {
		t.Errorf("Encode:\n%s", out)
	}
	roundTrip(t, cfg)
}

func TestOffloadRules(t *testing.T) {
	cfg := parseQoS(t, offloadWith(
		/* 11 */ `[offload]`,
		/* 12 */ `backend = "template"`,
		/* 13 */ `[[offload.rule]]`,
		/* 14 */ `port = "a"`,
		/* 15 */ `flow = "ingress pattern eth / ipv4 / udp dst is 4791 / end actions count / queue index 1 / end"`,
		/* 16 */ `[[offload.rule]]`,
		/* 17 */ `port = "a"`,
		/* 18 */ `preset = "cnp-queue"`,
		/* 19 */ `queue = 1`,
		/* 20 */ `[[offload.rule]]`,
		/* 21 */ `port = "a"`,
		/* 22 */ `preset = "mark-roce"`,
		/* 23 */ `mark = 0xFFFFEF`,
		/* 24 */ `[[offload.rule]]`,
		/* 25 */ `port = "b"`,
		/* 26 */ `preset = "dscp-count"`,
		/* 27 */ `dscp = [0, 26, 48, 63]`,
		/* 28 */ `[[offload.rule]]`,
		/* 29 */ `port = "b"`,
		/* 30 */ `preset = "drop"`,
		/* 31 */ `src = "10.0.0.1/24"`,
		/* 32 */ `dst = "10.1.0.2"`,
		/* 33 */ `proto = 17`,
		/* 34 */ `src_port = 0`,
		/* 35 */ `dst_port = 65535`,
		/* 36 */ `[[offload.rule]]`,
		/* 37 */ `port = "b"`,
		/* 38 */ `preset = "meter"`,
		/* 39 */ `proto = "6"`,
		/* 40 */ `dst_port = 22`,
		/* 41 */ `algorithm = "trtcm"`,
		/* 42 */ `cir = 1000`,
		/* 43 */ `pir = 1000`,
		/* 44 */ `cbs = 1`,
		/* 45 */ `pbs = 1`,
		/* 46 */ `red = "pass"`,
		/* 47 */ `yellow = "drop"`,
		/* 48 */ `[[offload.rule]]`,
		/* 49 */ `port = "a"`,
		/* 50 */ `preset = "drop"`,
		/* 51 */ `proto = 47`,
		/* 52 */ `[[offload.rule]]`,
		/* 53 */ `port = "b"`,
		/* 54 */ `preset = "cnp-queue"`,
		/* 55 */ `queue = 0`,
	))
	o := cfg.Offload
	if o.Backend != "template" || len(o.Rules) != 8 {
		t.Fatalf("Offload = %+v", o)
	}
	r := o.Rules
	if r[0].Port != "a" || !strings.HasPrefix(r[0].Flow, "ingress pattern") || r[0].Preset != "" || r[0].setKeys() != nil {
		t.Errorf("flow rule %+v", r[0])
	}
	if *r[1].Queue != 1 || *r[2].Mark != 0xFFFFEF || len(r[3].DSCP) != 4 || r[3].DSCP[3] != 63 {
		t.Errorf("preset keys %+v %+v %+v", r[1], r[2], r[3])
	}
	// An integer proto is taken, and tcp and udp get one spelling.
	if *r[4].Proto != "udp" || *r[4].Src != "10.0.0.1/24" || *r[4].SrcPort != 0 || *r[4].DstPort != 65535 {
		t.Errorf("drop %+v", r[4])
	}
	if *r[5].Proto != "tcp" || *r[5].Algorithm != "trtcm" || *r[5].PIR != 1000 || *r[5].Red != "pass" || *r[5].Yellow != "drop" || r[5].EBS != nil {
		t.Errorf("meter %+v", r[5])
	}
	if *r[6].Proto != "47" {
		t.Errorf("proto 47 = %q", *r[6].Proto)
	}
	roundTrip(t, cfg)
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	// Only the keys the file set are printed.
	if out := buf.String(); strings.Count(out, "[[offload.rule]]") != 8 || strings.Count(out, "queue = ") != 2 || strings.Contains(out, "ebs") {
		t.Errorf("Encode:\n%s", out)
	}
}

// parseMsg is flowrule's own message for a rule text.
func parseMsg(t *testing.T, text string) string {
	t.Helper()
	_, err := flowrule.Parse("flow create a " + text)
	var pe *flowrule.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("%q parses: %v", text, err)
	}
	return pe.Msg
}

func TestOffloadErrors(t *testing.T) {
	rule := func(lines ...string) []string { return append([]string{`[[offload.rule]]`}, lines...) }
	cat := func(parts ...[]string) []byte {
		var all []string
		for _, p := range parts {
			all = append(all, p...)
		}
		return offloadWith(all...)
	}
	badFlow := "ingress pattern eth / ipv4 src is 10.0.0.300 / end actions count / end"
	for _, tc := range []struct {
		name string
		src  []byte
		want []string // each a prefix of one error, in order; a trailing NUL: the whole line
	}{
		{"backend", offloadWith(`[offload]`, `backend = "dpdk"`),
			[]string{`t.toml:12: offload.backend: "dpdk" is not one of auto, rte_flow, template, software` + "\x00"}},
		{"flow syntax at its line, third rule", cat(
			rule(`port = "a"`, `preset = "mark-roce"`, `mark = 1`),
			rule(`port = "b"`, `flow = "ingress pattern eth / end actions drop / end"`),
			rule(`port = "a"`, `flow = "`+badFlow+`"`)),
			[]string{"t.toml:20: offload.rule[2].flow: " + parseMsg(t, badFlow) + "\x00"}},
		{"flow is not a whole command", cat(rule(`port = "a"`, `flow = "flow create 0 pattern eth / end actions drop / end"`)),
			[]string{`t.toml:13: offload.rule[0].flow: write only what follows "flow create <port>"`}},
		{"empty flow", cat(rule(`port = "a"`, `flow = " "`)),
			[]string{`t.toml:13: offload.rule[0].flow: empty;`}},
		{"flow without a direction", cat(rule(`port = "a"`, `flow = "pattern eth / end actions count / end"`)),
			[]string{`t.toml:13: offload.rule[0].flow: the rule needs ingress or egress (as every PMD requires)` + "\x00"}},
		{"transfer flow", cat(rule(`port = "a"`, `flow = "ingress transfer pattern eth / end actions drop / end"`)),
			[]string{`t.toml:13: offload.rule[0].flow: transfer rules act in the NIC's e-switch, which roce-fwd does not manage` + "\x00"}},
		{"flow queue beyond rx_queues", cat(rule(`port = "a"`, `flow = "ingress pattern eth / end actions queue index 2 / end"`)),
			[]string{`t.toml:13: offload.rule[0].flow: action queue: index 2 is out of range: port "a" has rx_queues = 2` + "\x00"}},
		{"flow rss beyond rx_queues", cat(rule(`port = "b"`, `flow = "ingress pattern eth / end actions rss queues 0 1 end / end"`)),
			[]string{`t.toml:13: offload.rule[0].flow: action rss: queue 1 is out of range: port "b" has rx_queues = 1`}},
		{"flow meter ids repeat on a port", cat(
			rule(`port = "a"`, `flow = "ingress pattern eth / ipv4 / end actions meter srtcm id 4 cir 1 cbs 1 ebs 1 / end"`),
			rule(`port = "b"`, `flow = "ingress pattern eth / ipv4 / end actions meter srtcm id 4 cir 1 cbs 1 ebs 1 / end"`),
			rule(`port = "a"`, `flow = "ingress pattern eth / ipv6 / end actions meter srtcm id 4 cir 1 cbs 1 ebs 1 / end"`)),
			[]string{`t.toml:19: offload.rule[2].flow: meter id 4 is already used by offload.rule[0] on port "a"`}},
		{"flow with a preset key", cat(rule(`port = "a"`, `flow = "ingress pattern eth / end actions drop / end"`, `queue = 1`)),
			[]string{`t.toml:14: offload.rule[0].queue: not a key of a flow rule`}},
		{"flow and preset", cat(rule(`port = "a"`, `flow = "ingress pattern eth / end actions drop / end"`, `preset = "drop"`)),
			[]string{`t.toml:14: offload.rule[0].preset: set either flow or preset, not both` + "\x00"}},
		{"neither", cat(rule(`port = "a"`)),
			[]string{`t.toml:11: offload.rule[0].preset: missing; set preset (cnp-queue, mark-roce, dscp-count, drop, meter) or flow` + "\x00"}},
		{"port", cat(rule(`preset = "drop"`, `proto = "udp"`), rule(`port = "c"`, `preset = "drop"`, `proto = "udp"`)),
			[]string{
				`t.toml:11: offload.rule[0].port: missing; name the [[port]] the rule goes on (valid ports: "a", "b")` + "\x00",
				`t.toml:15: offload.rule[1].port: unknown port "c"; valid ports: "a", "b"` + "\x00",
			}},
		{"unknown preset", cat(rule(`port = "a"`, `preset = "police"`)),
			[]string{`t.toml:13: offload.rule[0].preset: unknown preset "police"`}},
		{"misspelt key", cat(rule(`port = "a"`, `preset = "cnp-queue"`, `qeue = 1`)),
			[]string{`t.toml:11: offload.rule[0].queue: missing`, `t.toml:14: offload.rule[0].qeue: unknown key "qeue" (did you mean "queue"?)`}},
		{"keys of another preset", cat(rule(`port = "a"`, `preset = "drop"`, `proto = "udp"`, `mark = 3`, `dscp = [1]`)),
			[]string{
				`t.toml:15: offload.rule[0].mark: not a key of preset "drop" (it takes src, dst, proto, src_port, dst_port)` + "\x00",
				`t.toml:16: offload.rule[0].dscp: not a key of preset "drop"`,
			}},
		{"cnp-queue", cat(
			rule(`port = "a"`, `preset = "cnp-queue"`),
			rule(`port = "a"`, `preset = "cnp-queue"`, `queue = 2`),
			rule(`port = "b"`, `preset = "cnp-queue"`, `queue = -1`)),
			[]string{
				`t.toml:11: offload.rule[0].queue: missing`,
				`t.toml:16: offload.rule[1].preset: port "a" already has cnp-queue in offload.rule[0]` + "\x00",
				`t.toml:17: offload.rule[1].queue: 2 is out of range: port "a" has rx_queues = 2 (queues 0..1)` + "\x00",
				`t.toml:21: offload.rule[2].queue: -1 is not a queue index`,
			}},
		{"mark-roce", cat(
			rule(`port = "a"`, `preset = "mark-roce"`, `mark = 0`),
			rule(`port = "b"`, `preset = "mark-roce"`, `mark = 0xFFFFF0`),
			rule(`port = "b"`, `preset = "mark-roce"`, `mark = 1`)),
			[]string{
				`t.toml:14: offload.rule[0].mark: 0 (0x0) is out of range 1..0xffffef`,
				`t.toml:18: offload.rule[1].mark: 16777200 (0xfffff0) is out of range 1..0xffffef`,
				`t.toml:21: offload.rule[2].preset: port "b" already has mark-roce in offload.rule[1]`,
			}},
		{"dscp-count", cat(
			rule(`port = "a"`, `preset = "dscp-count"`, `dscp = []`),
			rule(`port = "b"`, `preset = "dscp-count"`, `dscp = [26, 64, 26]`),
			rule(`port = "b"`, `preset = "dscp-count"`, `dscp = [48, 26]`),
			rule(`port = "a"`, `preset = "dscp-count"`, `dscp = [26]`)),
			[]string{
				`t.toml:14: offload.rule[0].dscp: missing or empty`,
				`t.toml:18: offload.rule[1].dscp[1]: 64 is out of range 0..63` + "\x00",
				`t.toml:18: offload.rule[1].dscp[2]: DSCP 26 is already counted by offload.rule[1] on port "b"` + "\x00",
				`t.toml:22: offload.rule[2].dscp[1]: DSCP 26 is already counted by offload.rule[1] on port "b"` + "\x00",
			}},
		{"five-tuple", cat(
			rule(`port = "a"`, `preset = "drop"`),
			rule(`port = "a"`, `preset = "drop"`, `src = "10.0.0.256"`, `dst = "10.0.0.0/40"`),
			rule(`port = "a"`, `preset = "drop"`, `src = "10.0.0.1"`, `dst = "2001:db8::1"`),
			rule(`port = "a"`, `preset = "drop"`, `src = "0.0.0.0/0"`, `proto = "icmp"`),
			rule(`port = "a"`, `preset = "drop"`, `proto = 300`, `dst_port = 1`),
			rule(`port = "a"`, `preset = "drop"`, `proto = 1`, `src_port = 7`, `dst_port = 70000`),
			rule(`port = "a"`, `preset = "drop"`, `proto = 1.5`),
			rule(`port = "a"`, `preset = "drop"`, `src = "fe80::1%eth0"`)),
			[]string{
				`t.toml:13: offload.rule[0].preset: drop needs at least one of src, dst, proto, src_port, dst_port` + "\x00",
				`t.toml:17: offload.rule[1].src: "10.0.0.256" is not an IPv4 or IPv6 address` + "\x00",
				`t.toml:18: offload.rule[1].dst: "10.0.0.0/40" is not an address or prefix`,
				`t.toml:23: offload.rule[2].dst: "2001:db8::1" and src "10.0.0.1" are not the same IP version` + "\x00",
				`t.toml:27: offload.rule[3].src: "0.0.0.0/0" matches every address; leave the key out instead` + "\x00",
				`t.toml:28: offload.rule[3].proto: "icmp" is not "udp", "tcp" or an IP protocol number 0..255` + "\x00",
				`t.toml:32: offload.rule[4].proto: "300" is not "udp", "tcp"`,
				`t.toml:38: offload.rule[5].src_port: needs proto = "udp" or "tcp"` + "\x00",
				`t.toml:39: offload.rule[5].dst_port: 70000 is out of range 0..65535` + "\x00",
				`t.toml:43: offload.rule[6].proto: expected a string or an integer, got float` + "\x00",
				`t.toml:47: offload.rule[7].src: "fe80::1%eth0" is not an IPv4 or IPv6 address` + "\x00",
			}},
		{"meter", cat(
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "rfc4115"`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "srtcm"`, `cir = 1`, `cbs = 1`, `pir = 2`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "trtcm"`, `cir = 10`, `pir = 9`, `cbs = 1`, `pbs = 1`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "srtcm"`, `cir = 1`, `cbs = 0`, `ebs = 0`, `red = "mark"`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "srtcm"`, `cir = 1`, `cbs = 0`, `ebs = 0`),
			rule(`port = "a"`, `preset = "meter"`, `proto = "udp"`, `algorithm = "srtcm"`, `cir = 1`, `cbs = 17179869184`, `ebs = 0`)),
			[]string{
				`t.toml:11: offload.rule[0].algorithm: missing; "srtcm" (cir, cbs, ebs) or "trtcm" (cir, pir, cbs, pbs)` + "\x00",
				`t.toml:19: offload.rule[1].algorithm: "rfc4115" is not "srtcm" or "trtcm"` + "\x00",
				`t.toml:20: offload.rule[2].ebs: missing; srtcm needs cir, cbs, ebs` + "\x00",
				`t.toml:27: offload.rule[2].pir: not a parameter of srtcm (it takes cir, cbs, ebs)` + "\x00",
				`t.toml:34: offload.rule[3].pir: 9 is below cir 10 (RFC 2698)` + "\x00",
				`t.toml:45: offload.rule[4].red: "mark" is not one of drop, pass` + "\x00",
				`t.toml:50: offload.rule[5].algorithm: action meter: needs cbs or ebs above 0 (RFC 2697)` + "\x00",
				`t.toml:58: offload.rule[6].algorithm: action meter: burst sizes are limited to`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("t.toml", tc.src)
			if err == nil {
				t.Fatalf("no error; offload %+v", cfg.Offload)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tc.want), err)
			}
			for i, w := range tc.want {
				if whole, ok := strings.CutSuffix(w, "\x00"); ok {
					if got[i] != whole {
						t.Errorf("error %d:\n got %s\nwant %s", i, got[i], whole)
					}
				} else if !strings.HasPrefix(got[i], w) {
					t.Errorf("error %d:\n got %s\nwant %s...", i, got[i], w)
				}
			}
		})
	}
}

func TestOffloadAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.1":         "10.0.0.1/32",
		"10.0.0.1/24":      "10.0.0.0/24",
		"2001:db8::1":      "2001:db8::1/128",
		"2001:db8:1:2::/3": "2000::/3",
		"::ffff:10.0.0.1":  "::ffff:10.0.0.1/128",
	} {
		p, err := OffloadAddr(in)
		if err != nil || p != netip.MustParsePrefix(want) {
			t.Errorf("OffloadAddr(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "10.0.0.1/33", "::/0", "10.0.0", "host"} {
		if p, err := OffloadAddr(in); err == nil {
			t.Errorf("OffloadAddr(%q) = %v", in, p)
		}
	}
}
