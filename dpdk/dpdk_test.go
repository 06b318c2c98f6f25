package dpdk

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests share one EAL (it initialises once per process) on virtual
// devices, without hugepages.
func TestMain(m *testing.M) {
	prefix := fmt.Sprintf("rf-dpdk-test-%d", os.Getpid())
	args := []string{"--no-huge", "-m", "256", "--no-pci", "--no-shconf",
		"--file-prefix", prefix, "-l", "0-1", "--log-level", "*:error"}
	if err := Init(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir := RuntimeDir()
	code := m.Run()
	if err := Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	// EAL leaves its runtime directory (and the telemetry socket in it)
	// behind; this one is the test binary's own.
	if filepath.Base(dir) == prefix {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	} else {
		fmt.Fprintf(os.Stderr, "EAL runtime directory %q is not named after the file prefix %q\n", dir, prefix)
		code = 1
	}
	os.Exit(code)
}

// ringPort brings up a net_ring port: what it transmits it receives back.
func ringPort(t *testing.T, name string, pool *Mempool) Port {
	t.Helper()
	p, err := ProbeDevice(name)
	if err != nil {
		t.Fatal(err)
	}
	setupQueues(t, p, pool)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

func TestLcores(t *testing.T) {
	if MainLcore() != 0 {
		t.Errorf("main lcore %d, want 0", MainLcore())
	}
	if w := WorkerLcores(); len(w) != 1 || w[0] != 1 {
		t.Errorf("workers %v, want [1]", w)
	}
	done := make(chan int, 1)
	if err := Launch(1, func() { done <- 1 }); err != nil {
		t.Fatal(err)
	}
	Wait(1)
	if len(done) != 1 {
		t.Fatal("worker function did not run")
	}
	if err := Launch(0, func() {}); err == nil {
		t.Error("launch on the main lcore succeeded")
	}
}

func TestStepLoopback(t *testing.T) {
	pool, err := NewPktmbufPool("t_loop", 1023, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	p := ringPort(t, "net_ring_t0", pool)
	step, err := NewStep(32, 1, -1, []Queue{{Port: uint16(p)}}, []Queue{{Port: uint16(p)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer step.Free()

	frames := [][]byte{bytes.Repeat([]byte{1}, 60), bytes.Repeat([]byte{2}, 1000), bytes.Repeat([]byte{3}, 64)}
	for _, f := range frames {
		m := pool.Alloc()
		if m == nil {
			t.Fatal("pool empty")
		}
		if err := m.SetData(f); err != nil {
			t.Fatal(err)
		}
		step.Txq[0].Push(m)
	}
	if n := step.Run(); n != 3 || len(step.Rx(0)) != 3 {
		t.Fatalf("received %d packets, want 3 (ring loops back what was sent in the same step)", n)
	} else {
		for i, m := range step.Rx(0) {
			if !bytes.Equal(m.Data(), frames[i]) || m.PktLen() != len(frames[i]) || m.NbSegs() != 1 {
				t.Errorf("packet %d differs", i)
			}
			step.Drop(m)
		}
	}
	if got := step.Txq[0].Sent(); got != 3 {
		t.Errorf("sent %d, want 3", got)
	}
	if n := step.Run(); n != 0 {
		t.Errorf("received %d, want 0", n)
	}
	if pool.InUse() != 0 {
		t.Errorf("%d mbufs still in use", pool.InUse())
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TxPackets != 3 || st.RxPackets != 3 {
		t.Errorf("stats %+v", st)
	}
	if _, err := p.XStats(); err != nil {
		t.Error(err)
	}
	info, err := p.Info()
	if err != nil || info.Driver != "net_ring" {
		t.Errorf("info %+v %v", info, err)
	}
}

func TestStepAllocs(t *testing.T) {
	pool, err := NewPktmbufPool("t_alloc", 1023, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	p := ringPort(t, "net_ring_t1", pool)
	step, err := NewStep(32, 1, -1, []Queue{{Port: uint16(p)}}, []Queue{{Port: uint16(p)}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer step.Free()
	for i := 0; i < 8; i++ {
		m := pool.Alloc()
		_ = m.SetData(make([]byte, 64))
		step.Txq[0].Push(m)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		step.Run()
		for _, m := range step.Rx(0) {
			step.Txq[0].Push(m)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per step", allocs)
	}
	step.Run()
	for _, m := range step.Rx(0) {
		step.Drop(m)
	}
	step.Flush()
	if pool.InUse() != 0 {
		t.Errorf("%d mbufs still in use", pool.InUse())
	}
}

func TestBadDevice(t *testing.T) {
	_, err := ProbeDevice("net_nosuchpmd0,x=1")
	if err == nil {
		t.Fatal("probing a nonexistent driver succeeded")
	}
	t.Log(err)
}

// A pool on a stack driver hands out the mbuf freed last first, and one
// on a ring its oldest: with no per-lcore cache between, the order is the
// driver's. No driver named is DPDK's best for the platform. An unknown
// driver is an error that names it.
func TestMempoolDrivers(t *testing.T) {
	for _, c := range []struct {
		ops, want string
		lifo      bool
	}{
		{"", BestMempoolOps(), false},
		{"ring_mp_mc", "ring_mp_mc", false},
		{"stack", "stack", true},
		{"lf_stack", "lf_stack", true},
	} {
		pool, err := NewPktmbufPool("t_ops_"+c.want, 63, 0, 2176, -1, c.ops)
		if err != nil {
			t.Fatalf("driver %q: %v", c.ops, err)
		}
		if got := pool.Ops(); got != c.want {
			t.Errorf("driver %q: pool on %q", c.ops, got)
		}
		a, b := pool.Alloc(), pool.Alloc()
		FreeMbufs([]*Mbuf{a})
		FreeMbufs([]*Mbuf{b})
		got := pool.Alloc()
		if lifo := got == b; lifo != c.lifo {
			t.Errorf("driver %q: the mbuf freed last came back first: %v, want %v", c.ops, lifo, c.lifo)
		}
		FreeMbufs([]*Mbuf{got})
		if pool.InUse() != 0 {
			t.Errorf("driver %q: %d mbufs in use", c.ops, pool.InUse())
		}
		pool.Free()
	}
	_, err := NewPktmbufPool("t_ops_none", 63, 0, 2176, -1, "no_such_driver")
	if err == nil || !strings.Contains(err.Error(), "no_such_driver") {
		t.Errorf("an unknown driver: %v", err)
	}
}
