package pipeline

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/internal/testenv"
	"roce-fwd/ports"
	"roce-fwd/roce"
)

func TestMain(m *testing.M) { testenv.Main(m, "pipeline") }

var devSeq int

// openPorts brings up ports from TOML [[port]] tables (vdev names get a
// unique suffix: a closed vdev cannot be probed again in one process).
func openPorts(t testing.TB, mode string, vdevs ...string) (*config.Config, *ports.Set) {
	t.Helper()
	return openPortsWith(t, mode, "", vdevs...)
}

// openPortsWith is openPorts with extra TOML tables (a [mempool]).
func openPortsWith(t testing.TB, mode, extra string, vdevs ...string) (*config.Config, *ports.Set) {
	t.Helper()
	src := fmt.Sprintf("[eal]\nargs = [%s]\n[pipeline]\nmode = %q\n%s\n", quoteAll(testenv.EALArgs("pipeline")), mode, extra)
	for i, v := range vdevs {
		devSeq++
		src += fmt.Sprintf("[[port]]\nname = \"p%d\"\nvdev = %q\n", i, fmt.Sprintf(v, devSeq))
	}
	src += "[[forward]]\nfrom = \"p0\"\nto = \"p" + fmt.Sprint(len(vdevs)-1) + "\"\n"
	cfg, err := config.Parse("test.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	set, err := ports.Open(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, set
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

func newPipeline(t testing.TB, cfg *config.Config, set *ports.Set, tune ...func(*Spec)) *Pipeline {
	t.Helper()
	mode, err := ParseMode(cfg.Pipeline.Mode)
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Mode: mode, Burst: cfg.Pipeline.Burst, TxRetries: 8, Ports: map[uint16]PortSpec{},
		RoCE: RoCESpec{TCMap: roce.DefaultTCMap(), VerifyICRC: true, DropBadICRC: true, QPTable: 1024}}
	for _, p := range set.Ports {
		spec.Ports[uint16(p.ID)] = PortSpec{Name: p.Name, TxQueues: p.Cfg.TxQueues, MAC: p.MAC, PeerMAC: p.PeerMAC}
	}
	from := set.Ports[0]
	to := set.Ports[len(set.Ports)-1]
	spec.Workers = []WorkerSpec{{Lcore: dpdk.WorkerLcores()[0], Socket: from.Socket,
		Rx: []RxSpec{{Port: uint16(from.ID), Queue: 0, To: uint16(to.ID)}}}}
	for _, f := range tune {
		f(&spec)
	}
	if spec.QoS != nil && spec.QoS.Pools == nil {
		spec.QoS.Pools = set.Pools
	}
	p, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPackets waits until the workers have handled n packets.
func waitPackets(t *testing.T, p *Pipeline, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got uint64
		for _, s := range p.Stats() {
			got += s.Packets
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workers handled %d packets, want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkAccounting asserts that every packet a worker received was either
// accepted by a PMD, counted under a drop reason, or is still queued.
func checkAccounting(t *testing.T, p *Pipeline) {
	t.Helper()
	qc := p.QoSCounters()
	in, out, dropped := qc.Generated, uint64(0), qc.Queued
	for _, w := range p.Workers {
		s := w.Stats()
		in += s.Packets
		for _, d := range s.Drops {
			dropped += d
		}
		for _, q := range w.TxQueues() {
			out += q.Sent
		}
	}
	if in != out+dropped {
		t.Errorf("received %d (and generated), sent %d, dropped or queued %d: %d packets unaccounted for", in, out, dropped, in-out-dropped)
	}
}

// pcapRun is a pipeline that forwarded a pcap file between two net_pcap
// ports and has stopped; finish closes it and returns what came out.
type pcapRun struct {
	p    *Pipeline
	set  *ports.Set
	in   string
	out  string
	back string // what the pipeline sent out of the input port (PFC frames)
	// setup, when set, runs on the built pipeline before it starts.
	setup func(*Pipeline, *ports.Set)
}

// forwardPcap runs frames through the pipeline in mode from a pcap rx port
// to a pcap tx port, until the workers have handled them all.
func forwardPcap(t *testing.T, mode string, frames [][]byte, tune ...func(*Spec)) *pcapRun {
	t.Helper()
	dir := t.TempDir()
	r := &pcapRun{in: filepath.Join(dir, "in.pcap"), out: filepath.Join(dir, "out.pcap"), back: filepath.Join(dir, "back.pcap")}
	return r.run(t, mode, frames, tune, "net_pcap%d,rx_pcap="+r.in+",tx_pcap="+r.back, "net_pcap%d,tx_pcap="+r.out)
}

// forwardLoop is forwardPcap through a single port that sends back out of
// itself what it receives.
func forwardLoop(t *testing.T, frames [][]byte, tune ...func(*Spec)) *pcapRun {
	t.Helper()
	dir := t.TempDir()
	r := &pcapRun{in: filepath.Join(dir, "in.pcap"), out: filepath.Join(dir, "out.pcap")}
	r.back = r.out
	return r.run(t, "roce", frames, tune, "net_pcap%d,rx_pcap="+r.in+",tx_pcap="+r.out)
}

func (r *pcapRun) run(t *testing.T, mode string, frames [][]byte, tune []func(*Spec), vdevs ...string) *pcapRun {
	t.Helper()
	testenv.WritePcap(t, r.in, frames)
	var cfg *config.Config
	cfg, r.set = openPorts(t, mode, vdevs...)
	r.p = newPipeline(t, cfg, r.set, tune...)
	if r.setup != nil {
		r.setup(r.p, r.set)
	}
	if err := r.p.Start(); err != nil {
		t.Fatal(err)
	}
	waitPackets(t, r.p, uint64(len(frames)))
	r.p.Stop()
	checkAccounting(t, r.p)
	return r
}

func (r *pcapRun) finish(t *testing.T) [][]byte {
	t.Helper()
	r.p.Free()
	if err := r.set.Close(); err != nil { // closing flushes the pcap writer
		t.Fatal(err)
	}
	return testenv.ReadPcap(t, r.out)
}

func TestIOForwardsEveryFrameUnchanged(t *testing.T) {
	frames := testenv.Frames(500)
	run := forwardPcap(t, "io", frames)
	if d := run.p.Drops(); d["tx_full"] != 0 {
		t.Errorf("drops %v", d)
	}
	got := run.finish(t)
	if len(got) != len(frames) {
		t.Fatalf("%d frames out, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d differs:\n got %x\nwant %x", i, got[i], frames[i])
		}
	}
}

func TestMACRewritesAddresses(t *testing.T) {
	frames := testenv.Frames(300)
	run := forwardPcap(t, "mac", frames)
	outPort := run.set.Ports[1]
	wantHdr := append(append([]byte(nil), outPort.PeerMAC...), outPort.MAC...)
	if got := outPort.PeerMAC.String(); got != "02:00:00:00:00:01" {
		t.Errorf("default peer MAC %s, want testpmd's 02:00:00:00:00:01", got)
	}
	got := run.finish(t)
	if len(got) != len(frames) {
		t.Fatalf("%d frames out, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i][:12], wantHdr) {
			t.Fatalf("frame %d: MACs %x, want %x", i, got[i][:12], wantHdr)
		}
		if !bytes.Equal(got[i][12:], frames[i][12:]) {
			t.Fatalf("frame %d: bytes after the MACs changed", i)
		}
	}
}

func TestRuntsAreCountedNotForwarded(t *testing.T) {
	run := forwardPcap(t, "mac", [][]byte{make([]byte, 60), make([]byte, 10), make([]byte, 60)})
	if d := run.p.Drops(); d["runt"] != 1 {
		t.Errorf("runt drops %d, want 1 (%v)", d["runt"], d)
	}
	if got := run.finish(t); len(got) != 2 {
		t.Errorf("%d frames out, want 2", len(got))
	}
}

func TestStopRestartAndNoMbufLeak(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	testenv.WritePcap(t, in, testenv.Frames(64))
	cfg, set := openPorts(t, "io", "net_pcap%d,rx_pcap="+in+",infinite_rx=1", "net_null%d,no-rx=1")
	p := newPipeline(t, cfg, set)
	const stopped = 60 * time.Millisecond
	var running time.Duration // from each Start to its Stop
	for round := 1; round <= 3; round++ {
		if round > 1 {
			time.Sleep(stopped) // not a gap between polls: the worker was stopped
		}
		if err := set.Start(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		waitPackets(t, p, uint64(round)*100000)
		p.Stop()
		running += time.Since(began)
		if err := set.Stop(); err != nil {
			t.Fatal(err)
		}
		checkAccounting(t, p)
	}
	st, err := set.Ports[1].ID.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var handled uint64
	for _, s := range p.Stats() {
		handled += s.Packets
	}
	if st.TxPackets != handled {
		t.Errorf("sink port counted %d packets, workers handled %d", st.TxPackets, handled)
	}
	for _, s := range p.Stats() {
		if s.MaxPollGap >= stopped {
			t.Errorf("lcore %d: longest gap between polls %v: the %v it was stopped counted", s.Lcore, s.MaxPollGap, stopped)
		}
		// Busy cycles are of polls that carried packets: none while stopped.
		if busy := time.Duration(float64(s.BusyCycles) / float64(dpdk.TSCHz()) * 1e9); busy > running {
			t.Errorf("lcore %d: busy for %v, but it ran for %v", s.Lcore, busy, running)
		}
	}
	p.Free()
	// Close fails when any mbuf is not back in its pool.
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
}

// The per-burst step must not allocate: a ring port forwards to itself
// with packets circulating.
func TestPollDoesNotAllocate(t *testing.T) {
	for _, mode := range []string{"io", "mac"} {
		t.Run(mode, func(t *testing.T) {
			cfg, set := openPorts(t, mode, "net_ring%d")
			p := newPipeline(t, cfg, set)
			w := primeRing(t, p, set)
			allocs := testing.AllocsPerRun(2000, func() { w.Poll() })
			if allocs != 0 {
				t.Errorf("%v allocations per poll", allocs)
			}
			if s := w.Stats(); s.Packets < 2000*32 {
				t.Errorf("only %d packets circulated", s.Packets)
			}
			closeRing(t, p, set)
		})
	}
}

// A poll that starts long after the one before is a stall, counted under
// every bound the gap passes, and the longest gap is kept.
func TestPollGapsAreStalls(t *testing.T) {
	cfg, set := openPorts(t, "io", "net_ring%d")
	p := newPipeline(t, cfg, set)
	w := primeRing(t, p, set)
	for range 10 {
		w.Poll()
	}
	before := w.Stats()
	time.Sleep(3 * time.Millisecond)
	w.Poll()
	s := w.Stats().Sub(before)
	for i, want := range []uint64{1, 1, 1} { // over 50us, 200us, 1ms
		if s.Stalls[i] < want {
			t.Errorf("a 3 ms gap: %d stalls over %v, want %d at least", s.Stalls[i], StallBounds[i], want)
		}
	}
	if s.MaxPollGap < 3*time.Millisecond {
		t.Errorf("longest gap %v after a 3 ms sleep", s.MaxPollGap)
	}
	time.Sleep(12 * time.Millisecond)
	w.Poll()
	s = w.Stats()
	if s.Stalls[3] < 1 || s.MaxPollGap < 12*time.Millisecond {
		t.Errorf("a 12 ms gap: %d stalls over 10ms, longest gap %v", s.Stalls[3], s.MaxPollGap)
	}
	for i := 1; i < NumStallBounds; i++ {
		if s.Stalls[i] > s.Stalls[i-1] {
			t.Errorf("stalls over %v (%d) are more than over %v (%d): the counts are cumulative", StallBounds[i], s.Stalls[i], StallBounds[i-1], s.Stalls[i-1])
		}
	}
	if got := StallBoundLabel(0) + " " + StallBoundLabel(2); got != "50us 1ms" {
		t.Errorf("labels %q", got)
	}
	closeRing(t, p, set)
}

// primeRing puts 32 packets in flight through a ring port that forwards
// to itself, and returns its worker.
func primeRing(t testing.TB, p *Pipeline, set *ports.Set) *Worker {
	t.Helper()
	w := p.Workers[0]
	for _, f := range testenv.Frames(32) {
		sendFrame(t, w, set, f)
	}
	w.Poll() // sends the primed packets; the ring returns them
	return w
}

// sendFrame queues frame f on w's first tx queue (its net_ring port,
// which the next Poll sends and receives back) and returns its mbuf.
func sendFrame(t testing.TB, w *Worker, set *ports.Set, f []byte) *dpdk.Mbuf {
	t.Helper()
	m := set.Ports[0].Pool.Alloc()
	if err := m.SetData(f); err != nil {
		t.Fatal(err)
	}
	w.step.Txq[0].Push(m)
	return m
}

// closeRing drains a primed ring so every mbuf returns to its pool, then
// closes the ports (which fails on a leaked mbuf).
func closeRing(t testing.TB, p *Pipeline, set *ports.Set) {
	t.Helper()
	p.Stop()
	drainRing(p.Workers[0])
	p.Free()
	if err := set.Close(); err != nil {
		t.Fatal(err)
	}
}

// drainRing sends what worker w has queued and frees every packet its
// looped ring port returns, until none does.
func drainRing(w *Worker) {
	w.step.Flush()
	for w.step.Run() != 0 {
		for _, m := range w.step.Rx(0) {
			w.step.Drop(m)
		}
	}
	w.step.Flush()
}

func TestHistBucket(t *testing.T) {
	cases := map[int]int{0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 31: 5, 32: 6, 63: 6, 255: 8, 256: 9, 512: 9, 4096: 9}
	for n, want := range cases {
		if got := histBucket(n); got != want {
			t.Errorf("histBucket(%d) = %d, want %d", n, got, want)
		}
	}
	if HistBucketLabel(6) != "32-63" || HistBucketLabel(9) != "256+" {
		t.Errorf("labels %s %s", HistBucketLabel(6), HistBucketLabel(9))
	}
}

// PFC and PAUSE frames are for the port's MAC: consumed and counted in
// every mode, never forwarded. Other untagged 0x8808 frames (another
// opcode, or too short) are not forwarded either, and counted apart.
func TestMACControlConsumedInEveryMode(t *testing.T) {
	pfc := make([]byte, 60)
	if _, err := roce.BuildPFC(pfc, roce.MAC{2, 0, 0, 0, 0, 1}, 1<<3, [8]uint16{3: 100}); err != nil {
		t.Fatal(err)
	}
	pause := make([]byte, 60)
	if _, err := roce.BuildPause(pause, roce.MAC{2, 0, 0, 0, 0, 1}, 100); err != nil {
		t.Fatal(err)
	}
	// MAC control frames are never VLAN-tagged: a tagged 0x8808 frame is
	// forwarded like any other, in every mode.
	tagged := append(append(append([]byte{}, pause[:12]...), 0x81, 0x00, 0x00, 0x03), pause[12:]...)
	other := append([]byte{}, pause...)
	other[14], other[15] = 0x00, 0x02 // opcode 2 (GATE, EPON): neither PAUSE nor PFC
	short := append([]byte{}, pause[:15]...)
	for _, mode := range []string{"io", "mac", "roce"} {
		t.Run(mode, func(t *testing.T) {
			frames := testenv.Frames(20)
			frames = append(frames[:10:10], append([][]byte{pfc, pause, tagged, other, short}, frames[10:]...)...)
			run := forwardPcap(t, mode, frames)
			if d := run.p.Drops(); d["mac_control"] != 2 || d["mac_control_other"] != 2 {
				t.Errorf("mac_control drops %d, want 2; mac_control_other %d, want 2 (%v)", d["mac_control"], d["mac_control_other"], d)
			}
			if got := run.finish(t); len(got) != 21 {
				t.Errorf("%d frames out, want the 20 that are not flow control and the tagged 0x8808 one", len(got))
			}
		})
	}
}

// The README's table of drop reasons is the table the code counts with.
func TestReadmeListsEveryDropReason(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "| `") && strings.Count(line, "|") == 4 {
			if _, ok := ReasonNamed(strings.Trim(strings.Split(line, "|")[1], " `")); ok {
				rows++
			}
		}
	}
	for r, info := range Reasons {
		row := fmt.Sprintf("| `%s` | %s | %s |", info.Name, info.Stage, info.Help)
		if !strings.Contains(string(readme), row) {
			t.Errorf("README lacks the row of %v: %s", Reason(r), row)
		}
	}
	if rows != int(NumReasons) {
		t.Errorf("README has %d drop reason rows, the code %d", rows, NumReasons)
	}
}
