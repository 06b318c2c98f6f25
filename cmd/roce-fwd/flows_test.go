package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"roce-fwd/config"
	"roce-fwd/flowrule"
	"roce-fwd/offload"
)

const flowsPorts = `
[[port]]
name = "in"
vdev = "net_null0"
rx_queues = 2
[[port]]
name = "out"
vdev = "net_null1"
[[forward]]
from = "in"
to = "out"
`

// flowsRules has every preset but meter, and flow rules.
const flowsRules = flowsPorts + `
[[offload.rule]]
port = "out"
preset = "drop"
src = "10.0.0.0/8"
proto = "tcp"
dst_port = 22
[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [0, 26, 48]
[[offload.rule]]
port = "in"
preset = "cnp-queue"
queue = 1
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52
[[offload.rule]]
port = "in"
preset = "drop"
dst = "2001:db8::/32"
[[offload.rule]]
port = "in"
flow = "group 2 priority 1 ingress pattern eth / vlan vid is 10 / ipv4 dst spec 192.0.2.0 dst prefix 24 / udp src is 1 / end actions flag / rss queues 0 1 end / end"
[[offload.rule]]
port = "out"
flow = "ingress pattern eth / ipv4 ttl is 1 / end actions set_ipv4_dscp dscp_value 8 / count / end"
`

const flowsMeters = flowsPorts + `
[[offload.rule]]
port = "in"
preset = "meter"
src = "192.0.2.1"
proto = "udp"
dst_port = 4791
algorithm = "srtcm"
cir = 125000000
cbs = 65536
ebs = 0
[[offload.rule]]
port = "in"
preset = "meter"
dst = "2001:db8::1"
algorithm = "trtcm"
cir = 1000
pir = 2000
cbs = 3000
pbs = 4000
yellow = "drop"
[[offload.rule]]
port = "out"
preset = "drop"
proto = 47
`

