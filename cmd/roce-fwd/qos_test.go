package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roce-fwd/internal/testenv"
	"roce-fwd/qos"
	"roce-fwd/roce"
)

type qosStats struct {
	Drops     map[string]uint64 `json:"drops"`
	Queued    uint64            `json:"queued"`
	Generated uint64            `json:"generated"`
	Ports     []struct {
		Name      string `json:"name"`
		RxPackets uint64 `json:"rx_packets"`
		TxPackets uint64 `json:"tx_packets"`
	} `json:"ports"`
	QoS map[string][]struct {
		TC              int    `json:"tc"`
		EnqueuedPackets uint64 `json:"enqueued_packets"`
		TxPackets       uint64 `json:"tx_packets"`
		ECNMarked       uint64 `json:"ecn_marked"`
		Dropped         struct {
			Tail, WRED, Watchdog, LosslessOverflow uint64
		} `json:"dropped"`
		MaxDepthBytes uint64 `json:"max_depth_bytes"`
		PausedNs      int64  `json:"paused_ns"`
	} `json:"qos"`
	PFC map[string]struct {
		Mode     string    `json:"mode"`
		RxFrames [8]uint64 `json:"rx_frames"`
		PausedNs [8]int64  `json:"paused_ns"`
		TxXOFF   [8]uint64 `json:"tx_xoff"`
		TxXON    [8]uint64 `json:"tx_xon"`
	} `json:"pfc"`
}

func runQoS(t *testing.T, toml string) qosStats {
	t.Helper()
	cfg := writeFile(t, "qos.toml", toml)
	statsPath := filepath.Join(t.TempDir(), "stats.json")
	r := run(t, "run", "--config", cfg, "--duration", "1s", "--stats-json", statsPath)
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	var s qosStats
	b := readFileT(t, statsPath)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	return s
}

