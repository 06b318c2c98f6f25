package numa

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IRQ is a device interrupt that a CPU serves.
type IRQ struct {
	Number int
	Name   string // the device's action, as /proc/interrupts names it ("virtio1-req.0", "mlx5_comp3@pci:...")
	CPU    int
	Count  uint64 // interrupts the CPU has taken since boot
}

// IRQsOn returns the device interrupts that the CPUs in cpus serve: those
// whose effective affinity (/proc/irq/N/effective_affinity_list) holds
// one of them and that the CPU has taken at least once, in IRQ and CPU
// order. A worker lcore's CPU that takes a disk's or a NIC's interrupts
// loses the cycles of each handler and its softirq work (a direct write's
// completion, for one) and the cache lines they touch, in bursts a poll
// loop cannot plan for.
func IRQsOn(root string, cpus []int) ([]IRQ, error) {
	f, err := os.Open(filepath.Join(root, "proc/interrupts"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: empty", f.Name())
	}
	var cols []int // the CPU of each count column
	for _, h := range strings.Fields(sc.Text()) {
		c, err := strconv.Atoi(strings.TrimPrefix(h, "CPU"))
		if err != nil || !strings.HasPrefix(h, "CPU") {
			return nil, fmt.Errorf("%s: header %q: want CPU columns", f.Name(), sc.Text())
		}
		cols = append(cols, c)
	}
	var out []IRQ
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 1+len(cols) {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(fields[0], ":"))
		if err != nil {
			continue // NMI, LOC, RES...: not a device's
		}
		// After the counts: the chip, the hardware IRQ and its trigger,
		// then the actions' names.
		name := ""
		if rest := fields[1+len(cols):]; len(rest) > 2 {
			name = strings.Join(rest[2:], " ")
		} else if len(rest) > 0 {
			name = rest[len(rest)-1]
		}
		var eff []int
		for _, c := range cpus {
			k := slices.Index(cols, c)
			if k < 0 {
				continue
			}
			count, err := strconv.ParseUint(fields[1+k], 10, 64)
			if err != nil || count == 0 {
				continue
			}
			if eff == nil {
				b, err := os.ReadFile(filepath.Join(root, "proc/irq", strconv.Itoa(n), "effective_affinity_list"))
				if err != nil {
					break // gone, or a kernel without the file: the count alone says too little
				}
				if eff, err = ParseCPUList(string(b)); err != nil {
					return nil, fmt.Errorf("IRQ %d: %w", n, err)
				}
			}
			if slices.Contains(eff, c) {
				out = append(out, IRQ{Number: n, Name: name, CPU: c, Count: count})
			}
		}
	}
	return out, sc.Err()
}
