package numa

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Node is one NUMA node (a socket on most servers; AMD NPS modes and
// sub-NUMA clustering give several nodes per socket).
type Node struct {
	ID       int
	CPUs     []int
	MemTotal uint64 // bytes
	MemFree  uint64 // bytes
}

// Topology lists the NUMA nodes of the machine, sorted by ID.
type Topology struct {
	Nodes []Node
}

// Read reads the topology under root (normally "/"). A kernel built without
// NUMA support has no sys/devices/system/node directory; the machine is then
// reported as a single node 0 holding every online CPU, with its memory taken
// from proc/meminfo when that is readable.
func Read(root string) (*Topology, error) {
	nodeDir := filepath.Join(root, "sys/devices/system/node")
	entries, err := os.ReadDir(nodeDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("numa: %v", err)
	}
	t := &Topology{}
	for _, e := range entries {
		id, ok := nodeID(e.Name())
		if !ok {
			continue
		}
		n, err := readNode(filepath.Join(nodeDir, e.Name()), id)
		if err != nil {
			return nil, err
		}
		t.Nodes = append(t.Nodes, n)
	}
	if len(t.Nodes) == 0 {
		n, err := readFlatNode(root)
		if err != nil {
			return nil, err
		}
		t.Nodes = []Node{n}
	}
	slices.SortFunc(t.Nodes, func(a, b Node) int { return a.ID - b.ID })
	return t, nil
}

// nodeID accepts "node12" but not "node" or "node_x"; the node directory
// also holds files such as "online" and "has_cpu".
func nodeID(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "node")
	if !ok || s == "" {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	id, err := strconv.Atoi(s)
	return id, err == nil
}

func readNode(dir string, id int) (Node, error) {
	n := Node{ID: id}
	path := filepath.Join(dir, "cpulist")
	b, err := os.ReadFile(path)
	if err != nil {
		return n, fmt.Errorf("numa: node %d: %v", id, err)
	}
	if n.CPUs, err = ParseCPUList(string(b)); err != nil {
		return n, fmt.Errorf("numa: %s: %v", path, err)
	}
	n.MemTotal, n.MemFree, err = readMeminfo(filepath.Join(dir, "meminfo"), fmt.Sprintf("Node %d ", id))
	return n, err
}

func readFlatNode(root string) (Node, error) {
	n := Node{ID: 0}
	path := filepath.Join(root, "sys/devices/system/cpu/online")
	b, err := os.ReadFile(path)
	if err != nil {
		return n, fmt.Errorf("numa: no NUMA node directory and cannot list online CPUs: %v", err)
	}
	if n.CPUs, err = ParseCPUList(string(b)); err != nil {
		return n, fmt.Errorf("numa: %s: %v", path, err)
	}
	// Memory is informational only, so a hidden /proc is not fatal here.
	mi := filepath.Join(root, "proc/meminfo")
	if _, err := os.Stat(mi); err == nil {
		n.MemTotal, n.MemFree, err = readMeminfo(mi, "")
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// readMeminfo extracts MemTotal and MemFree from a node meminfo file (lines
// prefixed "Node 0 ") or from /proc/meminfo (prefix "").
func readMeminfo(path, prefix string) (total, free uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("numa: %v", err)
	}
	defer f.Close()
	var seenTotal bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), prefix)
		if !ok {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "MemTotal" && key != "MemFree") {
			continue
		}
		v, err := parseKB(val)
		if err != nil {
			return 0, 0, fmt.Errorf("numa: %s: %s: %v", path, key, err)
		}
		if key == "MemTotal" {
			total, seenTotal = v, true
		} else {
			free = v
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, fmt.Errorf("numa: %s: %v", path, err)
	}
	if !seenTotal {
		return 0, 0, fmt.Errorf("numa: %s: no %sMemTotal line", path, prefix)
	}
	return total, free, nil
}

// parseKB parses "  123456 kB" into bytes.
func parseKB(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 2 || (len(f) == 2 && f[1] != "kB") {
		return 0, fmt.Errorf("value %q is not of the form \"<n> kB\"", strings.TrimSpace(s))
	}
	v, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || v > (1<<64-1)/1024 {
		return 0, fmt.Errorf("value %q is not a number of kB", f[0])
	}
	return v * 1024, nil
}

// NodeOfCPU returns the node that holds cpu.
func (t *Topology) NodeOfCPU(cpu int) (int, bool) {
	if t == nil {
		return 0, false
	}
	for _, n := range t.Nodes {
		if _, ok := slices.BinarySearch(n.CPUs, cpu); ok {
			return n.ID, true
		}
	}
	return 0, false
}

// node returns the node with the given ID.
func (t *Topology) node(id int) (Node, bool) {
	if t == nil {
		return Node{}, false
	}
	for _, n := range t.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// String renders the topology as a table for operators.
func (t *Topology) String() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tCPUS\tNCPU\tMEM TOTAL\tMEM FREE")
	for _, n := range t.Nodes {
		cpus := FormatCPUList(n.CPUs)
		if cpus == "" {
			cpus = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", n.ID, cpus, len(n.CPUs), formatBytes(n.MemTotal), formatBytes(n.MemFree))
	}
	w.Flush()
	return b.String()
}

func formatBytes(v uint64) string {
	const (
		mib = 1 << 20
		gib = 1 << 30
	)
	switch {
	case v >= gib:
		return fmt.Sprintf("%.1f GiB", float64(v)/gib)
	default:
		return fmt.Sprintf("%.1f MiB", float64(v)/mib)
	}
}

// CPUs lists every CPU of every node.
func (t *Topology) CPUs() []int {
	var cpus []int
	for _, n := range t.Nodes {
		cpus = append(cpus, n.CPUs...)
	}
	slices.Sort(cpus)
	return cpus
}
