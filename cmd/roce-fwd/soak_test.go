package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"roce-fwd/demotraffic"
)

// soakSample is one reading of the soaking daemon.
type soakSample struct {
	at         time.Duration
	rssKiB     uint64 // the whole process
	ownKiB     uint64 // outside DPDK's memory: what the Go and C heaps, stacks and code hold
	dpdkAlloc  uint64 // bytes allocated from DPDK's heap (rte_malloc) on socket 0
	goroutines float64
	gcCount    float64
	gcMaxPause float64 // seconds: the longest of the recent GC pauses
	packets    uint64  // received on port "in" so far
}

// TestSoak runs the daemon for ROCE_FWD_SOAK (a duration, e.g. 30m; make
// soak sets it) in roce mode with QoS shaping and flow rules, the console
// and Prometheus exercised at every sample. It fails when the resident
// memory grows after warm-up (a tenth of the run, 3 minutes at least, and
// at least three garbage collections: the daemon's memory climbs for its
// first 2-4 minutes, and the Go heap's size is steady only after a few
// cycles of the collector's pacing) by more than 5% (soakGrowth),
// when forwarding stops, or when a packet is not accounted for at exit.
//
// DPDK's memory is measured apart: without hugepages its pages count in
// the RSS from their first touch, and mbufs cycling through a mempool's
// ring touch all of them over minutes, which is not a leak (on hugepages,
// as in production, they are faulted in at start). What is checked there
// is the DPDK heap's allocated bytes, from EAL's telemetry: a leak of
// rte_malloc memory shows in them.
func TestSoak(t *testing.T) {
	env := os.Getenv("ROCE_FWD_SOAK")
	if env == "" {
		t.Skip("ROCE_FWD_SOAK is not set (make soak runs this for 30 minutes)")
	}
	dur, err := time.ParseDuration(env)
	if err != nil || dur < 6*time.Minute {
		t.Fatalf("ROCE_FWD_SOAK=%q: want a duration of 6 minutes or more (twice the warm-up)", env)
	}
	warm := max(dur/10, 3*time.Minute)
	every := 10 * time.Second

	dir := t.TempDir()
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	statsPath := filepath.Join(dir, "stats.json")
	r := &daemonRig{t: t, sock: filepath.Join(dir, "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"),
		prefix: fmt.Sprintf("rf-con-%d-soak", os.Getpid()), stderr: &syncBuffer{}}
	r.writeConfig(rigConfig(r.prefix, pcap, r.sock, "127.0.0.1:0", `
[[qos.port]]
name = "out"
rate = "500Mbps"
  [[qos.port.tc]]
  tc = 3
  ecn = { min = "50KB", max = "500KB", probability = 0.2 }
[[offload.rule]]
port = "in"
preset = "mark-roce"
mark = 0x52
[[offload.rule]]
port = "in"
preset = "dscp-count"
dscp = [0, 26, 48]
[[offload.rule]]
port = "in"
preset = "drop"
dst = "2001:db8::/32"
`))
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath, "--stats-json", statsPath)
	// The collector paced by GOGC alone, without the daemon's floor
	// (internal/gcfloor): the heap then follows its live size within
	// seconds, and a leak shows in the memory's floors. With the floor, a
	// sample every 10 s makes too little garbage to reach it in the run's
	// first half: the memory would climb all along, leak or not.
	if os.Getenv("GOGC") == "" {
		r.cmd.Env = append(os.Environ(), "GOGC=100")
	}
	r.launch()
	url := r.metricsURL()
	pid := r.cmd.Process.Pid

	var samples []soakSample
	var warmMaps, lastMaps map[string]uint64
	start := time.Now()
	for time.Since(start) < dur {
		time.Sleep(every)
		s := soakSample{at: time.Since(start).Round(time.Second)}
		s.rssKiB, s.ownKiB = rssKiB(t, pid)
		s.dpdkAlloc = dpdkHeapAlloc(t, r.prefix)
		fams := scrapeMetrics(t, url)
		if f := fams["go_goroutines"]; f != nil {
			s.goroutines = f.Metric[0].GetGauge().GetValue()
		}
		if f := fams["go_gc_duration_seconds"]; f != nil {
			sum := f.Metric[0].GetSummary()
			s.gcCount = float64(sum.GetSampleCount())
			for _, q := range sum.GetQuantile() {
				if q.GetQuantile() == 1 {
					s.gcMaxPause = q.GetValue()
				}
			}
		}
		if s.at >= warm && s.gcCount >= 3 && warmMaps == nil {
			warmMaps = mappings(t, pid)
		}
		lastMaps = mappings(t, pid)
		fwd := r.fwd() // the console, once a sample
		s.packets = fwd.Ports[0].RxPackets
		if n := len(samples); n > 0 && s.packets <= samples[n-1].packets {
			t.Fatalf("at %v: forwarding stopped (%d packets, %d before)", s.at, s.packets, samples[n-1].packets)
		}
		samples = append(samples, s)
		t.Logf("%8v rss %7d KiB (%6d KiB outside DPDK memory)  DPDK heap %9d B  goroutines %3.0f  GCs %5.0f  max recent GC pause %6.3f ms  rx %d",
			s.at, s.rssKiB, s.ownKiB, s.dpdkAlloc, s.goroutines, s.gcCount, s.gcMaxPause*1e3, s.packets)
	}
	r.stop()

	// Memory: nothing may grow once warm.
	i := slices.IndexFunc(samples, func(s soakSample) bool { return s.at >= warm && s.gcCount >= 3 })
	if i < 0 || i == len(samples)-1 {
		t.Fatalf("the run ended before the warm-up did (%v and three collections): make it longer", warm)
	}
	w := samples[i]
	peak := slices.MaxFunc(samples[i:], func(a, b soakSample) int { return cmp.Compare(a.ownKiB, b.ownKiB) })
	heapPeak := slices.MaxFunc(samples[i:], func(a, b soakSample) int { return cmp.Compare(a.dpdkAlloc, b.dpdkAlloc) })
	last := samples[len(samples)-1]
	pause := slices.MaxFunc(samples, func(a, b soakSample) int { return cmp.Compare(a.gcMaxPause, b.gcMaxPause) })
	early, late, growth := soakGrowth(samples[i:])
	t.Logf("soak %v, warm at %v: RSS outside DPDK memory %d KiB, peak %d KiB at %v, %d KiB at the end; its floor %d KiB (at %v) in the first half after warm-up, %d KiB (at %v) in the second (%+.2f%%); whole RSS %d -> %d KiB; DPDK heap %d -> peak %d B; goroutines %.0f -> %.0f; %.0f GCs, longest pause %.3f ms; %d packets",
		dur, w.at, w.ownKiB, peak.ownKiB, peak.at, last.ownKiB, early.ownKiB, early.at, late.ownKiB, late.at, growth*100, w.rssKiB, last.rssKiB, w.dpdkAlloc, heapPeak.dpdkAlloc,
		w.goroutines, last.goroutines, last.gcCount, pause.gcMaxPause*1e3, last.packets)
	t.Logf("mappings that grew after warm-up:")
	logGrowth(t, warmMaps, lastMaps)
	if growth > 0.05 {
		t.Errorf("RSS outside DPDK memory grew %.1f%% after warm-up (its floor from %d KiB at %v to %d KiB at %v): more than 5%%",
			growth*100, early.ownKiB, early.at, late.ownKiB, late.at)
	}
	if heapPeak.dpdkAlloc > w.dpdkAlloc+w.dpdkAlloc/20 {
		t.Errorf("DPDK heap allocations grew from %d to %d bytes after warm-up: more than 5%%", w.dpdkAlloc, heapPeak.dpdkAlloc)
	}
	if last.goroutines > samples[i].goroutines+5 {
		t.Errorf("goroutines grew from %.0f to %.0f", samples[i].goroutines, last.goroutines)
	}

	// Every packet is accounted for.
	if err := readFaultReport(t, statsPath).unaccounted(); err != nil {
		t.Errorf("at exit: %v", err)
	}
}

