package linuxcp

import (
	"net"
	"net/netip"
	"reflect"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel routes as the data path takes them: through the exception-path
// interfaces only, multipath as several hops, blackholes as drops, the
// kernel's own (local, connected) left out.
func TestRouteChange(t *testing.T) {
	ports := map[int]string{7: "up0", 8: "up1"}
	_, dst, _ := net.ParseCIDR("10.99.0.0/16")
	gw0, gw1 := net.ParseIP("192.168.0.2"), net.ParseIP("192.168.1.2")
	for _, c := range []struct {
		name string
		r    netlink.Route
		gone bool
		want RouteChange
		ok   bool
	}{
		{"via a TAP", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Dst: dst, Gw: gw0, LinkIndex: 7}, false,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Hops: []Hop{{"up0", netip.MustParseAddr("192.168.0.2"), 1}}}, true},
		{"default", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Family: unix.AF_INET, Gw: gw1, LinkIndex: 8}, false,
			RouteChange{Prefix: netip.MustParsePrefix("0.0.0.0/0"), Hops: []Hop{{"up1", netip.MustParseAddr("192.168.1.2"), 1}}}, true},
		{"multipath", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Dst: dst, MultiPath: []*netlink.NexthopInfo{
			{LinkIndex: 7, Gw: gw0, Hops: 0}, {LinkIndex: 8, Gw: gw1, Hops: 2}}}, false,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Hops: []Hop{
				{"up0", netip.MustParseAddr("192.168.0.2"), 1}, {"up1", netip.MustParseAddr("192.168.1.2"), 3}}}, true},
		{"withdrawn", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Dst: dst, Gw: gw0, LinkIndex: 7}, true,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Hops: []Hop{{"up0", netip.MustParseAddr("192.168.0.2"), 1}}, Gone: true}, true},
		{"blackhole", netlink.Route{Table: 254, Type: unix.RTN_BLACKHOLE, Dst: dst}, false,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Blackhole: true}, true},
		{"another interface", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Dst: dst, Gw: gw0, LinkIndex: 3}, false,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Gone: true}, true},
		{"connected", netlink.Route{Table: 254, Type: unix.RTN_UNICAST, Dst: dst, LinkIndex: 7}, false,
			RouteChange{Prefix: netip.MustParsePrefix("10.99.0.0/16"), Gone: true}, true},
		{"another table", netlink.Route{Table: 100, Type: unix.RTN_UNICAST, Dst: dst, Gw: gw0, LinkIndex: 7}, false, RouteChange{}, false},
		{"local", netlink.Route{Table: 254, Type: unix.RTN_LOCAL, Dst: dst, LinkIndex: 7}, false, RouteChange{}, false},
	} {
		got, ok := routeChange(c.r, c.gone, 254, ports)
		if ok != c.ok || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v %v, want %+v %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
