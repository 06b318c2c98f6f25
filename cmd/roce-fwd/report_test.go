package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"roce-fwd/internal/testenv"
	"roce-fwd/roce"
)

// stamped is a frame and when it was captured, since the capture began.
type stamped struct {
	at    time.Duration
	frame []byte
}

// writeStamped writes frames as a pcap in time order.
func writeStamped(t *testing.T, path string, frames []stamped) {
	t.Helper()
	slices.SortStableFunc(frames, func(a, b stamped) int { return int(a.at - b.at) })
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	base := time.Unix(1700000000, 0)
	for _, s := range frames {
		ci := gopacket.CaptureInfo{Timestamp: base.Add(s.at), CaptureLength: len(s.frame), Length: len(s.frame)}
		if err := w.WritePacket(ci, s.frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func buildFrame(t *testing.T, s roce.FrameSpec) []byte {
	t.Helper()
	f, err := s.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Events the report capture holds, and what the charts must add up to.
const (
	reportFlows    = 10 // data flows, QP 0x1000+i, flow i sending 30-2i WRITEs
	reportCE       = 5  // flow 0's frames 10-14
	reportCNPs     = 5
	reportPFC3     = 4 * 0xffff // four XOFFs on priority 3, then an XON
	reportPFC5     = 2 * 100
	reportPause    = 0x1000
	reportOpcodes  = 3 // WRITE Only, CNP, Acknowledge
	reportAllFlows = reportFlows + 2
)

// reportCapture is 30 ms of RoCEv2 on ten flows with every event the
// report charts: CE marks and CNPs, a PSN gap answered by a NAK, a
// duplicate PSN, PFC XOFF/XON on two priorities and an 802.3x PAUSE.
func reportCapture(t *testing.T, path string) {
	var frames []stamped
	req := netip.MustParseAddr("10.0.0.1")
	const step = 100 * time.Microsecond
	for i := range reportFlows {
		resp := netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})
		base := uint32(1000 * (i + 1))
		for j := range 30 - 2*i {
			psn, ecn := base+uint32(j), uint8(roce.ECNECT0)
			switch {
			case i == 0 && j >= 10 && j < 10+reportCE:
				ecn = roce.ECNCE
			case i == 2 && j >= 15: // PSNs base+15..17 never arrive
				psn += 3
			case i == 3 && j >= 20: // PSN base+19 again, then on from there
				psn--
			}
			f := buildFrame(t, roce.FrameSpec{Src: roce.MAC{2, 0, 0, 0, 0, 1}, Dst: roce.MAC{2, 0, 0, 0, 1, byte(i + 1)},
				SrcIP: req, DstIP: resp, DSCP: 26, ECN: ecn,
				BTH:     roce.BTHFields{Opcode: roce.OpRC | roce.OpWriteOnly, DestQP: 0x1000 + uint32(i), PSN: psn, PKey: 0xffff},
				Ext:     roce.ExtFields{VA: 0x1000, RKey: 7, DMALength: 1024},
				Payload: make([]byte, 1024)})
			frames = append(frames, stamped{time.Duration(j*reportFlows+i) * step, f})
		}
		if i == 2 { // the responder NAKs the gap
			nak := buildFrame(t, roce.FrameSpec{SrcIP: resp, DstIP: req, DSCP: 26,
				BTH: roce.BTHFields{Opcode: roce.OpRC | roce.OpAck, DestQP: 0x2002, PSN: base + 15, PKey: 0xffff},
				Ext: roce.ExtFields{Syndrome: roce.SyndromeNAK(roce.NAKPSNSequenceError)}})
			frames = append(frames, stamped{time.Duration(15*reportFlows+i)*step + step/2, nak})
		}
	}
	for k := range reportCNPs {
		frames = append(frames, stamped{12*time.Millisecond + time.Duration(k)*step, testenv.QoSFrame(t, testenv.QPCNP, 0, 0)})
	}
	for k := range 4 {
		frames = append(frames, stamped{20*time.Millisecond + time.Duration(k)*2*step, testenv.PFCFrame(t, 3, 0xffff)})
	}
	frames = append(frames, stamped{21 * time.Millisecond, testenv.PFCFrame(t, 3, 0)})
	for k := range 2 {
		frames = append(frames, stamped{25*time.Millisecond + time.Duration(k)*step, testenv.PFCFrame(t, 5, 100)})
	}
	pause := make([]byte, 60)
	if _, err := roce.BuildPause(pause, roce.MAC{2, 0, 0, 0, 0, 0xee}, reportPause); err != nil {
		t.Fatal(err)
	}
	frames = append(frames, stamped{26 * time.Millisecond, pause})
	writeStamped(t, path, frames)
}

// chromiumPath is Debian's chromium, or the test is skipped.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (sh scripts/deps.sh test, or apt-get install chromium): the HTML report is not loaded in a browser")
	return ""
}

// loadPage loads url in headless chromium, writes a screenshot to shot,
// and returns the DOM after the page's script ran and chromium's log (on
// which the page's console messages and uncaught errors appear). The
// profile, cache and home are in a temporary directory, and chromium's
// process group is killed afterwards: nothing is left behind.
func loadPage(t *testing.T, url, shot string) (dom, log string) {
	t.Helper()
	bin := chromiumPath(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
		"--no-default-browser-check", "--disable-extensions", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--hide-scrollbars", "--window-size=1400,2600", "--screenshot="+shot, "--dump-dom",
		"--enable-logging=stderr", "--v=0", url)
	cmd.Env = append(os.Environ(), "HOME="+dir, "TMPDIR="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, "config"), "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if cmd.Process != nil {
		// Helpers that outlived the browser: only its own process group.
		if kerr := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
			t.Errorf("killing chromium's process group: %v", kerr)
		}
	}
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, lastLines(stderr.String(), 20))
	}
	return stdout.String(), stderr.String()
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}

