package config

import (
	"os"
	"strings"
	"testing"
)

// routed is a valid routed file: two uplinks, an ECMP default route.
var routed = []string{
	/* 1 */ `[[port]]`,
	/* 2 */ `name = "up0"`,
	/* 3 */ `vdev = "net_null0"`,
	/* 4 */ `addresses = ["10.0.0.1/24", "2001:db8:0::1/64"]`,
	/* 5 */ `[[port]]`,
	/* 6 */ `name = "up1"`,
	/* 7 */ `vdev = "net_null1"`,
	/* 8 */ `addresses = ["10.0.1.1/24"]`,
	/* 9 */ `[[route]]`,
	/* 10 */ `prefix = "0.0.0.0/0"`,
	/* 11 */ `via = [{ port = "up0", gateway = "10.0.0.2" }, { port = "up1", gateway = "10.0.1.2", weight = 2 }]`,
	/* 12 */ `[[neighbor]]`,
	/* 13 */ `port = "up0"`,
	/* 14 */ `ip = "10.0.0.2"`,
	/* 15 */ `mac = "02:00:00:00:00:AA"`,
}

func TestRouted(t *testing.T) {
	cfg := parseQoS(t, src(routed...))
	if !cfg.Routed() || len(cfg.Routes) != 1 || len(cfg.Routes[0].Via) != 2 || cfg.Routes[0].Via[1].Weight != 2 ||
		cfg.Routes[0].Via[0].Weight != 1 || cfg.Routes[0].Action != "forward" || cfg.Routes[0].Line != 9 {
		t.Errorf("routes %+v", cfg.Routes)
	}
	if n := cfg.Neighbors; len(n) != 1 || n[0].MAC != "02:00:00:00:00:aa" || n[0].Line != 12 {
		t.Errorf("neighbors %+v", n)
	}
	if r := cfg.Routing; r.Buckets != 256 || len(r.Hash) != 6 {
		t.Errorf("routing %+v", r)
	}
	roundTrip(t, cfg)
	plain := parseQoS(t, with())
	if plain.Routed() {
		t.Error("a config with [[forward]] and no addresses is routed")
	}
}

func TestRoutingErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra []string
		want  string
	}{
		{"host bits", []string{`[[route]]`, `prefix = "10.1.2.3/16"`, `action = "drop"`}, `t.toml:17: route[1].prefix: "10.1.2.3/16" has host bits set; did you mean "10.1.0.0/16"?`},
		{"unknown port", []string{`[[route]]`, `prefix = "10.9.0.0/16"`, `via = [{ port = "up9", gateway = "10.0.0.2" }]`}, `t.toml:18: route[1].via[0].port: unknown port "up9"`},
		{"gateway off subnet", []string{`[[route]]`, `prefix = "10.9.0.0/16"`, `via = [{ port = "up1", gateway = "10.0.0.2" }]`}, `t.toml:18: route[1].via[0].gateway: 10.0.0.2 is on none of port "up1"'s subnets (10.0.1.1/24)`},
		{"family", []string{`[[route]]`, `prefix = "2001:db8:1::/48"`, `via = [{ port = "up0", gateway = "10.0.0.2" }]`}, `route[1].via[0].gateway: 10.0.0.2 is not of the prefix's address family`},
		{"no via", []string{`[[route]]`, `prefix = "10.9.0.0/16"`}, `route[1].via: missing`},
		{"drop with via", []string{`[[route]]`, `prefix = "10.9.0.0/16"`, `action = "drop"`, `via = [{ port = "up1", gateway = "10.0.1.2" }]`}, `route[1].via: a "drop" route has no next hops`},
		{"duplicate prefix", []string{`[[route]]`, `prefix = "0.0.0.0/0"`, `action = "drop"`}, `route[1].prefix: 0.0.0.0/0 is already the prefix of route[0] (line 9)`},
		{"weight", []string{`[[route]]`, `prefix = "10.9.0.0/16"`, `via = [{ port = "up1", gateway = "10.0.1.2", weight = 0 }]`}, `route[1].via[0].weight: 0 is out of range 1..256`},
		{"bad mac", []string{`[[neighbor]]`, `port = "up1"`, `ip = "10.0.1.9"`, `mac = "nope"`}, `t.toml:19: neighbor[1].mac: "nope" is not a MAC address`},
		{"neighbor off subnet", []string{`[[neighbor]]`, `port = "up1"`, `ip = "10.0.9.9"`, `mac = "02:00:00:00:00:01"`}, `neighbor[1].ip: 10.0.9.9 is on none of port "up1"'s subnets`},
		{"hash field", []string{`[routing]`, `hash = ["dst_ip", "sport"]`}, `t.toml:17: routing.hash[1]: unknown field "sport"`},
		{"buckets", []string{`[routing]`, `buckets = 100`}, `routing.buckets: 100: use a power of two in 16..4096`},
		{"with forward", []string{`[[forward]]`, `from = "up0"`, `to = "up1"`}, `t.toml:16: forward[0]: [[forward]] cannot be combined with routing`},
		{"subnet address", []string{`[[port]]`, `name = "c"`, `vdev = "net_null2"`, `addresses = ["10.5.0.0/16"]`}, `port[2].addresses[0]: "10.5.0.0/16" is the subnet's own address`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("t.toml", src(append(append([]string{}, routed...), c.extra...)...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

// The README's routed example is a valid config.
func TestReadmeRoutedExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "### Routing\n")
	if !ok {
		t.Fatal("README has no Routing section")
	}
	_, block, _ := strings.Cut(rest, "```toml\n")
	block, _, _ = strings.Cut(block, "```")
	cfg, err := Parse("README.md", []byte("[eal]\nargs = [\"-l\", \"0-1\"]\n"+block))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Routed() || len(cfg.Routes) != 3 || len(cfg.Routes[0].Via) != 2 {
		t.Errorf("routes %+v", cfg.Routes)
	}
}
