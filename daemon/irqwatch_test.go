package daemon

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"roce-fwd/internal/fixture"
)

// The watch takes the counts as they are at start, warns once for an
// interrupt a worker's CPU takes after that, naming the device, the CPU,
// the lcore and how to move it, and not again for the same one.
func TestIRQWatch(t *testing.T) {
	root := t.TempDir()
	write := func(disk, nic uint64) {
		fixture.WriteFile(t, filepath.Join(root, "proc/interrupts"), strings.Join([]string{
			"           CPU0       CPU1",
			" 36:          0 " + strconv.FormatUint(disk, 10) + "  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0",
			" 42:          0 " + strconv.FormatUint(nic, 10) + "  PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx",
			"LOC:   26335206   17338662   Local timer interrupts", ""}, "\n"))
	}
	fixture.WriteFile(t, filepath.Join(root, "proc/irq/36/effective_affinity_list"), "1\n")
	fixture.WriteFile(t, filepath.Join(root, "proc/irq/42/effective_affinity_list"), "1\n")
	var logs bytes.Buffer
	w := newIRQWatch(root, map[int]int{1: 3}, slog.New(slog.NewTextHandler(&logs, nil)))

	write(1000, 50)
	w.check()
	if logs.Len() != 0 {
		t.Fatalf("the first check warned: %s", logs.String())
	}
	write(1500, 50) // the disk fired on CPU 1, the NIC did not
	w.check()
	got := logs.String()
	for _, s := range []string{"level=WARN", "cpu=1", "lcore=3", "irq=36", "device=virtio1-req.0", "since_last_check=500", "/proc/irq/36/smp_affinity_list"} {
		if !strings.Contains(got, s) {
			t.Errorf("warning %q lacks %q", got, s)
		}
	}
	if strings.Contains(got, "virtio3-tx") {
		t.Errorf("warned of an interrupt that did not fire: %s", got)
	}
	logs.Reset()
	write(2500, 60)
	w.check()
	if got := logs.String(); strings.Count(got, "level=WARN") != 1 || !strings.Contains(got, "irq=42") {
		t.Errorf("third check: want one warning, for IRQ 42 only: %s", got)
	}
}
