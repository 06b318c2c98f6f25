package numa

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"roce-fwd/internal/fixture"
)

func TestParseCPUList(t *testing.T) {
	good := []struct {
		in   string
		want []int
	}{
		{"", []int{}},
		{"\n", []int{}},
		{"0", []int{0}},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}},
		{" 4-5 , 1 ", []int{1, 4, 5}},
		{"3,1-2,2", []int{1, 2, 3}},
		{"7-7", []int{7}},
	}
	for _, c := range good {
		got, err := ParseCPUList(c.in)
		if err != nil {
			t.Errorf("ParseCPUList(%q): %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseCPUList(%q) = %v, want %v", c.in, got, c.want)
		}
	}
	bad := []string{"a", "1,,2", "3-1", "-1", "1-", "0x3", "1 2", "+3", "99999999999", "1,"}
	for _, in := range bad {
		if got, err := ParseCPUList(in); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want error", in, got)
		} else if !strings.Contains(err.Error(), "cpu list") {
			t.Errorf("ParseCPUList(%q) error %q does not say what was parsed", in, err)
		}
	}
}

func TestFormatCPUList(t *testing.T) {
	cases := []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{5}, "5"},
		{[]int{0, 1, 2, 3, 8, 10, 11}, "0-3,8,10-11"},
		{[]int{11, 10, 3, 3, 2, 1, 0, 8}, "0-3,8,10-11"},
	}
	for _, c := range cases {
		if got := FormatCPUList(c.in); got != c.want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", c.in, got, c.want)
		}
		if c.in != nil {
			back, err := ParseCPUList(c.want)
			if err != nil || FormatCPUList(back) != c.want {
				t.Errorf("round trip of %q failed: %v %v", c.want, back, err)
			}
		}
	}
}

type fixNode struct {
	id              int
	cpus            string
	totalKB, freeKB uint64
}

var writeFile = fixture.WriteFile

// buildTree writes a sysfs fixture with the given NUMA nodes.
func buildTree(t *testing.T, nodes []fixNode) string {
	t.Helper()
	root := t.TempDir()
	nodeDir := filepath.Join(root, "sys/devices/system/node")
	var all []string
	for _, n := range nodes {
		dir := filepath.Join(nodeDir, fmt.Sprintf("node%d", n.id))
		writeFile(t, filepath.Join(dir, "cpulist"), n.cpus+"\n")
		writeFile(t, filepath.Join(dir, "meminfo"), fmt.Sprintf(
			"Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\nNode %d MemUsed:        %d kB\nNode %d HugePages_Total:     0\n",
			n.id, n.totalKB, n.id, n.freeKB, n.id, n.totalKB-n.freeKB, n.id))
		all = append(all, n.cpus)
	}
	// Files that live next to the node directories and must be skipped.
	writeFile(t, filepath.Join(nodeDir, "online"), "0-1\n")
	writeFile(t, filepath.Join(nodeDir, "has_cpu"), "0-1\n")
	writeFile(t, filepath.Join(root, "sys/devices/system/cpu/online"), strings.Join(all, ",")+"\n")
	return root
}

func TestReadOneNode(t *testing.T) {
	root := buildTree(t, []fixNode{{0, "0-7", 16 << 20, 8 << 20}})
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{ID: 0, CPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, MemTotal: 16 << 30, MemFree: 8 << 30}}
	if !reflect.DeepEqual(topo.Nodes, want) {
		t.Errorf("nodes = %+v, want %+v", topo.Nodes, want)
	}
}

