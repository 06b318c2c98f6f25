package fib_test

import (
	"fmt"
	"net/netip"

	"roce-fwd/fib"
)

func Example() {
	tab := fib.New(fib.Config{FirstBits: 16, Groups: 64}, fib.V4)
	tab.Add(netip.MustParsePrefix("0.0.0.0/0"), 1)
	tab.Add(netip.MustParsePrefix("10.0.0.0/8"), 2)
	tab.Add(netip.MustParsePrefix("10.1.2.0/25"), 3) // longer than 16 bits: uses groups

	// The data path: a burst of big-endian addresses.
	addrs := []uint32{0x0a010203, 0x0a0102ff, 0x0b000001}
	nh := make([]uint32, len(addrs))
	tab.LookupBatch4(addrs, nh, nil)
	fmt.Println(nh)

	p, hop, _ := tab.Covering(netip.MustParseAddr("10.1.2.3"))
	fmt.Println(p, hop)

	// Deleting the /25 folds its groups; they are reused only after
	// Reclaim, which the caller makes once every worker has passed a
	// quiescent point.
	tab.Delete(netip.MustParsePrefix("10.1.2.0/25"))
	fmt.Printf("%+v\n", tab.Stats())
	tab.Reclaim()
	fmt.Printf("%+v\n", tab.Stats())
	// Output:
	// [3 2 1]
	// 10.1.2.0/25 3
	// {Routes:2 GroupsUsed:0 GroupsFree:62 GroupsPending:2 Bytes:327680}
	// {Routes:2 GroupsUsed:0 GroupsFree:64 GroupsPending:0 Bytes:327680}
}

func ExampleFootprint() {
	for _, c := range []fib.Config{
		{}, // FirstBits 24, 65536 groups: a full IPv4 table
		{FirstBits: 24, Groups: 1 << 19},
		{FirstBits: 16, Groups: 4096},
	} {
		fmt.Printf("%+v: %d MiB\n", c, fib.Footprint(c)>>20)
	}
	// Output:
	// {FirstBits:0 Groups:0}: 128 MiB
	// {FirstBits:24 Groups:524288}: 576 MiB
	// {FirstBits:16 Groups:4096}: 4 MiB
}
