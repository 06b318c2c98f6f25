package config

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"roce-fwd/qos"
	"roce-fwd/roce"
)

// qosWith is valid (ports "a" and "b", lines 1-9) in mode "roce" (lines
// 10-11) followed by extra, which starts on line 12.
func qosWith(extra ...string) []byte {
	return with(append([]string{`[pipeline]`, `mode = "roce"`}, extra...)...)
}

func parseQoS(t *testing.T, data []byte) *Config {
	t.Helper()
	cfg, err := Parse("t.toml", data)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	return cfg
}

func preset(t *testing.T, name string) qos.Config {
	t.Helper()
	c, err := qos.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// noPreset is what QoS starts from without qos.preset: the default
// config with TC3 lossless and nvidia-roce's PFC thresholds and watchdog.
func noPreset() qos.Config {
	c := qos.DefaultConfig()
	c.TC[3].Lossless = true
	c.TC[3].Limit = qos.DefaultLosslessLimit
	nv := qos.NVIDIARoCE()
	c.PFC, c.Watchdog = nv.PFC, nv.Watchdog
	return c
}

func TestQoSOff(t *testing.T) {
	cfg := parseQoS(t, with())
	if cfg.QoSEnabled() {
		t.Error("QoS on without preset, [[qos.port]] or [pfc]")
	}
	if got := cfg.TCMap(); got != roce.DefaultTCMap() {
		t.Errorf("TCMap = %+v", got)
	}
	if got := cfg.PortQoS("a"); !reflect.DeepEqual(got, qos.DefaultConfig()) {
		t.Errorf("PortQoS = %+v", got)
	}
	if cfg.QoS.Lossless != nil || cfg.QoS.PFCMode != "" || cfg.PFCMode() != "auto" || cfg.PortRateSet("a") {
		t.Errorf("QoS off filled in %+v", cfg.QoS)
	}
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "[qos]\ntrust = \"dscp\"\n\n[console]") || strings.Contains(out, "pfc") || strings.Contains(out, "lossless") {
		t.Errorf("Encode prints QoS keys that are not set:\n%s", out)
	}

	// Classification alone still works with QoS scheduling off.
	cfg = parseQoS(t, with(`[qos]`, `trust = "pcp"`, `pcp_to_tc = { 1 = 5 }`))
	m := cfg.TCMap()
	if cfg.QoSEnabled() || m.Trust != roce.TrustPCP || m.PCP[1] != 5 || m.PCP[2] != 2 || m.DSCP[26] != 3 {
		t.Errorf("TCMap = %+v", m)
	}
	if got := cfg.PortQoS("b").TCMap; got != m {
		t.Errorf("PortQoS.TCMap = %+v", got)
	}
}

func TestQoSPresetOnly(t *testing.T) {
	for _, name := range qos.PresetNames() {
		t.Run(name, func(t *testing.T) {
			cfg := parseQoS(t, qosWith(`[qos]`, `preset = "`+name+`"`))
			want := preset(t, name)
			if !cfg.QoSEnabled() {
				t.Error("QoS off")
			}
			for _, port := range []string{"a", "b"} {
				if got := cfg.PortQoS(port); !reflect.DeepEqual(got, want) {
					t.Errorf("PortQoS(%q) =\n%+v\nwant\n%+v", port, got, want)
				}
				if cfg.PortRateSet(port) {
					t.Errorf("PortRateSet(%q)", port)
				}
			}
			if cfg.TCMap() != want.TCMap {
				t.Errorf("TCMap = %+v", cfg.TCMap())
			}
			// The effective values of the unset keys are filled in.
			var lossless []int
			for tc := range want.TC {
				if want.TC[tc].Lossless {
					lossless = append(lossless, tc)
				}
			}
			if cfg.QoS.Trust != "dscp" || cfg.PFCMode() != "auto" || cfg.QoS.PFCMode != "auto" ||
				cfg.QoS.Lossless == nil || len(cfg.QoS.Lossless) != len(lossless) || len(lossless) > 0 && !reflect.DeepEqual(cfg.QoS.Lossless, lossless) {
				t.Errorf("effective keys: %+v, want lossless %v", cfg.QoS, lossless)
			}
			roundTrip(t, cfg)
		})
	}
}