func wantRules(t *testing.T, path string) []offload.PortRules {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	prs, err := offload.ConfigRules(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return prs
}

// parsePrinted reads "flow create" lines back into rules per port token,
// numbered in order.
func parsePrinted(t *testing.T, lines []string) map[string][]flowrule.Rule {
	t.Helper()
	got := map[string][]flowrule.Rule{}
	for _, l := range lines {
		cmd, err := flowrule.Parse(l)
		if err != nil {
			t.Fatalf("printed line does not parse: %v\n%s", err, l)
		}
		if cmd.Kind != flowrule.CmdCreate {
			t.Fatalf("not a create: %s", l)
		}
		cmd.Rule.ID = uint32(len(got[cmd.Port]))
		got[cmd.Port] = append(got[cmd.Port], cmd.Rule)
	}
	return got
}

func TestFlowsPrintsConfigRules(t *testing.T) {
	path := writeFile(t, "flows.toml", flowsRules)
	prs := wantRules(t, path)
	if len(prs) != 2 {
		t.Fatalf("ConfigRules: %d ports", len(prs))
	}

	t.Run("testpmd", func(t *testing.T) {
		r := run(t, "flows", "--config", path)
		if r.code != 0 || r.stderr != "" {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		comment := regexp.MustCompile(`^# port (\S+) \(port id (\d+) in config order; check with "show port summary all"\)$`)
		var creates, ports []string
		id := ""
		for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			if m := comment.FindStringSubmatch(l); m != nil {
				ports = append(ports, m[1]+"="+m[2])
				id = m[2]
				continue
			}
			if id == "" || !strings.HasPrefix(l, "flow create "+id+" ") {
				t.Fatalf("line is neither a port comment nor a flow create on port %q: %q", id, l)
			}
			creates = append(creates, l)
		}
		if want := []string{"in=0", "out=1"}; !reflect.DeepEqual(ports, want) {
			t.Errorf("port comments for %v, want %v", ports, want)
		}
		got := parsePrinted(t, creates)
		if !reflect.DeepEqual(got["0"], prs[0].Rules) || !reflect.DeepEqual(got["1"], prs[1].Rules) || len(got) != 2 {
			t.Errorf("printed rules differ from ConfigRules:\n%s", r.stdout)
		}
	})

	t.Run("console", func(t *testing.T) {
		r := run(t, "flows", "--config", path, "--print", "console")
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		got := parsePrinted(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"))
		if !reflect.DeepEqual(got["in"], prs[0].Rules) || !reflect.DeepEqual(got["out"], prs[1].Rules) || len(got) != 2 {
			t.Errorf("printed rules differ from ConfigRules:\n%s", r.stdout)
		}
	})

	t.Run("port", func(t *testing.T) {
		r := run(t, "flows", "--config", path, "--port", "out", "--print", "console")
		got := parsePrinted(t, strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"))
		if r.code != 0 || len(got) != 1 || !reflect.DeepEqual(got["out"], prs[1].Rules) {
			t.Errorf("--port out: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		r = run(t, "flows", "--config", path, "--port", "nowhere")
		if r.code != exitUsage || !strings.Contains(r.stderr, `--port "nowhere"`) {
			t.Errorf("--port nowhere: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// testpmd creates a meter from a profile, a policy and a meter object
// before the flow refers to it by id.
func TestFlowsMeterLines(t *testing.T) {
	path := writeFile(t, "meters.toml", flowsMeters)
	prs := wantRules(t, path)
	r := run(t, "flows", "--config", path)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	// in: the srtcm rule (IPv4, id 1), the trtcm rule (IPv6, id 2).
	want := []string{
		`^# port in \(`,
		`^add port meter profile srtcm_rfc2697 0 1 125000000 65536 0 0$`,
		`^add port meter policy 0 1 g_actions end y_actions end r_actions drop / end$`,
		`^create port meter 0 1 1 1 yes `,
		`^flow create 0 ingress pattern eth / ipv4 src is 192\.0\.2\.1 proto is 17 / udp dst is 4791 / end actions count / meter mtr_id 1 / end$`,
		`^add port meter profile trtcm_rfc2698 0 2 1000 2000 3000 4000 0$`,
		`^add port meter policy 0 2 g_actions end y_actions drop / end r_actions drop / end$`,
		`^create port meter 0 2 2 2 yes `,
		`^flow create 0 ingress pattern eth / ipv6 dst is 2001:db8::1 / end actions count / meter mtr_id 2 / end$`,
		`^# port out \(`,
		`^flow create 1 ingress pattern eth / ipv4 proto is 47 / end actions count / drop / end$`,
		`^flow create 1 ingress pattern eth / ipv6 proto is 47 / end actions count / drop / end$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), r.stdout)
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d: %q does not match %s", i, lines[i], re)
		}
	}
	// With the meter written inline again, each flow line is the rule.
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	inline := []string{
		strings.Replace(lines[4], "meter mtr_id 1", "meter "+config.OffloadMeterArgs(&cfg.Offload.Rules[0], 1), 1),
		strings.Replace(lines[8], "meter mtr_id 2", "meter "+config.OffloadMeterArgs(&cfg.Offload.Rules[1], 2), 1),
	}
	got := parsePrinted(t, inline)
	if !reflect.DeepEqual(got["0"], prs[0].Rules) {
		t.Errorf("meter rules differ from ConfigRules:\n%s", strings.Join(inline, "\n"))
	}
}

func TestFlowsBadConfig(t *testing.T) {
	path := writeFile(t, "bad.toml", flowsPorts+`
[[offload.rule]]
port = "in"
flow = "ingress pattern eth / ipv4 / end actions queue index 2 / end"
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52
queue = 1
`)
	r := run(t, "flows", "--config", path)
	if r.code != exitUsage || r.stdout != "" {
		t.Errorf("exit %d, want %d\n%s", r.code, exitUsage, r.stdout)
	}
	for _, re := range []string{
		`bad\.toml:15: offload\.rule\[0\]\.flow: action queue: index 2 is out of range: port "in" has rx_queues = 2`,
		`bad\.toml:20: offload\.rule\[1\]\.queue: not a key of preset "mark-roce"`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stderr) {
			t.Errorf("no error matching %s in:\n%s", re, r.stderr)
		}
	}
	if r := run(t, "flows"); r.code != exitUsage || !strings.Contains(r.stderr, "--config FILE is required") {
		t.Errorf("no --config: exit %d\n%s", r.code, r.stderr)
	}
}

// dpdk-testpmd on two net_null ports reads the printed lines. net_null has
// no flow or meter support, so a command testpmd parsed fails in the PMD
// with "Function not implemented"; "Bad arguments" means testpmd could not
// parse it.
func TestFlowsTestpmdAcceptsLines(t *testing.T) {
	testpmd, err := exec.LookPath("dpdk-testpmd")
	if err != nil {
		t.Skip("dpdk-testpmd is not installed")
	}
	for _, tc := range []struct{ name, toml string }{{"rules", flowsRules}, {"meters", flowsMeters}} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, "flows", "--config", writeFile(t, "flows.toml", tc.toml))
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, testpmd, "--no-huge", "-m", "1024", "--no-pci", "--no-shconf",
				"--file-prefix", fmt.Sprintf("rf-flows-%d-%s", os.Getpid(), tc.name),
				"--vdev", "net_null0", "--vdev", "net_null1", "--", "-i", "--total-num-mbufs=16383")
			cmd.Stdin = strings.NewReader(r.stdout + "quit\n")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("dpdk-testpmd: %v\n%s", err, out)
			}
			// Each "testpmd> " prompt is followed by the command it read
			// and what testpmd answered.
			parts := strings.Split(string(out), "testpmd> ")
			if len(parts) < 2 {
				t.Fatalf("no testpmd prompt:\n%s", out)
			}
			var ran []string
			for _, p := range parts[1:] {
				line, answer, _ := strings.Cut(p, "\n")
				line = strings.TrimSuffix(line, "\r") // the terminal's line ending
				ran = append(ran, line)
				if strings.Contains(answer, "Bad arguments") {
					t.Errorf("testpmd cannot parse: %s", line)
				} else if !strings.HasPrefix(line, "#") && line != "quit" && !strings.Contains(answer, "Function not implemented") {
					t.Errorf("testpmd did not pass to the PMD: %s\n%s", line, answer)
				}
			}
			if want := strings.Split(r.stdout+"quit", "\n"); !reflect.DeepEqual(ran, want) {
				t.Errorf("testpmd ran\n%s\nwant\n%s", strings.Join(ran, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
