package daemon

import (
	"fmt"
	"log/slog"

	"roce-fwd/numa"
)

// irqWatch warns, once for each interrupt and CPU, when a worker lcore's
// CPU takes a device's interrupts while it forwards: each handler and its
// softirq work (a disk's completions, a kernel NIC's receive) takes the
// worker's cycles and cache in bursts a poll loop cannot plan for.
// Deployments move them off (irqaffinity=, /proc/irq/N/smp_affinity_list,
// isolcpus=managed_irq for the kernel's managed ones), and this says which.
type irqWatch struct {
	root   string      // "/" but in tests
	lcore  map[int]int // worker CPU -> its lcore
	cpus   []int
	log    *slog.Logger
	last   map[[2]int]uint64 // (IRQ, CPU) -> its count at the last check
	warned map[[2]int]bool
	failed bool
}

func newIRQWatch(root string, lcoreOfCPU map[int]int, log *slog.Logger) *irqWatch {
	w := &irqWatch{root: root, lcore: lcoreOfCPU, log: log, warned: map[[2]int]bool{}}
	for c := range lcoreOfCPU {
		w.cpus = append(w.cpus, c)
	}
	return w
}

// check reads the counts; the first call only takes them as they are.
func (w *irqWatch) check() {
	irqs, err := numa.IRQsOn(w.root, w.cpus)
	if err != nil {
		if !w.failed {
			w.log.Debug("cannot watch the worker CPUs' interrupts", "err", err)
			w.failed = true
		}
		return
	}
	first := w.last == nil
	if first {
		w.last = map[[2]int]uint64{}
	}
	for _, q := range irqs {
		k := [2]int{q.Number, q.CPU}
		prev, seen := w.last[k]
		w.last[k] = q.Count
		if first || !seen || q.Count <= prev || w.warned[k] {
			continue
		}
		w.warned[k] = true
		w.log.Warn("a worker lcore's CPU serves a device's interrupts, which take cycles and cache from forwarding",
			"cpu", q.CPU, "lcore", w.lcore[q.CPU], "irq", q.Number, "device", q.Name, "since_last_check", q.Count-prev,
			"fix", fmt.Sprintf("move it to another CPU: echo CPUS > /proc/irq/%d/smp_affinity_list, or irqaffinity= on the kernel command line (isolcpus=managed_irq,CPUS for a managed one)", q.Number))
	}
}