func roundTrip(t *testing.T, cfg *Config) {
	t.Helper()
	var buf bytes.Buffer
	if err := cfg.Encode(&buf); err != nil {
		t.Fatalf("Encode: %v", err)
	}
	again, err := Parse("again.toml", buf.Bytes())
	if err != nil {
		t.Fatalf("re-Parse: %v\n%s", err, buf.String())
	}
	if !equalIgnoringSource(cfg, again) {
		t.Fatalf("round trip changed the config:\n%s", buf.String())
	}
	for _, port := range []string{"a", "b", "in", "out"} {
		if got, want := again.PortQoS(port), cfg.PortQoS(port); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip changed PortQoS(%q):\n%+v\n%+v", port, got, want)
		}
	}
}

func TestQoSOverrides(t *testing.T) {
	cases := []struct {
		name   string
		base   func() qos.Config
		lines  []string
		global func(c *qos.Config) // applied to every port
		port   func(c *qos.Config) // applied to port "b" only
		rateB  bool                // PortRateSet("b")
	}{
		{name: "trust", base: qos.NVIDIARoCE,
			lines:  []string{`[qos]`, `preset = "nvidia-roce"`, `trust = "pcp"`},
			global: func(c *qos.Config) { c.TCMap.Trust = roce.TrustPCP }},
		{name: "dscp and pcp entries", base: qos.SONiCAzure,
			lines: []string{`[qos]`, `preset = "sonic-azure"`, `dscp_to_tc = { 26 = 3 }`, `pcp_to_tc = { "0" = 1 }`},
			global: func(c *qos.Config) {
				c.TCMap.DSCP[26] = 3
				c.TCMap.PCP[0] = 1
			}},
		{name: "lossless added", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`, `lossless = [4, 3]`},
			global: func(c *qos.Config) {
				c.TC[4].Lossless = true
				c.TC[4].Limit = qos.DefaultLosslessLimit
			}},
		{name: "lossless removed", base: qos.SONiCAzure,
			lines:  []string{`[qos]`, `preset = "sonic-azure"`, `lossless = [4]`},
			global: func(c *qos.Config) { c.TC[3].Lossless = false }},
		{name: "no lossless", base: qos.NVIDIARoCE,
			lines:  []string{`[qos]`, `preset = "nvidia-roce"`, `lossless = []`},
			global: func(c *qos.Config) { c.TC[3].Lossless = false }},
		{name: "pfc priority", base: qos.NVIDIARoCE,
			lines:  []string{`[qos]`, `preset = "nvidia-roce"`, `pfc_priority_to_tc = { 5 = 3 }`},
			global: func(c *qos.Config) { c.PrioToTC[5] = 3 }},
		{name: "port tc weight", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 0`, `weight = 20`},
			port: func(c *qos.Config) { c.TC[0].Weight = 20 }},
		{name: "port tc watchdog", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 3`, `watchdog = false`, `watchdog_action = "alert"`},
			port: func(c *qos.Config) {
				c.Watchdog.Off = 1 << 3
				c.Watchdog.TCActionSet, c.Watchdog.TCAction[3] = 1<<3, qos.ActionAlert
			}},
		{name: "port tc limit and ecn max", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 3`, `limit = "8MiB"`, `ecn = { max = "2MB" }`},
			port: func(c *qos.Config) {
				c.TC[3].Limit = 8 << 20
				c.TC[3].ECN.Max = 2_000_000
			}},
		{name: "port rate", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `rate = "25Gbps"`, `burst = "128KiB"`},
			port:  func(c *qos.Config) { c.Rate, c.Burst = 25e9, 128<<10 },
			rateB: true},
		{name: "port rate unlimited", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`, `[[qos.port]]`, `name = "b"`, `rate = "unlimited"`},
			rateB: true},
		{name: "tc made strict", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 0`, `scheduler = "strict"`},
			port: func(c *qos.Config) { c.TC[0].Mode, c.TC[0].Weight = qos.Strict, 0 }},
		{name: "tc made dwrr", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 6`, `scheduler = "dwrr"`, `weight = 10`},
			port: func(c *qos.Config) { c.TC[6].Mode, c.TC[6].Weight = qos.DWRR, 10 }},
		{name: "ecn off", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 3`, `ecn = { enabled = false }`},
			port: func(c *qos.Config) { c.TC[3].ECN = qos.ECN{} }},
		{name: "ecn on a lossy tc, per-tc shaper", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 0`,
				`ecn = { min = "100KB", max = "500KB", probability = 1, weight = 0.25 }`,
				`max_rate = "10Gbps"`, `max_burst = "64KB"`},
			port: func(c *qos.Config) {
				c.TC[0].ECN = qos.ECN{Min: 100_000, Max: 500_000, Probability: 1, Weight: 0.25}
				c.TC[0].MaxRate, c.TC[0].MaxBurst = 10e9, 64_000
			}},
		{name: "pfc thresholds and watchdog action", base: qos.NVIDIARoCE,
			lines: []string{`[qos]`, `preset = "nvidia-roce"`,
				`[pfc]`, `xoff = "1MB"`, `xon = "512KB"`, `quanta = 1000`, `watchdog = { action = "alert", detection_time = "1s" }`},
			global: func(c *qos.Config) {
				c.PFC = qos.PFCConfig{Xoff: 1_000_000, Xon: 512_000, Quanta: 1000}
				c.Watchdog.Action = qos.ActionAlert
				c.Watchdog.DetectionTime = 1e9
			}},
		{name: "watchdog off", base: qos.SONiCAzure,
			lines:  []string{`[qos]`, `preset = "sonic-azure"`, `[pfc]`, `watchdog = { enabled = false }`},
			global: func(c *qos.Config) { c.Watchdog.Enabled = false }},
		{name: "no preset, qos.port only", base: noPreset,
			lines: []string{`[[qos.port]]`, `name = "b"`, `rate = "10Gbps"`},
			port:  func(c *qos.Config) { c.Rate = 10e9 }, rateB: true},
		{name: "no preset, pfc only", base: noPreset,
			lines:  []string{`[pfc]`, `xon = "1MB"`},
			global: func(c *qos.Config) { c.PFC.Xon = 1_000_000 }},
		{name: "default preset made lossless", base: noPreset,
			lines: []string{`[qos]`, `preset = "default"`, `lossless = [3]`}},
		{name: "no preset, explicit lossless and trust", base: noPreset,
			lines: []string{`[qos]`, `trust = "none"`, `lossless = [3, 5]`, `[pfc]`},
			global: func(c *qos.Config) {
				c.TCMap.Trust = roce.TrustNone
				c.TC[5].Lossless = true
				c.TC[5].Limit = qos.DefaultLosslessLimit
			}},
		{name: "watchdog turned on with defaults", base: func() qos.Config {
			c := qos.DefaultConfig()
			c.TC[2].Lossless, c.TC[2].Limit = true, 32<<20
			c.PFC = qos.NVIDIARoCE().PFC
			c.Watchdog = qos.NVIDIARoCE().Watchdog
			c.Watchdog.Action = qos.ActionForward
			return c
		},
			lines: []string{`[qos]`, `preset = "default"`, `lossless = [2]`,
				`[[qos.port]]`, `name = "a"`, `[[qos.port.tc]]`, `tc = 2`, `limit = "32MiB"`,
				`[[qos.port]]`, `name = "b"`, `[[qos.port.tc]]`, `tc = 2`, `limit = "32MiB"`,
				`[pfc]`, `watchdog = { action = "forward" }`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parseQoS(t, qosWith(tc.lines...))
			wantA := tc.base()
			if tc.global != nil {
				tc.global(&wantA)
			}
			wantB := wantA
			if tc.port != nil {
				tc.port(&wantB)
			}
			if got := cfg.PortQoS("a"); !reflect.DeepEqual(got, wantA) {
				t.Errorf("PortQoS(a) =\n%+v\nwant\n%+v", got, wantA)
			}
			if got := cfg.PortQoS("b"); !reflect.DeepEqual(got, wantB) {
				t.Errorf("PortQoS(b) =\n%+v\nwant\n%+v", got, wantB)
			}
			if cfg.TCMap() != wantA.TCMap {
				t.Errorf("TCMap = %+v, want %+v", cfg.TCMap(), wantA.TCMap)
			}
			if cfg.PortRateSet("a") || cfg.PortRateSet("b") != tc.rateB {
				t.Errorf("PortRateSet = %v, %v", cfg.PortRateSet("a"), cfg.PortRateSet("b"))
			}
			roundTrip(t, cfg)
		})
	}
}

// The example from the [qos] documentation, with the ports it names.
var qosExample = src(
	`[[port]]`,
	`name = "in"`,
	`vdev = "net_null0"`,
	`[[port]]`,
	`name = "out"`,
	`vdev = "net_null1"`,
	`[[forward]]`,
	`from = "in"`,
	`to = "out"`,
	`[pipeline]`,
	`mode = "roce"`,
	``,
	`[qos]`,
	`preset = "nvidia-roce"      # "default" | "nvidia-roce" | "sonic-azure"`,
	`trust = "dscp"              # "dscp" | "pcp" | "none"`,
	`dscp_to_tc = { "26" = 3, "48" = 6 }`,
	`pcp_to_tc = { "3" = 3 }`,
	`lossless = [3]`,
	`pfc_mode = "auto"`,
	`pfc_priority_to_tc = { "3" = 3 }`,
	``,
	`[[qos.port]]`,
	`name = "out"`,
	`rate = "25Gbps"`,
	`burst = "64KB"`,
	`  [[qos.port.tc]]`,
	`  tc = 3`,
	`  scheduler = "dwrr"`,
	`  weight = 50`,
	`  limit = "4MB"`,
	`  ecn = { min = "150KB", max = "1.5MB", probability = 0.1, weight = 0.0 }`,
	`  max_rate = "10Gbps"`,
	`  max_burst = "64KB"`,
	``,
	`[pfc]`,
	`xoff = "256KB"`,
	`xon = "128KB"`,
	`quanta = 65535`,
	`watchdog = { detection_time = "200ms", restoration_time = "200ms", action = "drop" }`,
)

