package config

import (
	"strings"
	"testing"
)

func TestConsoleTelemetryErrors(t *testing.T) {
	base := "[[port]]\nname = \"a\"\nvdev = \"net_null0\"\n[[forward]]\nfrom = \"a\"\nto = \"a\"\n"
	cases := []struct{ src, want string }{
		{"[console]\nsocket = \"rel.sock\"\n", `c.toml:8: console.socket: "rel.sock" must be an absolute path`},
		{"[console]\nsocket = \"/" + strings.Repeat("x", 120) + "\"\n", "c.toml:8: console.socket: \"/xxx"},
		{"[telemetry]\nlisten = \"9479\"\n", `c.toml:8: telemetry.listen: "9479" is not host:port`},
		{"[telemetry]\nlisten = \"127.0.0.1:99999\"\n", `c.toml:8: telemetry.listen: port "99999" is not 0..65535`},
		{"[telemetry]\nlisten = \"example.com:1\"\n", `telemetry.listen: host "example.com" is not an IP address`},
		{"[eal]\nargs = [\"--no-huge\", \"--no-telemetry\"]\n[telemetry]\ndpdk = true\n", "c.toml:10: telemetry.dpdk: is true but eal.args has --no-telemetry"},
	}
	for _, tc := range cases {
		_, err := Parse("c.toml", []byte(base+tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.src, err, tc.want)
		}
	}
	cfg, err := Parse("c.toml", []byte(base+"[console]\nsocket = \"\"\n[telemetry]\nlisten = \"[::1]:0\"\ndpdk = false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Console.Socket != "" || cfg.Console.History != "~/.roce-fwd_history" || cfg.Telemetry.Listen != "[::1]:0" || cfg.Telemetry.DPDK {
		t.Errorf("parsed %+v %+v", cfg.Console, cfg.Telemetry)
	}
	def, err := Parse("d.toml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if def.Console.Socket != DefaultConsoleSocket || def.Telemetry.Listen != "" || !def.Telemetry.DPDK {
		t.Errorf("defaults %+v %+v", def.Console, def.Telemetry)
	}
}
