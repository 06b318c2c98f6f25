package pipeline

import (
	"path/filepath"
	"testing"

	"roce-fwd/dpdk"
	"roce-fwd/internal/testenv"
)

func portStats(t *testing.T, p dpdk.Port) dpdk.Stats {
	t.Helper()
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// With every mbuf of the pool taken, the rx port counts rx_nombuf and
// nothing is forwarded; once the mbufs come back forwarding resumes, every
// frame of the capture is either forwarded or counted as rx_nombuf, and
// no mbuf is left out of its pool.
func TestFaultMempoolExhaustion(t *testing.T) {
	// net_pcap reads one frame per poll while no mbuf is free, counting
	// it in rx_nombuf: 20000 frames ran out in a few milliseconds, before
	// a test on a loaded machine gave the mbufs back. 200000 take tens.
	const frames = 200000
	in := filepath.Join(t.TempDir(), "in.pcap")
	testenv.WritePcap(t, in, testenv.Frames(frames))
	// No per-lcore cache: the worker cannot live off mbufs the test cannot
	// take from the pool.
	cfg, set := openPortsWith(t, "io", "[mempool]\nmbufs = 8191\ncache = 0\n",
		"net_pcap%d,rx_pcap="+in, "net_null%d,no-rx=1")
	p := newPipeline(t, cfg, set)
	pool := set.Ports[0].Pool
	var held []*dpdk.Mbuf
	for m := pool.Alloc(); m != nil; m = pool.Alloc() {
		held = append(held, m)
	}
	if len(held) == 0 || pool.Avail() != 0 {
		t.Fatalf("took %d mbufs, %d still free", len(held), pool.Avail())
	}
	if err := set.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	rx, tx := set.Ports[0].ID, set.Ports[1].ID
	waitFor(t, "rx_nombuf to rise", func() bool { return portStats(t, rx).RxNoMbuf >= 100 })
	if st := portStats(t, tx); st.TxPackets != 0 {
		t.Errorf("%d packets forwarded with no mbuf free", st.TxPackets)
	}

	dpdk.FreeMbufs(held)
	waitFor(t, "the capture to be read to its end", func() bool {
		st := portStats(t, rx)
		return st.RxPackets+st.RxNoMbuf >= frames
	})
	waitFor(t, "the received frames to be forwarded", func() bool {
		return portStats(t, tx).TxPackets == portStats(t, rx).RxPackets
	})
	p.Stop()
	if err := set.Stop(); err != nil {
		t.Fatal(err)
	}
	rs, ts := portStats(t, rx), portStats(t, tx)
	t.Logf("%d frames: %d forwarded, %d lost to rx_nombuf", frames, ts.TxPackets, rs.RxNoMbuf)
	if rs.RxPackets == 0 || ts.TxPackets != rs.RxPackets || rs.RxPackets+rs.RxNoMbuf != frames {
		t.Errorf("rx %d + rx_nombuf %d, tx %d: want rx + rx_nombuf = %d frames and tx = rx", rs.RxPackets, rs.RxNoMbuf, ts.TxPackets, frames)
	}
	checkAccounting(t, p)
	p.Free()
	if n := pool.InUse(); n != 0 {
		t.Errorf("%d mbufs still out of the pool", n)
	}
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
}

// A tx ring nobody reads (a net_ring port whose rx side is not polled)
// fills: what does not fit is dropped as tx_full, the worker's other
// port pair goes on forwarding, and once the ring is read again the port
// takes packets again. Every packet is accounted for.
func TestFaultTxQueueStaysFull(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in.pcap")
	testenv.WritePcap(t, in, testenv.Frames(64))
	cfg, set := openPorts(t, "io", "net_pcap%d,rx_pcap="+in+",infinite_rx=1", "net_ring%d",
		"net_pcap%d,rx_pcap="+in+",infinite_rx=1", "net_null%d,no-rx=1")
	full, sink := set.Ports[1], set.Ports[3]
	p := newPipeline(t, cfg, set, func(s *Spec) {
		s.Workers[0].Rx = []RxSpec{
			{Port: uint16(set.Ports[0].ID), Queue: 0, To: uint16(full.ID)},
			{Port: uint16(set.Ports[2].ID), Queue: 0, To: uint16(sink.ID)},
		}
	})
	if err := set.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "tx_full drops", func() bool { return p.Drops()["tx_full"] > 10000 })
	stuck := portStats(t, full.ID).TxPackets
	s0 := portStats(t, sink.ID).TxPackets
	waitFor(t, "the other pair to forward while the ring is full", func() bool {
		return portStats(t, sink.ID).TxPackets > s0+100000
	})
	if got := portStats(t, full.ID).TxPackets; got != stuck {
		t.Errorf("the full ring took %d more packets with nobody reading it", got-stuck)
	}

	// Read the ring, as its consumer coming back would.
	reader, err := dpdk.NewStep(32, 1, full.Socket, []dpdk.Queue{{Port: uint16(full.ID)}}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Free()
	drain := func() int {
		n := reader.Run()
		for _, m := range reader.Rx(0) {
			reader.Drop(m)
		}
		reader.Flush()
		return n
	}
	waitFor(t, "the drained ring to take packets again", func() bool {
		drain()
		return portStats(t, full.ID).TxPackets > stuck+100000
	})
	p.Stop()
	for drain() != 0 {
	}
	if err := set.Stop(); err != nil {
		t.Fatal(err)
	}
	checkAccounting(t, p)
	t.Logf("tx_full %d; ring port took %d, sink %d", p.Drops()["tx_full"], portStats(t, full.ID).TxPackets, portStats(t, sink.ID).TxPackets)
	p.Free()
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
}