func TestReadTwoNodes(t *testing.T) {
	root := buildTree(t, []fixNode{
		{1, "24-47,72-95", 100 << 20, 50 << 20},
		{0, "0-23,48-71", 200 << 20, 150 << 20},
	})
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) != 2 || topo.Nodes[0].ID != 0 || topo.Nodes[1].ID != 1 {
		t.Fatalf("nodes not sorted by id: %+v", topo.Nodes)
	}
	if got := FormatCPUList(topo.Nodes[1].CPUs); got != "24-47,72-95" {
		t.Errorf("node 1 cpus = %s", got)
	}
	if topo.Nodes[0].MemTotal != 200<<30 || topo.Nodes[0].MemFree != 150<<30 {
		t.Errorf("node 0 memory = %d/%d", topo.Nodes[0].MemTotal, topo.Nodes[0].MemFree)
	}
	for cpu, want := range map[int]int{0: 0, 23: 0, 24: 1, 71: 0, 95: 1} {
		if got, ok := topo.NodeOfCPU(cpu); !ok || got != want {
			t.Errorf("NodeOfCPU(%d) = %d, %v; want %d", cpu, got, ok, want)
		}
	}
	if _, ok := topo.NodeOfCPU(96); ok {
		t.Error("NodeOfCPU(96) found a node")
	}
	s := topo.String()
	for _, want := range []string{"NODE", "0-23,48-71", "24-47,72-95", "200.0 GiB", "50.0 GiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

func TestReadFourNodesWithMemoryOnlyNode(t *testing.T) {
	root := buildTree(t, []fixNode{
		{0, "0-15", 64 << 20, 60 << 20},
		{1, "16-31", 64 << 20, 60 << 20},
		{2, "32-47", 64 << 20, 60 << 20},
		{3, "", 256 << 20, 256 << 20}, // CXL memory expander: no CPUs
	})
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Nodes) != 4 {
		t.Fatalf("got %d nodes", len(topo.Nodes))
	}
	if len(topo.Nodes[3].CPUs) != 0 || topo.Nodes[3].MemTotal != 256<<30 {
		t.Errorf("node 3 = %+v", topo.Nodes[3])
	}
	if n, _ := topo.NodeOfCPU(40); n != 2 {
		t.Errorf("NodeOfCPU(40) = %d", n)
	}
}

func TestReadNonNUMA(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "sys/devices/system/cpu/online"), "0-3\n")
	writeFile(t, filepath.Join(root, "proc/meminfo"), "MemTotal:        8000000 kB\nMemFree:         4000000 kB\nMemAvailable:    6000000 kB\n")
	topo, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []Node{{ID: 0, CPUs: []int{0, 1, 2, 3}, MemTotal: 8000000 * 1024, MemFree: 4000000 * 1024}}
	if !reflect.DeepEqual(topo.Nodes, want) {
		t.Errorf("nodes = %+v, want %+v", topo.Nodes, want)
	}

	// Without /proc the CPUs are still enough.
	root = t.TempDir()
	writeFile(t, filepath.Join(root, "sys/devices/system/cpu/online"), "0\n")
	if topo, err = Read(root); err != nil || len(topo.Nodes) != 1 || topo.Nodes[0].MemTotal != 0 {
		t.Errorf("Read without /proc = %+v, %v", topo, err)
	}
}

func TestReadErrorsNameTheFile(t *testing.T) {
	root := buildTree(t, []fixNode{{0, "0-3", 1024, 512}})
	writeFile(t, filepath.Join(root, "sys/devices/system/node/node0/cpulist"), "0-x\n")
	_, err := Read(root)
	if err == nil || !strings.Contains(err.Error(), "node0/cpulist") || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("bad cpulist: err = %v", err)
	}

	root = buildTree(t, []fixNode{{0, "0-3", 1024, 512}})
	writeFile(t, filepath.Join(root, "sys/devices/system/node/node0/meminfo"), "Node 0 MemTotal: lots kB\n")
	_, err = Read(root)
	if err == nil || !strings.Contains(err.Error(), "node0/meminfo") || !strings.Contains(err.Error(), "MemTotal") {
		t.Errorf("bad meminfo: err = %v", err)
	}

	root = buildTree(t, []fixNode{{0, "0-3", 1024, 512}})
	os.Remove(filepath.Join(root, "sys/devices/system/node/node0/meminfo"))
	if _, err = Read(root); err == nil || !strings.Contains(err.Error(), "node0/meminfo") {
		t.Errorf("missing meminfo: err = %v", err)
	}

	if _, err = Read(t.TempDir()); err == nil || !strings.Contains(err.Error(), "cpu/online") {
		t.Errorf("empty root: err = %v", err)
	}
}

