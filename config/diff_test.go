package config

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	base := "[[port]]\nname = \"a\"\nvdev = \"net_null0\"\n[[port]]\nname = \"b\"\nvdev = \"net_null1\"\n[[forward]]\nfrom = \"a\"\nto = \"b\"\n[pipeline]\nmode = \"roce\"\n"
	a, err := Parse("a.toml", []byte(base+"[qos]\npreset = \"nvidia-roce\"\ndscp_to_tc = { 26 = 3 }\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.toml", []byte(base+"[qos]\npreset = \"nvidia-roce\"\ndscp_to_tc = { 26 = 5, 10 = 1 }\n[[qos.port]]\nname = \"b\"\n[[qos.port.tc]]\ntc = 3\necn = { min = \"10KB\" }\n[[port]]\nname = \"c\"\nvdev = \"net_null2\"\nrx_desc = 512\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := Diff(a, b)
	var keys []string
	for _, c := range got {
		keys = append(keys, c.Key)
	}
	want := []string{"port[2].name", "port[2].vdev", "port[2].rx_queues", "port[2].tx_queues", "port[2].rx_desc", "port[2].tx_desc",
		"port[2].socket", "port[2].promiscuous", "port[2].peer_mac",
		"qos.dscp_to_tc.10", "qos.dscp_to_tc.26", "qos.port[0].name", "qos.port[0].tc[0].tc", "qos.port[0].tc[0].ecn.min"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %v, want %v (%v)", keys, want, got)
	}
	for _, c := range []struct {
		i    int
		want string
	}{{10, "qos.dscp_to_tc.26: 3 → 5"}, {9, "qos.dscp_to_tc.10: (unset) → 1"}, {13, `qos.port[0].tc[0].ecn.min: (unset) → "10KB"`}, {4, "port[2].rx_desc: 0 → 512"}} {
		if s := got[c.i].String(); s != c.want {
			t.Errorf("change %q, want %q", s, c.want)
		}
	}
	if d := Diff(a, a); len(d) != 0 {
		t.Errorf("self diff %v", d)
	}
	c, _ := Parse("c.toml", []byte(base+"[qos]\npreset = \"nvidia-roce\"\ndscp_to_tc = { 26 = 3 }\n[roce]\nverify_icrc = true\n"))
	if d := Diff(a, c); len(d) != 1 || d[0].String() != "roce.verify_icrc: false → true" {
		t.Errorf("diff %v", d)
	}
}
