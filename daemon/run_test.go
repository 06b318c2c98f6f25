package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"roce-fwd/config"
	"roce-fwd/dpdk"
	"roce-fwd/internal/testenv"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
)

// ealStarted is set by the one test that starts EAL: EAL starts once per
// process, so a second run (go test -count=2) is skipped.
var ealStarted bool

// syncBuffer is a log sink the workers' goroutines may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func quoted(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// portByName is the report's line for port name.
func portByName(t *testing.T, r Report, name string) PortReport {
	t.Helper()
	for _, p := range r.Ports {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no port %q in the report", name)
	return PortReport{}
}

// A short run on vdevs: start, forward a capture, the control operations
// of control.go, and close, leaving nothing behind.
func TestDaemonRun(t *testing.T) {
	if ealStarted {
		t.Skip("EAL starts once per process")
	}
	ealStarted = true

	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	frames := testenv.Frames(64)
	testenv.WritePcap(t, in, frames)
	var inBytes uint64
	for _, f := range frames {
		inBytes += uint64(len(f))
	}
	prefix := testenv.FilePrefix("daemon")
	src := fmt.Sprintf(`[eal]
args = [%s]
[pipeline]
mode = "roce"
[roce]
qp_table = 1024
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s"
[[port]]
name = "out"
vdev = "net_pcap1,tx_pcap=%s"
[[forward]]
from = "in"
to = "out"
`, quoted(testenv.EALArgs("daemon")), in, out)
	cfgPath := filepath.Join(dir, "roce-fwd.toml")
	if err := os.WriteFile(cfgPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	var logs syncBuffer
	// An empty system root: no NUMA topology (so the test's threads keep
	// their CPUs) and no sysfs for the PFC probe.
	d, err := Start(cfg, Options{SysRoot: t.TempDir(), Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runtimeDir := dpdk.RuntimeDir()
	closed := false
	t.Cleanup(func() {
		if !closed {
			if err := d.Close(); err != nil {
				t.Error(err)
			}
		}
		if err := testenv.RemoveRuntimeDir(runtimeDir, prefix); err != nil {
			t.Error(err)
		}
	})

	// What Start set up.
	if d.HugePlan != nil || !slices.Equal(d.EALArgs, cfg.EAL.Args) || d.Topo != nil {
		t.Errorf("EAL args %q, hugepage plan %v, topology %v; want the config's args as they are", d.EALArgs, d.HugePlan, d.Topo)
	}
	if len(d.Ports.Ports) != 2 || !d.Pipe.Running() || d.Started.IsZero() {
		t.Fatalf("%d ports, running %v", len(d.Ports.Ports), d.Pipe.Running())
	}
	if len(d.Plan.Workers) != 1 || d.Plan.Workers[0].Lcore != 1 || len(d.Plan.Workers[0].Queues) != 1 ||
		d.Plan.Workers[0].Queues[0].PortName != "in" {
		t.Errorf("placement %+v, want lcore 1 polling in's queue", d.Plan.Workers)
	}
	for _, st := range d.Flows.Ports() {
		if st.Backend != offload.BackendSoftware || st.Caps.Engine != "none" {
			t.Errorf("port %s: flow backend %v engine %q, want software (net_pcap has no flow engine)", st.Name, st.Backend, st.Caps.Engine)
		}
	}
	if _, ok := d.QoSConfig("in"); ok {
		t.Error("a QoS configuration without [qos]")
	}

	// The capture goes through.
	deadline := time.Now().Add(10 * time.Second)
	for portByName(t, d.Snapshot(), "out").TxPackets < uint64(len(frames)) {
		if time.Now().After(deadline) {
			t.Fatalf("forwarded %d of %d frames", portByName(t, d.Snapshot(), "out").TxPackets, len(frames))
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := d.Report()
	if p := portByName(t, r, "in"); p.RxPackets != 64 || p.RxBytes != inBytes || p.Driver != "net_pcap" || p.IntervalS != 0 {
		t.Errorf("in: %+v, want 64 frames, %d bytes, no interval yet", p, inBytes)
	}
	if p := portByName(t, r, "out"); p.TxPackets != 64 || p.TxBytes != inBytes || p.TxDropped != 0 {
		t.Errorf("out: %+v, want 64 frames, %d bytes", p, inBytes)
	}
	if len(r.Lcores) != 1 || r.Lcores[0].Lcore != 1 || r.Lcores[0].Packets != 64 {
		t.Errorf("lcores %+v, want lcore 1 with 64 packets", r.Lcores)
	}
	if len(r.Drops) != int(pipeline.NumReasons) {
		t.Errorf("drops %v, want every reason", r.Drops)
	}
	for reason, n := range r.Drops {
		if n != 0 {
			t.Errorf("%d drops for %s", n, reason)
		}
	}
	if r.Mode != "roce" || r.RoCE == nil || len(r.RoCE.Ports) != 1 || r.RoCE.Ports[0].Frames != 64 ||
		r.RoCE.Ports[0].RoCE == 0 || r.RoCE.Ports[0].ICRCBad != 0 || r.RoCE.QPFlows == 0 || len(r.TopQPs) == 0 {
		t.Errorf("roce report %+v", r.RoCE)
	}
	if r.QoS != nil || r.PFC != nil || r.Flows == nil {
		t.Errorf("qos %v pfc %v flows %v", r.QoS, r.PFC, r.Flows)
	}
	if again := d.Report(); portByName(t, again, "in").IntervalS <= 0 {
		t.Error("a second report has no interval")
	}

	// What a running dataplane refuses.
	for what, err := range map[string]error{
		"start":     d.Start(),
		"port stop": d.PortStop(nil),
		"set mode":  d.SetFwdMode("io"),
	} {
		if err == nil {
			t.Errorf("%s while forwarding: no error", what)
		}
	}
	// The same file with another mode (ApplyConfig makes its File the one
	// Reload reads).
	io, err := config.Parse(cfgPath, []byte(strings.Replace(src, `mode = "roce"`, `mode = "io"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.ApplyConfig(io); err == nil || !strings.Contains(err.Error(), `pipeline.mode: "roce" → "io" (stop forwarding first)`) {
		t.Errorf("mode change while forwarding: %v", err)
	}

	// A live change is swapped in under the running worker.
	changes, err := d.EditConfig(func(c *config.Config) error { c.RoCE.BadICRC = "forward"; return nil })
	if err != nil || len(changes) != 1 || changes[0].Key != "roce.bad_icrc" {
		t.Fatalf("edit: %v, %v", changes, err)
	}
	if d.Cfg.RoCE.BadICRC != "forward" || d.Pipe.Tables().RoCE.DropBadICRC || !d.Pipe.Running() {
		t.Errorf("bad_icrc %q, the workers drop bad ICRCs: %v", d.Cfg.RoCE.BadICRC, d.Pipe.Tables().RoCE.DropBadICRC)
	}
	before := d.Cfg
	if _, err := d.EditConfig(func(c *config.Config) error { return fmt.Errorf("no") }); err == nil || d.Cfg != before {
		t.Errorf("a failed edit: %v, config replaced %v", err, d.Cfg != before)
	}

	// Stop; the report's duration ends there.
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := d.Stop(); err == nil {
		t.Error("second stop: no error")
	}
	if r1, r2 := d.Report(), d.Report(); r1.DurationS != r2.DurationS || r1.DurationS <= 0 {
		t.Errorf("durations %v and %v after stop, want one fixed duration", r1.DurationS, r2.DurationS)
	}

	// Clearing starts the counters over.
	d.ClearFwdStats()
	d.ClearRoCEStats()
	if err := d.ClearPortStats(nil, false); err != nil {
		t.Error(err)
	}
	r = d.Report()
	if r.DurationS != 0 || r.Lcores[0].Packets != 0 || portByName(t, r, "in").RxPackets != 0 || portByName(t, r, "out").TxPackets != 0 {
		t.Errorf("after clear: duration %v, lcore %+v, ports %+v", r.DurationS, r.Lcores[0], r.Ports)
	}
	if r.RoCE.Ports[0].Frames != 0 || r.RoCE.QPFlows != 0 {
		t.Errorf("after clear: roce %+v", r.RoCE)
	}

	// Stopped, the mode may change, by reload or by command.
	changes, err = d.ApplyConfig(io)
	if err != nil || len(changes) < 2 || d.Cfg.Pipeline.Mode != "io" || d.Pipe.Spec.Mode != pipeline.ModeIO {
		t.Errorf("mode change while stopped: %v, %v; mode %q", changes, err, d.Cfg.Pipeline.Mode)
	}
	if err := d.SetFwdMode("roce"); err != nil || d.Cfg.Pipeline.Mode != "roce" || d.Pipe.Spec.Mode != pipeline.ModeRoCE {
		t.Errorf("set mode roce: %v; mode %q", err, d.Cfg.Pipeline.Mode)
	}
	if err := d.SetFwdMode("fast"); err == nil {
		t.Error("an unknown mode was set")
	}

	// Ports stop and start; forwarding needs them all started.
	if err := d.PortStop(nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err == nil || err.Error() != "port 0 (in) is stopped: start it first (port start 0)" {
		t.Errorf("start with stopped ports: %v", err)
	}
	if err := d.PortStart([]int{0}); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err == nil || !strings.HasPrefix(err.Error(), "port 1 (out) is stopped") {
		t.Errorf("start with out stopped: %v", err)
	}
	if err := d.PortStart(nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil || !d.Pipe.Running() {
		t.Fatalf("start: %v", err)
	}

	// Reload reads the file again, which undoes an edit, and refuses a
	// change that needs a restart.
	if _, err := d.EditConfig(func(c *config.Config) error { c.RoCE.BadICRC = "forward"; return nil }); err != nil {
		t.Fatal(err)
	}
	changes, err = d.Reload()
	if err != nil || len(changes) != 1 || changes[0].Key != "roce.bad_icrc" || !d.Pipe.Tables().RoCE.DropBadICRC {
		t.Errorf("reload: %v, %v", changes, err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(src, "qp_table = 1024", "qp_table = 2048", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Reload(); err == nil || !strings.Contains(err.Error(), "roce.qp_table: 1024 → 2048") {
		t.Errorf("reload with a new qp_table: %v", err)
	}
	var seen *config.Config
	d.Do(func() { seen = d.Cfg })
	if seen.RoCE.QPTable != 1024 {
		t.Errorf("running qp_table %d", seen.RoCE.QPTable)
	}

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if dpdk.Running() || d.Pipe != nil || d.Ports != nil {
		t.Errorf("after close: EAL running %v, pipeline %v, ports %v", dpdk.Running(), d.Pipe, d.Ports)
	}
	// net_pcap wrote what it sent when it closed: the capture, unchanged.
	got := testenv.ReadPcap(t, out)
	if len(got) != len(frames) {
		t.Fatalf("%d frames written, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Errorf("frame %d changed on its way", i)
		}
	}
	log := logs.String()
	for _, want := range []string{`msg="port up" port=in`, `msg="port up" port=out`, `msg="worker started" lcore=1`,
		`msg="config change applied" change="roce.bad_icrc: `} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}