// artefact is where a test keeps a file worth looking at:
// $ROCE_FWD_ARTEFACTS when set, else the test's temporary directory.
func artefact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("ROCE_FWD_ARTEFACTS")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

// element returns the element of dom whose id is id, from its start tag
// to the end tag of its kind (charts and tables do not nest their kind).
func element(t *testing.T, dom, tag, id string) string {
	t.Helper()
	i := strings.Index(dom, ` id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element with id %q", id)
	}
	start := strings.LastIndex(dom[:i], "<"+tag)
	end := strings.Index(dom[i:], "</"+tag+">")
	if start < 0 || end < 0 {
		t.Fatalf("id %q is not on a <%s>", id, tag)
	}
	return dom[start : i+end]
}

// tipSum adds up a series' values over every bin's tooltip of a chart.
func tipSum(t *testing.T, svg, series string) uint64 {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + `: ([0-9,]+)`)
	var n uint64
	m := re.FindAllStringSubmatch(svg, -1)
	if len(m) == 0 {
		t.Fatalf("no tooltip of series %q", series)
	}
	for _, s := range m {
		v, err := strconv.ParseUint(strings.ReplaceAll(s[1], ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		n += v
	}
	return n
}

// TestReportHTML writes the report of a capture with every event it
// charts and of a real NIC's capture, loads it in headless chromium, and
// checks what a reader sees: no script errors, every chart with its
// series or bars, the events added up right, the top QP flows listed.
func TestReportHTML(t *testing.T) {
	chromiumPath(t)
	dir := t.TempDir()
	pcap := filepath.Join(dir, "events.pcap")
	reportCapture(t, pcap)
	inputs := []string{pcap}
	real := ""
	for _, d := range []string{"../../../shared/testdata/captures", "../../shared/testdata/captures"} {
		if p := filepath.Join(d, "oferby_proxy_roce.pcap"); fileExists(p) {
			real = p
			inputs = append(inputs, p)
			break
		}
	}
	if real == "" {
		t.Log("shared/testdata/captures/oferby_proxy_roce.pcap not found: the report of a real NIC's capture is not checked")
	}
	html := artefact(t, "report.html")
	r := run(t, append([]string{"inspect", "--html", html}, inputs...)...)
	if r.code != 0 {
		t.Fatalf("inspect --html: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, "frames ") {
		t.Errorf("inspect --html no longer prints the summary:\n%s", r.stdout)
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	// Self-contained: nothing loaded from anywhere.
	for _, bad := range []string{"src=", "<link", "url(", "@import", `href="http`} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("the report holds %q: it must load nothing", bad)
		}
	}

	shot := artefact(t, "report.png")
	dom, log := loadPage(t, "file://"+html, shot)
	t.Logf("report %s (%d kB), screenshot %s", html, len(page)/1024, shot)
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") {
			t.Errorf("console: %s", l)
		}
	}
	if !regexp.MustCompile(`<html[^>]* data-js="1"`).MatchString(dom) {
		t.Error("the page's script did not run")
	}
	checkScreenshot(t, shot)

	// Each chart: its series (or bars) drawn, with a legend when several.
	for _, c := range []struct {
		id     string
		series int
		bars   int
	}{
		{"tput-0", 8, 0},
		{"total-0", 9, 0}, // the top 8 and the other flows
		{"cong-0", 2, 0},
		{"psn-0", 3, 0},
		{"ecn-0", 4, 0},
		{"pfc-0", 3, 0}, // priorities 3 and 5, and PAUSE
		{"ops-0", 0, reportOpcodes},
		{"tc-0", 0, 8},
	} {
		svg := element(t, dom, "svg", c.id)
		if n := strings.Count(svg, `class="series"`); n != c.series {
			t.Errorf("%s: %d series, want %d", c.id, n, c.series)
		}
		if n := strings.Count(svg, `class="legend-item"`); c.series > 1 && n != c.series {
			t.Errorf("%s: %d legend entries, want %d", c.id, n, c.series)
		}
		if n := strings.Count(svg, `class="bar"`); n != c.bars {
			t.Errorf("%s: %d bars, want %d", c.id, n, c.bars)
		}
		if c.series > 0 && !strings.Contains(svg, "time since first frame (ms)") {
			t.Errorf("%s: no time axis in ms", c.id)
		}
		if !strings.Contains(svg, `class="title"`) || !strings.Contains(svg, "<title") {
			t.Errorf("%s: no title", c.id)
		}
	}
	for _, c := range []struct {
		id, series string
		want       uint64
	}{
		{"cong-0", "CE-marked frames", reportCE},
		{"cong-0", "CNPs", reportCNPs},
		{"ecn-0", "CE", reportCE},
		{"psn-0", "PSN gaps", 1},
		{"psn-0", "out-of-order / duplicate PSNs", 1},
		{"psn-0", "NAKs", 1},
		{"pfc-0", "priority 3 (5 frames)", reportPFC3},
		{"pfc-0", "priority 5 (2 frames)", reportPFC5},
		{"pfc-0", "802.3x PAUSE (1 frame)", reportPause},
		{"total-0", fmt.Sprintf("other %d flows", reportAllFlows-8), 0}, // the rest: a NAK and CNPs, small
	} {
		svg := element(t, dom, "svg", c.id)
		if c.want == 0 {
			if !strings.Contains(svg, c.series) {
				t.Errorf("%s: no series %q", c.id, c.series)
			}
			continue
		}
		if got := tipSum(t, svg, c.series); got != c.want {
			t.Errorf("%s: %q adds up to %d over the bins, want %d", c.id, c.series, got, c.want)
		}
	}
	// The busiest flow's throughput: 30 frames in 30 ms.
	if tput := element(t, dom, "svg", "tput-0"); !strings.Contains(tput, "QP 0x001000 10.0.0.1→10.0.1.1") {
		t.Error("tput-0: the busiest flow is not plotted")
	}

	// The top QP flows: the ten data flows, biggest first.
	table := element(t, dom, "table", "qps-0")
	if n := strings.Count(table, "<tr>") - 1; n != 10 {
		t.Errorf("QP table: %d rows, want 10", n)
	}
	last := -1
	for i := range reportFlows {
		qp := fmt.Sprintf("<td>0x%06x</td>", 0x1000+i)
		at := strings.Index(table, qp)
		if at < last {
			t.Errorf("QP table: %s missing or out of order", qp)
		}
		last = at
	}
	if n := strings.Count(table, `class="swatch"`); n != 8 {
		t.Errorf("QP table: %d flows marked as plotted, want 8", n)
	}

	if real != "" {
		// A Huawei NIC's capture: its hosts and its four opcodes.
		table := element(t, dom, "table", "qps-1")
		for _, host := range []string{"192.168.70.4", "192.168.70.6"} {
			if !strings.Contains(table, "<td>"+host+"</td>") {
				t.Errorf("%s: %s not in the QP table", real, host)
			}
		}
		if n := strings.Count(element(t, dom, "svg", "ops-1"), `class="bar"`); n != 4 {
			t.Errorf("%s: %d opcode bars, want 4", real, n)
		}
		if n := strings.Count(dom, `<section id="s`); n != 2 {
			t.Errorf("%d sections, want 2", n)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkScreenshot fails on a blank page: a PNG of the window's size with
// more than a handful of colours (text, lines, bars).
func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 1400 || b.Dy() != 2600 {
		t.Errorf("screenshot %dx%d, want 1400x2600", b.Dx(), b.Dy())
	}
	colours := map[[4]uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y && len(colours) < 50; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if len(colours) < 50 {
		t.Errorf("screenshot has %d colours: the page looks blank", len(colours))
	}
}

// vmHWM is process pid's peak resident set so far, in KiB (0 once it has
// exited).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// TestReportHTMLMillionFrames times inspect --html on a million frames of
// 4096 QPs (goal: well under 10 s on the 2-core machine) and checks that
// neither its memory nor the report grows with the capture.
func TestReportHTMLMillionFrames(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no million-frame capture")
	}
	dir := t.TempDir()
	pcap := filepath.Join(dir, "1m.pcap")
	g := run(t, "gen-pcap", "--qps", "4096", "--mix", "control", "--frames", "1000000", pcap)
	if g.code != 0 {
		t.Fatalf("gen-pcap: exit %d\n%s", g.code, g.stderr)
	}
	const flows = 2 * 4096 // a QP's requests and what comes back to it
	st, err := os.Stat(pcap)
	if err != nil {
		t.Fatal(err)
	}
	// The child's peak RSS is its VmHWM, read while it runs. Its rusage
	// will not do: Go starts it with vfork, so the kernel carries the
	// test process's own high-water mark into the child's ru_maxrss when
	// it execs, and a test binary grown by other tests made inspect look
	// 300 MB large.
	measure := func(args ...string) (wall, cpu time.Duration, rssMB int64) {
		cmd := exec.Command(binary, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		peak := make(chan int64)
		go func() {
			kb := int64(0)
			for {
				kb = max(kb, vmHWM(cmd.Process.Pid))
				select {
				case <-done:
					peak <- kb
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
		err := cmd.Wait()
		close(done)
		kb := <-peak
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr.String())
		}
		wall = time.Since(start)
		ps := cmd.ProcessState
		return wall, ps.UserTime() + ps.SystemTime(), kb / 1024
	}
	html := filepath.Join(dir, "1m.html")
	w0, c0, r0 := measure("inspect", pcap)
	w, c, rss := measure("inspect", "--html", html, pcap)
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1,000,000 frames, %d QP flows, %d MB: inspect --html %.2fs wall, %.2fs CPU, peak RSS %d MB, report %d kB (the summary alone: %.2fs wall, %.2fs CPU, %d MB)",
		flows, st.Size()>>20, w.Seconds(), c.Seconds(), rss, len(page)/1024, w0.Seconds(), c0.Seconds(), r0)
	// Bounds far above the goal, so a loaded machine does not fail them,
	// but not a report that holds the frames or grows with them.
	if c > 30*time.Second {
		t.Errorf("inspect --html took %v of CPU for a million frames", c)
	}
	if rss > 256 {
		t.Errorf("inspect --html peaked at %d MB: does it keep the frames?", rss)
	}
	if len(page) > 2<<20 {
		t.Errorf("the report is %d kB", len(page)/1024)
	}
	for _, want := range []string{"<dd>1,000,000</dd>", fmt.Sprintf("<dd>%s</dd>", groupThousands(flows)),
		fmt.Sprintf("other %s flows", groupThousands(flows-8))} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

func groupThousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