// inspectJSON runs `roce-fwd inspect --json` and decodes each frame.
func inspectJSON(t *testing.T, pcap string) []map[string]any {
	t.Helper()
	r := run(t, "inspect", "--json", "--verify-icrc", pcap)
	if r.code != 0 {
		t.Fatalf("inspect: exit %d %s", r.code, r.stderr)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// The nvidia-roce preset on an egress shaped far below the input rate,
// with the ECN range and PFC thresholds lowered through the config keys:
// CE marks appear only on ECT input, CNPs (TC6 strict) are never
// dropped, every RoCE frame out passes ICRC verification, the input
// port's sender gets XOFF then XON, and the counters add up.
func TestRunQoSShapedEgress(t *testing.T) {
	dir := t.TempDir()
	in, out, back := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap"), filepath.Join(dir, "back.pcap")
	kinds := []uint32{testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPECT, testenv.QPNotECT, testenv.QPNotECT, testenv.QPCNP, testenv.QPLossy}
	var frames [][]byte
	for i := range 1000 {
		frames = append(frames, testenv.QoSFrame(t, kinds[i%len(kinds)], uint32(i), 1024))
	}
	testenv.WritePcap(t, in, frames)
	s := runQoS(t, fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "in"
vdev = "net_pcap0,rx_pcap=%s,tx_pcap=%s"
[[port]]
name = "out"
vdev = "net_pcap1,tx_pcap=%s"
[pipeline]
mode = "roce"
[[forward]]
from = "in"
to = "out"
[qos]
preset = "nvidia-roce"
[[qos.port]]
name = "out"
rate = "40Mbps"
  [[qos.port.tc]]
  tc = 3
  ecn = { min = "20KB", max = "200KB", probability = 0.5 }
  [[qos.port.tc]]
  tc = 0
  limit = "20KB"
[pfc]
xoff = "300KB"
xon = "100KB"
`, ealArgs(t), in, back, out))

	// The invariant: received = transmitted + drops + queued.
	var rx, tx, drops uint64
	for _, p := range s.Ports {
		rx += p.RxPackets
		tx += p.TxPackets
	}
	for _, v := range s.Drops {
		drops += v
	}
	if rx != 1000 || rx+s.Generated != tx+drops+s.Queued || s.Queued != 0 {
		t.Errorf("received %d, generated %d PFC, transmitted %d, dropped %d, queued %d: does not add up (drops %v)",
			rx, s.Generated, tx, drops, s.Queued, s.Drops)
	}
	tcs := s.QoS["out"]
	if len(tcs) != 8 {
		t.Fatalf("qos stats: %+v", s.QoS)
	}
	if tcs[6].TxPackets != 100 || tcs[3].TxPackets != 800 || tcs[3].ECNMarked == 0 || tcs[0].Dropped.Tail == 0 ||
		s.Drops["qos_tail"] != tcs[0].Dropped.Tail {
		t.Errorf("per-TC stats: TC0 %+v TC3 %+v TC6 %+v, drops %v", tcs[0], tcs[3], tcs[6], s.Drops)
	}

	var ce, cnps uint64
	for i, f := range inspectJSON(t, out) {
		if f["icrc"] != "ok" {
			t.Fatalf("frame %d out: ICRC %v", i, f["icrc"])
		}
		qp := uint32(f["dest_qp"].(float64))
		if f["ecn"].(float64) == 3 {
			ce++
			if qp != testenv.QPECT {
				t.Fatalf("frame %d out: QP %#x was not ECT but came out CE", i, qp)
			}
		}
		if f["cnp"] == true {
			cnps++
		}
	}
	if cnps != 100 || ce != tcs[3].ECNMarked {
		t.Errorf("%d CNPs out (want 100), %d CE frames out, stats say %d marked", cnps, ce, tcs[3].ECNMarked)
	}

	var xoff, xon int
	for _, f := range testenv.ReadPcap(t, back) {
		ceMask, q, ok := roce.ParsePFC(f)
		switch {
		case !ok || ceMask != 1<<3:
			t.Fatalf("the input port sent a frame that is not PFC for priority 3: %x", f)
		case q[3] == 0:
			xon++
		default:
			xoff++
		}
	}
	if p := s.PFC["in"]; xoff == 0 || xon != 1 || p.TxXOFF[3] != uint64(xoff) || p.TxXON[3] != 1 || p.Mode != "software" {
		t.Errorf("PFC to the input port: %d XOFF and %d XON in the capture, stats %+v", xoff, xon, p)
	}
}

// A PFC frame for priority 3 arriving on a port pauses that port's TC3
// for quanta × 512 bit times (at the 10 Gbps net_pcap reports): the TC3
// frames queued behind it wait while later CNPs (TC6) pass, and the PFC
// frame itself is consumed.
func TestRunQoSInjectedPFCPausesTC(t *testing.T) {
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	pfc := testenv.PFCFrame(t, 3, 0xFFFF)
	frames := [][]byte{pfc}
	for i := range 50 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPECT, uint32(i), 256))
	}
	for i := range 10 {
		frames = append(frames, testenv.QoSFrame(t, testenv.QPCNP, uint32(100+i), 0))
	}
	testenv.WritePcap(t, in, frames)
	s := runQoS(t, fmt.Sprintf(`[eal]
args = %s
[[port]]
name = "p"
vdev = "net_pcap0,rx_pcap=%s,tx_pcap=%s"
[pipeline]
mode = "roce"
[[forward]]
from = "p"
to = "p"
[qos]
preset = "nvidia-roce"
`, ealArgs(t), in, out))
	want := qos.PauseNanos(0xFFFF, 10e9)
	if p := s.PFC["p"]; p.RxFrames[3] != 1 || p.PausedNs[3] != want {
		t.Errorf("PFC stats %+v: want 1 frame on priority 3, %d ns paused", p, want)
	}
	if tc := s.QoS["p"][3]; tc.PausedNs != want || tc.TxPackets != 50 {
		t.Errorf("TC3 %+v: want %d ns paused, 50 sent", tc, want)
	}
	if s.Drops["mac_control"] != 1 {
		t.Errorf("drops %v: want the PFC frame under mac_control", s.Drops)
	}
	got := inspectJSON(t, out)
	if len(got) != 60 {
		t.Fatalf("%d frames out, want 60", len(got))
	}
	for i, f := range got[:10] {
		if f["cnp"] != true {
			t.Fatalf("frame %d out is not a CNP: the paused TC3 frames went first", i)
		}
	}
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