func TestQoSExample(t *testing.T) {
	cfg := parseQoS(t, qosExample)
	in := qos.NVIDIARoCE()
	in.PFC = qos.PFCConfig{Xoff: 256_000, Xon: 128_000, Quanta: 0xFFFF}
	out := in
	out.Rate, out.Burst = 25e9, 64_000
	out.TC[3].Limit = 4_000_000
	out.TC[3].MaxRate, out.TC[3].MaxBurst = 10e9, 64_000
	if got := cfg.PortQoS("out"); !reflect.DeepEqual(got, out) {
		t.Errorf("PortQoS(out) =\n%+v\nwant\n%+v", got, out)
	}
	if got := cfg.PortQoS("in"); !reflect.DeepEqual(got, in) {
		t.Errorf("PortQoS(in) =\n%+v\nwant\n%+v", got, in)
	}
	if !cfg.PortRateSet("out") || cfg.PortRateSet("in") || cfg.PFCMode() != "auto" || !cfg.QoSEnabled() {
		t.Errorf("PortRateSet %v %v, PFCMode %q", cfg.PortRateSet("out"), cfg.PortRateSet("in"), cfg.PFCMode())
	}
	for _, port := range []string{"in", "out"} {
		c := cfg.PortQoS(port)
		if err := c.Validate(); err != nil {
			t.Errorf("PortQoS(%q).Validate: %v", port, err)
		}
	}
	roundTrip(t, cfg)
}