// soakGrowth is how much the resident memory outside DPDK's memory grew
// over samples, the run after warm-up: the floor of its second half (the
// least resident memory there, and where) against the floor of its first.
// Not the peak against one sample: the collector's pacing and the
// scavenger, which gives freed pages back minutes later, move the memory
// up and down by several percent in a period of minutes, and a sample
// taken in a trough made a later crest look like growth. A leak raises
// the floors the sawtooth comes back to.
func soakGrowth(samples []soakSample) (early, late soakSample, growth float64) {
	byOwn := func(a, b soakSample) int { return cmp.Compare(a.ownKiB, b.ownKiB) }
	half := len(samples) / 2
	early, late = slices.MinFunc(samples[:half], byOwn), slices.MinFunc(samples[half:], byOwn)
	return early, late, float64(late.ownKiB)/float64(early.ownKiB) - 1
}

// TestSoakGrowth checks the soak's measure of growth on the memory of two
// real 15-minute soaks (RSS outside DPDK memory in KiB, every 30 s): one
// from 1m30s, where the peak against that first sample read the
// collector's sawtooth as 6.7% growth, and one from 3m, after the
// daemon's first minutes of climbing; and on the first with a leak added.
func TestSoakGrowth(t *testing.T) {
	runs := [][]uint64{
		{59680, 60596, 61144, 61848, 62016, 62752, 61816, 59604, 59792, 60544, 61144, 61348, 62556, 63304,
			63308, 63640, 62060, 58996, 58940, 60404, 61740, 63620, 61296, 59504, 59472, 60548, 59988, 60708},
		{63104, 62336, 60940, 61300, 61672, 61928, 61328, 61528, 61792, 61680, 62360, 62696, 63104,
			63756, 64992, 62292, 62776, 63280, 62228, 62296, 61760, 62168, 61968, 62032, 62900},
	}
	samples := func(kibs []uint64, leakPerSample uint64) []soakSample {
		var out []soakSample
		for k, kib := range kibs {
			out = append(out, soakSample{at: time.Duration(k) * 30 * time.Second, ownKiB: kib + uint64(k)*leakPerSample})
		}
		return out
	}
	for i, kibs := range runs {
		if _, _, g := soakGrowth(samples(kibs, 0)); g > 0.02 || g < -0.02 {
			t.Errorf("run %d: growth %+.2f%%, want about none", i+1, g*100)
		}
	}
	// 300 KiB a sample is 14% over the run, about 7% between the halves.
	early, late, g := soakGrowth(samples(runs[0], 300))
	if g <= 0.05 {
		t.Errorf("with a leak of 300 KiB every 30 s: growth %+.2f%% (floor %d KiB at %v, then %d KiB at %v), want more than 5%%",
			g*100, early.ownKiB, early.at, late.ownKiB, late.at)
	}
	if early.at >= late.at {
		t.Errorf("the first half's floor at %v is not before the second half's at %v", early.at, late.at)
	}
}