func twoSocketTopo(t *testing.T) *Topology {
	t.Helper()
	topo, err := Read(buildTree(t, []fixNode{
		{0, "0-23", 1 << 20, 1 << 20},
		{1, "24-47", 1 << 20, 1 << 20},
	}))
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func portQueues(port int, name string, socket, n int) []Queue {
	var qs []Queue
	for q := 0; q < n; q++ {
		qs = append(qs, Queue{Port: port, PortName: name, Queue: q, Socket: socket})
	}
	return qs
}

// assignment maps "port/queue" to the lcore that polls it.
func assignment(p *Plan) map[string]int {
	m := map[string]int{}
	for _, w := range p.Workers {
		for _, q := range w.Queues {
			m[fmt.Sprintf("%d/%d", q.Port, q.Queue)] = w.Lcore
		}
	}
	return m
}

func TestPlaceTwoSocketsBalanced(t *testing.T) {
	workers := []Lcore{{1, 0}, {2, 0}, {24, 1}, {25, 1}}
	queues := append(portQueues(0, "in", 0, 4), portQueues(1, "out", 1, 4)...)
	p, err := Place(Lcore{0, 0}, workers, queues, 4, twoSocketTopo(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", p.Warnings)
	}
	want := map[string]int{
		"0/0": 1, "0/1": 2, "0/2": 1, "0/3": 2,
		"1/0": 24, "1/1": 25, "1/2": 24, "1/3": 25,
	}
	if got := assignment(p); !reflect.DeepEqual(got, want) {
		t.Errorf("assignment = %v, want %v", got, want)
	}
	s := p.String()
	for _, want := range []string{"main lcore 0 (socket 0)", "port in q0 (socket 0), port in q2 (socket 0)", "port out q1 (socket 1), port out q3 (socket 1)"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

func TestPlaceMixesPortsPerLcore(t *testing.T) {
	// Two ports on one socket: each lcore gets the same queue index of both
	// ports, the usual run-to-completion layout.
	workers := []Lcore{{1, 0}, {2, 0}}
	queues := append(portQueues(0, "", 0, 2), portQueues(1, "", 0, 2)...)
	p, err := Place(Lcore{0, 0}, workers, queues, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"0/0": 1, "0/1": 2, "1/0": 1, "1/1": 2}
	if got := assignment(p); !reflect.DeepEqual(got, want) {
		t.Errorf("assignment = %v, want %v", got, want)
	}
}

func TestPlaceCrossSocketWarning(t *testing.T) {
	workers := []Lcore{{1, 0}, {2, 0}}
	queues := append(portQueues(0, "in", 0, 2), portQueues(1, "out", 1, 2)...)
	p, err := Place(Lcore{0, 0}, workers, queues, 0, twoSocketTopo(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(assignment(p)); got != 4 {
		t.Fatalf("%d queues placed, want 4", got)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", p.Warnings)
	}
	w := p.Warnings[0]
	for _, want := range []string{
		"CROSS-SOCKET", "port 1 (out) is on socket 1", "no worker lcore is on socket 1",
		"queues 0-1 by lcores 1-2 on socket 0",
		"add lcores of socket 1 to [eal] args -l, e.g. -l 0-2,24",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "-l 0-2,24-") {
		t.Errorf("suggested more lcores than needed: %s", w)
	}

	// Without a topology the fix points at sysfs instead of guessing CPUs.
	p, err = Place(Lcore{0, 0}, workers, queues, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "/sys/devices/system/node/node1/cpulist") {
		t.Errorf("warnings without topology = %q", p.Warnings)
	}
	if !strings.Contains(p.String(), "WARNING: CROSS-SOCKET") {
		t.Errorf("String() does not show the warning:\n%s", p)
	}
}

func TestPlaceOverloadWarning(t *testing.T) {
	p, err := Place(Lcore{0, 0}, []Lcore{{1, 0}}, portQueues(0, "", 0, 5), 4, twoSocketTopo(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", p.Warnings)
	}
	w := p.Warnings[0]
	for _, want := range []string{"lcore 1 polls 5 queues", "limit of 4", "socket 0", "-l 0-2"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning lacks %q:\n%s", want, w)
		}
	}
	// At the limit there is nothing to say.
	p, _ = Place(Lcore{0, 0}, []Lcore{{1, 0}}, portQueues(0, "", 0, 4), 4, nil)
	if len(p.Warnings) != 0 {
		t.Errorf("warnings at the limit: %q", p.Warnings)
	}
}

func TestPlaceUnknownSocketQueues(t *testing.T) {
	workers := []Lcore{{1, 0}, {24, 1}}
	queues := append(portQueues(0, "net_null0", SocketAny, 2), portQueues(1, "net_null1", SocketAny, 2)...)
	p, err := Place(Lcore{0, 0}, workers, queues, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 0 {
		t.Errorf("unexpected warnings: %q", p.Warnings)
	}
	for _, w := range p.Workers {
		if len(w.Queues) != 2 {
			t.Errorf("lcore %d has %d queues, want 2", w.Lcore, len(w.Queues))
		}
	}
	if !strings.Contains(p.String(), "port net_null0 q0 (socket any)") {
		t.Errorf("String():\n%s", p)
	}
}

func TestPlaceUnknownSocketQueuesFillLightestWorker(t *testing.T) {
	workers := []Lcore{{1, 0}, {2, 0}}
	queues := append(portQueues(0, "", 0, 1), Queue{Port: 1, Queue: 0, Socket: SocketAny})
	p, err := Place(Lcore{0, 0}, workers, queues, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := assignment(p); got["0/0"] != 1 || got["1/0"] != 2 {
		t.Errorf("assignment = %v", got)
	}
}

func TestPlaceIdleSocketWarning(t *testing.T) {
	workers := []Lcore{{1, 0}, {24, 1}, {25, 1}}
	p, err := Place(Lcore{0, 0}, workers, portQueues(0, "", 0, 2), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", p.Warnings)
	}
	for _, want := range []string{"lcores 24-25 on socket 1", "no port is on socket 1", "remove them"} {
		if !strings.Contains(p.Warnings[0], want) {
			t.Errorf("warning lacks %q: %s", want, p.Warnings[0])
		}
	}

	// Spare lcores on a socket that does have queues.
	p, _ = Place(Lcore{0, 0}, []Lcore{{1, 0}, {2, 0}, {3, 0}}, portQueues(0, "", 0, 2), 0, nil)
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "lcore 3 on socket 0 has no queues") {
		t.Errorf("warnings = %q", p.Warnings)
	}
}

func TestPlaceDeterministic(t *testing.T) {
	workers := []Lcore{{1, 0}, {2, 0}, {3, 0}, {24, 1}, {25, 1}}
	var queues []Queue
	queues = append(queues, portQueues(0, "a", 0, 5)...)
	queues = append(queues, portQueues(1, "b", 1, 3)...)
	queues = append(queues, portQueues(2, "c", SocketAny, 3)...)
	queues = append(queues, portQueues(3, "d", 2, 2)...)
	topo := twoSocketTopo(t)
	first, err := Place(Lcore{0, 0}, workers, queues, 2, topo)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		w := append([]Lcore(nil), workers...)
		q := append([]Queue(nil), queues...)
		// Deterministic permutations: rotate and reverse.
		rot := i % len(q)
		q = append(q[rot:], q[:rot]...)
		if i%2 == 1 {
			for a, b := 0, len(w)-1; a < b; a, b = a+1, b-1 {
				w[a], w[b] = w[b], w[a]
			}
		}
		p, err := Place(Lcore{0, 0}, w, q, 2, topo)
		if err != nil {
			t.Fatal(err)
		}
		if p.String() != first.String() {
			t.Fatalf("permutation %d changed the plan:\n%s\nvs\n%s", i, p, first)
		}
	}
	if got := len(assignment(first)); got != len(queues) {
		t.Errorf("%d queues placed, want %d", got, len(queues))
	}
}

func TestPlaceErrors(t *testing.T) {
	cases := []struct {
		name    string
		main    Lcore
		workers []Lcore
		queues  []Queue
		want    string
	}{
		{"no workers", Lcore{0, 0}, nil, portQueues(0, "", 0, 1),
			"no worker lcores: give EAL at least two lcores, e.g. -l 0-1; lcore 0 is the main (control) lcore"},
		{"main is a worker", Lcore{0, 0}, []Lcore{{0, 0}, {1, 0}}, nil, "lcore 0 is the main (control) lcore and cannot also be a worker"},
		{"duplicate", Lcore{0, 0}, []Lcore{{2, 0}, {1, 0}, {2, 0}}, nil, "lcore 2 is listed twice"},
		{"duplicate queue", Lcore{0, 0}, []Lcore{{1, 0}}, append(portQueues(0, "in", 0, 1), portQueues(0, "in", 0, 1)...), "port 0 (in) queue 0 is listed twice"},
		{"negative", Lcore{0, 0}, []Lcore{{-1, 0}}, nil, "invalid id -1"},
	}
	for _, c := range cases {
		_, err := Place(c.main, c.workers, c.queues, 0, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}