func init() { errorCases = append(errorCases, qosErrorCases...) }

// qosErrorCases run in TestErrors (and seed FuzzParse).
var qosErrorCases = []struct {
	name string
	src  []byte
	want []string
}{
	{"qos global key errors", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "mellanox"`,
		/* 14 */ `lossless = [3, 9, 3]`,
		/* 15 */ `pfc_mode = "firmware"`,
		/* 16 */ `pfc_priority_to_tc = { "8" = 3, "1" = 8 }`,
	), []string{
		`t.toml:13: qos.preset: "mellanox" is not one of default, nvidia-roce, sonic-azure` + "\x00",
		`t.toml:14: qos.lossless[1]: 9 is not a traffic class (0..7)` + "\x00",
		`t.toml:14: qos.lossless[2]: TC 3 is already listed at lossless[0]` + "\x00",
		`t.toml:15: qos.pfc_mode: "firmware" is not one of auto, hardware, software` + "\x00",
		`t.toml:16: qos.pfc_priority_to_tc.1: 8 is out of range 0..7` + "\x00",
		`t.toml:16: qos.pfc_priority_to_tc.8: "8" is not a PFC priority value (0..7)` + "\x00",
	}},

	{"qos keys without qos scheduling", with(
		/* 10 */ `[qos]`,
		/* 11 */ `lossless = [3]`,
		/* 12 */ `pfc_mode = "software"`,
		/* 13 */ `pfc_priority_to_tc = { 3 = 3 }`,
		/* 14 */ `preset = ""`,
	), []string{
		"t.toml:11: qos.lossless: has no effect while QoS scheduling is off; turn it on with qos.preset, a [[qos.port]] or a [pfc] section\x00",
		"t.toml:12: qos.pfc_mode: has no effect while QoS scheduling is off",
		"t.toml:13: qos.pfc_priority_to_tc: has no effect while QoS scheduling is off",
		`t.toml:14: qos.preset: "" is not one of default, nvidia-roce, sonic-azure`,
	}},

	{"qos without roce mode: preset", with(
		/* 10 */ `[qos]`,
		/* 11 */ `preset = "nvidia-roce"`,
	), []string{
		`t.toml:11: pipeline.mode: "io" (the default): QoS scheduling, turned on by qos.preset, needs the "roce" mode's classifier, which assigns the traffic classes; set [pipeline] mode = "roce"` + "\x00",
	}},

	{"qos without roce mode: pipeline.mode", with(
		/* 10 */ `[pipeline]`,
		/* 11 */ `mode = "mac"`,
		/* 12 */ `[pfc]`,
	), []string{
		`t.toml:11: pipeline.mode: "mac": QoS scheduling needs the "roce" mode's classifier, which assigns the traffic classes; set mode = "roce"` + "\x00",
	}},

	{"qos without roce mode: qos.port", with(
		/* 10 */ `[[qos.port]]`,
		/* 11 */ `name = "b"`,
		/* 12 */ `[qos.port.tc]`,
	), []string{
		`t.toml:10: pipeline.mode: "io" (the default): QoS scheduling, turned on by qos.port[0], needs`,
		"t.toml:12: qos.port[0].tc: expected an array of tables, got table (write [[qos.port.tc]], not [qos.port.tc])\x00",
	}},

	{"qos.port names", qosWith(
		/* 12 */ `[[qos.port]]`,
		/* 13 */ `name = "z"`,
		/* 14 */ `[[qos.port]]`,
		/* 15 */ `name = "b"`,
		/* 16 */ `[[qos.port]]`,
		/* 17 */ `name = "b"`,
		/* 18 */ `[[qos.port]]`,
		/* 19 */ `rate = "1Gbps"`,
	), []string{
		`t.toml:13: qos.port[0].name: unknown port "z"; valid ports: "a", "b"` + "\x00",
		`t.toml:17: qos.port[2].name: port "b" is already configured by qos.port[1] (line 14)` + "\x00",
		`t.toml:18: qos.port[3].name: missing; name the [[port]] this configures (valid ports: "a", "b")` + "\x00",
	}},

	{"qos.port values", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "nvidia-roce"`,
		/* 14 */ `[[qos.port]]`,
		/* 15 */ `name = "b"`,
		/* 16 */ `rate = "25GBps"`,
		/* 17 */ `burst = "64Kb"`,
		/* 18 */ `[[qos.port.tc]]`,
		/* 19 */ `tc = 8`,
		/* 20 */ `[[qos.port.tc]]`,
		/* 21 */ `tc = 6`,
		/* 22 */ `weight = 10`,
		/* 23 */ `[[qos.port.tc]]`,
		/* 24 */ `tc = 0`,
		/* 25 */ `scheduler = "wfq"`,
		/* 26 */ `limit = "1.5B"`,
		/* 27 */ `weight = 256`,
		/* 28 */ `[[qos.port.tc]]`,
		/* 29 */ `tc = 0`,
		/* 30 */ `[[qos.port.tc]]`,
		/* 31 */ `weight = 1`,
		/* 32 */ `[[qos.port.tc]]`,
		/* 33 */ `tc = 7`,
		/* 34 */ `weight = "10"`,
		/* 35 */ `ecn = "on"`,
		/* 36 */ `[[qos.port]]`,
		/* 37 */ `name = "a"`,
		/* 38 */ `rate = "0"`,
		/* 39 */ `burst = "1GiB"`,
		/* 40 */ `[[qos.port.tc]]`,
		/* 41 */ `tc = 3`,
		/* 42 */ `watchdog_action = "log"`,
		/* 43 */ `watchdog = "off"`,
	), []string{
		`t.toml:16: qos.port[0].rate: "25GBps" is not a rate (bps, Kbps, Mbps, Gbps, Tbps) or "unlimited": unit "GBps" is bytes per second; rates are bits per second` + "\x00",
		`t.toml:17: qos.port[0].burst: "64Kb" is not a size (B, KB, MB, GB, KiB, MiB, GiB): unit "Kb" is in bits; sizes are bytes` + "\x00",
		`t.toml:19: qos.port[0].tc[0].tc: 8 is not a traffic class (0..7)` + "\x00",
		`t.toml:22: qos.port[0].tc[1].weight: TC 6 is strict; a weight is only for scheduler = "dwrr"` + "\x00",
		`t.toml:25: qos.port[0].tc[2].scheduler: "wfq" is not one of strict, dwrr` + "\x00",
		`t.toml:26: qos.port[0].tc[2].limit: "1.5B" is not a size (B, KB, MB, GB, KiB, MiB, GiB): not a whole number of units` + "\x00",
		`t.toml:27: qos.port[0].tc[2].weight: 256 is out of range 1..255` + "\x00",
		`t.toml:29: qos.port[0].tc[3].tc: TC 0 is already configured by tc[2] (line 23)` + "\x00",
		`t.toml:30: qos.port[0].tc[4].tc: missing; say which traffic class (0..7) this configures` + "\x00",
		`t.toml:34: qos.port[0].tc[5].weight: expected an integer, got string` + "\x00",
		`t.toml:35: qos.port[0].tc[5].ecn: expected a table, got string` + "\x00",
		`t.toml:38: qos.port[1].rate: "0" would stop all traffic; write "unlimited" for no shaping` + "\x00",
		`t.toml:39: qos.port[1].burst: "1GiB" is above 512MiB` + "\x00",
		`t.toml:42: qos.port[1].tc[0].watchdog_action: "log" is not one of drop, forward, alert` + "\x00",
		`t.toml:43: qos.port[1].tc[0].watchdog: expected a boolean, got string` + "\x00",
	}},

	{"qos.port.tc ecn and shaper", qosWith(
		/* 12 */ `[[qos.port]]`,
		/* 13 */ `name = "b"`,
		/* 14 */ `[[qos.port.tc]]`,
		/* 15 */ `tc = 1`,
		/* 16 */ `ecn = { min = "15XB", max = "1MB", probability = 1.5, weight = 1 }`,
		/* 17 */ `max_rate = "fast"`,
		/* 18 */ `max_burst = "64KB"`,
		/* 19 */ `[[qos.port.tc]]`,
		/* 20 */ `tc = 2`,
		/* 21 */ `max_burst = "64KB"`,
		/* 22 */ `ecn = { max = "1MB" }`,
		/* 23 */ `[[qos.port.tc]]`,
		/* 24 */ `tc = 3`,
		/* 25 */ `ecn = { min = "1MB", max = "0", probability = 0.5 }`,
	), []string{
		`t.toml:16: qos.port[0].tc[0].ecn.min: "15XB" is not a size (B, KB, MB, GB, KiB, MiB, GiB): unknown unit "XB"` + "\x00",
		`t.toml:16: qos.port[0].tc[0].ecn.probability: 1.5 is out of range 0..1` + "\x00",
		`t.toml:16: qos.port[0].tc[0].ecn.weight: 1 is out of range [0, 1) (0 = instantaneous depth)` + "\x00",
		`t.toml:17: qos.port[0].tc[0].max_rate: "fast" is not a rate (bps, Kbps, Mbps, Gbps, Tbps) or "unlimited": does not start with a number` + "\x00",
		`t.toml:21: qos.port[0].tc[1].max_burst: has no effect without a max_rate` + "\x00",
		`t.toml:22: qos.port[0].tc[1].ecn: missing min, probability: TC 2 has no ECN profile in the base configuration, so ecn needs min, max and probability` + "\x00",
		`t.toml:25: qos.port[0].tc[2].ecn.max: "0": a max of 0 turns ECN off; write enabled = false for that` + "\x00",
	}},

	{"qos.port.tc dwrr needs a weight", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "nvidia-roce"`,
		/* 14 */ `[[qos.port]]`,
		/* 15 */ `name = "b"`,
		/* 16 */ `[[qos.port.tc]]`,
		/* 17 */ `tc = 6`,
		/* 18 */ `scheduler = "dwrr"`,
	), []string{
		`t.toml:16: qos.port[0].tc[0].weight: missing; TC 6 is strict in the base configuration, so scheduler = "dwrr" needs a weight (1..255)` + "\x00",
	}},

	{"pfc values", qosWith(
		/* 12 */ `[pfc]`,
		/* 13 */ `xoff = "lots"`,
		/* 14 */ `quanta = 0`,
		/* 15 */ `watchdog = { detection_time = "200", restoration_time = "-1s",`,
		/* 16 */ `  action = "ignore", enabled = "no" }`,
		/* 17 */ `xon = 1024`,
	), []string{
		`t.toml:13: pfc.xoff: "lots" is not a size (B, KB, MB, GB, KiB, MiB, GiB): does not start with a number` + "\x00",
		`t.toml:14: pfc.quanta: 0 is out of range 1..65535 (units of 512 bit times)` + "\x00",
		`t.toml:15: pfc.watchdog.detection_time: "200" is not a duration such as "200ms"` + "\x00",
		`t.toml:15: pfc.watchdog.restoration_time: "-1s" must be positive` + "\x00",
		`t.toml:16: pfc.watchdog.action: "ignore" is not one of drop, forward, alert` + "\x00",
		`t.toml:16: pfc.watchdog.enabled: expected a boolean, got string` + "\x00",
		`t.toml:17: pfc.xon: expected a string, got integer` + "\x00",
	}},

	// What qos.Config.Validate finds is reported at the key whose value
	// is wrong (the [[qos.port.tc]] key, the [pfc] key), with the fix.
	{"qos.Config.Validate errors", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "nvidia-roce"`,
		/* 14 */ `[pfc]`,
		/* 15 */ `xon = "3MB"`,
		/* 16 */ `[[qos.port]]`,
		/* 17 */ `name = "b"`,
		/* 18 */ `[[qos.port.tc]]`,
		/* 19 */ `tc = 0`,
		/* 20 */ `limit = "100KB"`,
		/* 21 */ `ecn = { min = "150KB", max = "1MB", probability = 0.1 }`,
		/* 22 */ `[[qos.port]]`,
		/* 23 */ `name = "a"`,
		/* 24 */ `[[qos.port.tc]]`,
		/* 25 */ `tc = 3`,
		/* 26 */ `limit = "1MB"`,
	), []string{
		`t.toml:15: pfc.xon: PFC xon 3MB must be below xoff 2MB; lower xon or raise xoff` + "\x00",
		`t.toml:21: qos.port[0].tc[0].ecn.min: TC0: ECN min 150KB is not below the queue limit 100KB: nothing would be marked; lower ecn min or raise limit` + "\x00",
		`t.toml:26: qos.port[1].tc[0].limit: TC3: PFC xoff 2MB is not below the queue limit 1MB: the queue would drop before pausing; lower pfc xoff or raise limit` + "\x00",
	}},

	// Field and cross-field errors in one run: a quanta that does not
	// parse does not hide xon above xoff, and a bad weight in one TC does
	// not hide ECN min above max in another.
	{"field and cross-field errors together", qosWith(
		/* 12 */ `[pfc]`,
		/* 13 */ `quanta = 0`,
		/* 14 */ `xoff = "100KB"`,
		/* 15 */ `xon = "200KB"`,
		/* 16 */ `[[qos.port]]`,
		/* 17 */ `name = "b"`,
		/* 18 */ `[[qos.port.tc]]`,
		/* 19 */ `tc = 1`,
		/* 20 */ `weight = 0`,
		/* 21 */ `[[qos.port.tc]]`,
		/* 22 */ `tc = 2`,
		/* 23 */ `ecn = { min = "900KB", max = "800KB", probability = 0.5 }`,
	), []string{
		`t.toml:13: pfc.quanta: 0 is out of range 1..65535 (units of 512 bit times)` + "\x00",
		`t.toml:15: pfc.xon: PFC xon 200KB must be below xoff 100KB; lower xon or raise xoff` + "\x00",
		`t.toml:20: qos.port[0].tc[0].weight: 0 is out of range 1..255` + "\x00",
		`t.toml:23: qos.port[0].tc[1].ecn.min: TC2: ECN min 900KB is above max 800KB; lower min or raise max` + "\x00",
	}},

	// Each problem's field decides its key: the xoff threshold is [pfc]'s.
	{"qos.Config.Validate: xoff of 0", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "nvidia-roce"`,
		/* 14 */ `[pfc]`,
		/* 15 */ `xoff = "0"`,
	), []string{
		`t.toml:15: pfc.xoff: PFC xoff must be above 0 when a TC is lossless` + "\x00",
	}},

	// A profile qos.ECN.Validate refuses, said once, without a second
	// package prefix.
	{"qos.Config.Validate: ECN profile", qosWith(
		/* 12 */ `[[qos.port]]`,
		/* 13 */ `name = "b"`,
		/* 14 */ `[[qos.port.tc]]`,
		/* 15 */ `tc = 1`,
		/* 16 */ `ecn = { min = "900KB", max = "800KB", probability = 0.5 }`,
	), []string{
		`t.toml:16: qos.port[0].tc[0].ecn.min: TC1: ECN min 900KB is above max 800KB; lower min or raise max` + "\x00",
	}},

	{"lossless TC without a PFC priority", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "nvidia-roce"`,
		/* 14 */ `pfc_priority_to_tc = { 3 = 0 }`,
	), []string{
		`t.toml:14: qos.pfc_priority_to_tc: lossless TCs 3 have no PFC priority mapped to them; map one in pfc_priority_to_tc` + "\x00",
	}},

	{"pfc without lossless TCs", qosWith(
		/* 12 */ `[qos]`,
		/* 13 */ `preset = "default"`,
		/* 14 */ `[pfc]`,
		/* 15 */ `xoff = "1MB"`,
	), []string{
		`t.toml:14: pfc: has no effect: no TC is lossless; list the lossless TCs in qos.lossless` + "\x00",
	}},
}

// A problem of the global QoS configuration falls back to its section,
// [pfc] for what [pfc] sets and [qos] for the rest, when the file writes
// none of its keys.
func TestGlobalProblemKeysFallBack(t *testing.T) {
	pfcFields := map[qos.Field]bool{qos.FieldXoff: true, qos.FieldXon: true, qos.FieldLimit: true, qos.FieldWatchdog: true}
	for f := qos.FieldTrust; f <= qos.FieldWatchdog; f++ {
		keys := globalProblemKeys(&qos.FieldError{Field: f, Index: -1, Err: errors.New("x")})
		if got := keys[len(keys)-1].String(); got != "qos" {
			t.Errorf("%v: last candidate %q, want qos", f, got)
		}
		if pfcFields[f] && !slices.ContainsFunc(keys, func(p path) bool { return p.String() == "pfc" }) {
			t.Errorf("%v: candidates %v do not include [pfc]", f, keys)
		}
	}
}