// rssKiB is the resident memory of process pid, in all and outside DPDK's
// memory (EAL's memfd or hugepage file mappings), from /proc/pid/smaps.
func rssKiB(t *testing.T, pid int) (all, own uint64) {
	t.Helper()
	for m, kib := range mappings(t, pid) {
		all += kib
		if !strings.Contains(m, "memfd:nohuge") && !strings.Contains(m, "rtemap_") && !strings.Contains(m, "hugepages") {
			own += kib
		}
	}
	return all, own
}

// mappings is the resident KiB of each mapping of process pid, by its
// smaps header ("start-end perms offset dev inode [name]").
func mappings(t *testing.T, pid int) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	head := ""
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") {
			head = strings.Join(f, " ")
			continue
		}
		if f[0] == "Rss:" && len(f) >= 2 {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			out[head] += n
		}
	}
	return out
}

// logGrowth logs the mappings whose resident memory grew from before to
// after, largest growth first: where to look when the soak fails.
func logGrowth(t *testing.T, before, after map[string]uint64) {
	type g struct {
		m    string
		kib  int64
		from uint64
	}
	var gs []g
	for m, n := range after {
		if d := int64(n) - int64(before[m]); d > 0 {
			gs = append(gs, g{m, d, before[m]})
		}
	}
	slices.SortFunc(gs, func(a, b g) int { return cmp.Compare(b.kib, a.kib) })
	for _, x := range gs[:min(len(gs), 8)] {
		t.Logf("  +%6d KiB (from %6d KiB): %s", x.kib, x.from, x.m)
	}
}

// dpdkHeapAlloc asks EAL's telemetry socket of the daemon with file prefix
// prefix for /eal/heap_info,0 and returns its Alloc_size.
func dpdkHeapAlloc(t *testing.T, prefix string) uint64 {
	t.Helper()
	var c net.Conn
	var err error
	for _, base := range []string{"/var/run/dpdk", filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "dpdk"), "/tmp/dpdk"} {
		if c, err = net.Dial("unixpacket", filepath.Join(base, prefix, "dpdk_telemetry.v2")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("DPDK telemetry: %v", err)
	}
	defer c.Close()
	buf := make([]byte, 1<<16)
	if _, err := c.Read(buf); err != nil { // the greeting
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("/eal/heap_info,0")); err != nil {
		t.Fatal(err)
	}
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var reply map[string]struct {
		Alloc uint64 `json:"Alloc_size"`
	}
	if err := json.Unmarshal(buf[:n], &reply); err != nil {
		t.Fatalf("/eal/heap_info,0: %v: %s", err, buf[:n])
	}
	return reply["/eal/heap_info"].Alloc
}
