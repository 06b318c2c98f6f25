package numa

import (
	"path/filepath"
	"reflect"
	"testing"

	"roce-fwd/internal/fixture"
)

// An interrupt is reported for a worker CPU when its effective affinity
// holds the CPU and the CPU has taken it: not when it fired there once
// and now goes elsewhere, not for a CPU outside the list, and never for
// the per-CPU counters (LOC, NMI) that have no IRQ number.
func TestIRQsOn(t *testing.T) {
	root := t.TempDir()
	fixture.WriteFile(t, filepath.Join(root, "proc/interrupts"), `           CPU0       CPU1       CPU2       
 24:          1          0          0  IO-APIC   5-edge      ACPI:Ged
 31:          0       4900          0  PCI-MSIX-0000:00:01.0   3-edge      virtio0-stats
 36:          0    1418860         12  PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 41:       6464          0          0  PCI-MSIX-0000:00:04.0   1-edge      virtio3-rx
 42:          0      24941          0  PCI-MSIX-0000:00:04.0   2-edge      virtio3-tx
 50:          0          7          0  IR-PCI-MSI 1048576-edge      i8042, serio
NMI:          0          0          0   Non-maskable interrupts
LOC:   26335206   17338662   1000   Local timer interrupts
`)
	for irq, eff := range map[string]string{"24": "0", "31": "1", "36": "1-2", "41": "0", "42": "0\n", "50": "1\n"} {
		fixture.WriteFile(t, filepath.Join(root, "proc/irq", irq, "effective_affinity_list"), eff)
	}
	got, err := IRQsOn(root, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []IRQ{
		{Number: 31, Name: "virtio0-stats", CPU: 1, Count: 4900},
		{Number: 36, Name: "virtio1-req.0", CPU: 1, Count: 1418860},
		{Number: 36, Name: "virtio1-req.0", CPU: 2, Count: 12},
		{Number: 50, Name: "i8042, serio", CPU: 1, Count: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("IRQsOn:\n got %+v\nwant %+v", got, want)
	}
	if got, err := IRQsOn(root, []int{5}); err != nil || len(got) != 0 {
		t.Errorf("a CPU /proc/interrupts does not list: %+v, %v", got, err)
	}

	fixture.WriteFile(t, filepath.Join(root, "proc/irq/31/effective_affinity_list"), "1-x")
	if _, err := IRQsOn(root, []int{1}); err == nil {
		t.Error("a corrupt affinity list: no error")
	}
	if _, err := IRQsOn(t.TempDir(), []int{1}); err == nil {
		t.Error("no /proc/interrupts: no error")
	}
}
