package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roce-fwd/demotraffic"
)

const hugeSys = "/sys/kernel/mm/hugepages/hugepages-2048kB"

// hugepagesFor makes n 2 MiB hugepages free and mounts hugetlbfs in a
// directory of the test's own, giving both back when the test ends; it
// skips the test when that is not possible (not root, no memory).
func hugepagesFor(t *testing.T, n int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("reserving hugepages needs root")
	}
	readInt := func(name string) int {
		b, err := os.ReadFile(filepath.Join(hugeSys, name))
		if err != nil {
			t.Skipf("no 2 MiB hugepages on this kernel: %v", err)
		}
		v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return v
	}
	orig := readInt("nr_hugepages")
	if free := readInt("free_hugepages"); free < n {
		if err := os.WriteFile(filepath.Join(hugeSys, "nr_hugepages"), []byte(strconv.Itoa(orig+n-free)), 0); err != nil {
			t.Skipf("cannot reserve hugepages: %v", err)
		}
		t.Cleanup(func() { os.WriteFile(filepath.Join(hugeSys, "nr_hugepages"), []byte(strconv.Itoa(orig)), 0) })
		if free := readInt("free_hugepages"); free < n {
			t.Skipf("only %d 2 MiB hugepages could be made free, %d wanted", free, n)
		}
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount hugetlbfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// On hugepages with EAL's shared runtime directory, the stock
// dpdk-dumpcap attaches to a running roce-fwd as a secondary process and
// captures a port; tshark reads the file.
func TestDumpcapAttaches(t *testing.T) {
	tool, err := exec.LookPath("dpdk-dumpcap")
	if err != nil {
		t.Skip("dpdk-dumpcap not installed (package dpdk-dev)")
	}
	huge := hugepagesFor(t, 160)
	// A short path: net_pcap keeps its arguments for secondary processes
	// in 64 bytes (ETH_PCAP_ARG_MAXLEN), and a secondary cannot probe the
	// port when they were cut.
	dir, err := os.MkdirTemp("/tmp", "rfdc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pcap := filepath.Join(dir, "demo.pcap")
	if err := demotraffic.WriteFile(pcap); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("rf-cmd-%d-dumpcap", os.Getpid())
	t.Cleanup(func() { os.RemoveAll(filepath.Join("/var/run/dpdk", prefix)) })
	r := &daemonRig{t: t, sock: filepath.Join(dir, "console.sock"), cfgPath: filepath.Join(dir, "rf.toml"), prefix: prefix, stderr: &syncBuffer{}}
	eal := fmt.Sprintf(`["-m", "256", "--huge-dir", %q, "--no-pci", "-l", "0-1", "--file-prefix", %q, "--log-level", "*:error"]`, huge, prefix)
	r.writeConfig(inOutConfig(eal, "net_pcap0,rx_pcap="+pcap+",infinite_rx=1", fmt.Sprintf(`[pipeline]
mode = "roce"
[console]
socket = %q
history = ""
`, r.sock)))
	r.cmd = exec.Command(binary, "run", "--config", r.cfgPath)
	r.launch()
	if !strings.Contains(r.stderr.String(), "dpdk-dumpcap and dpdk-pdump can capture") {
		t.Errorf("the daemon does not say dpdk-dumpcap can attach:\n%s", r.stderr.String())
	}
	deadline := time.Now().Add(10 * time.Second)
	for r.fwd().Ports[0].RxPackets == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := filepath.Join(dir, "dumpcap.pcapng")
	cmd := exec.Command(tool, "--file-prefix="+prefix, "-i", "net_pcap0", "-c", "200", "-w", out, "-q")
	done := make(chan error, 1)
	var msg []byte
	go func() {
		var err error
		msg, err = cmd.CombinedOutput()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dpdk-dumpcap: %v\n%s", err, msg)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("dpdk-dumpcap did not capture 200 packets in 30 s:\n%s", msg)
	}
	lines := tsharkFields(t, out, "frame.interface_name", "infiniband.bth.opcode")
	if len(lines) < 200 { // dpdk-dumpcap stops after the burst that reached its count
		t.Fatalf("tshark read %d packets, want 200 or more", len(lines))
	}
	var roce int
	for _, l := range lines {
		if f := strings.Split(l, "\t"); len(f) == 2 && f[1] != "" {
			roce++
		}
	}
	if roce == 0 {
		t.Error("no RoCEv2 packet in what dpdk-dumpcap captured")
	}
	r.stop()
	// EAL leaves its hugepage files for secondaries that may still run:
	// they are the test's to remove (the mount goes with them).
	files, _ := filepath.Glob(filepath.Join(huge, "*"))
	for _, f := range files {
		os.Remove(f)
	}
}
