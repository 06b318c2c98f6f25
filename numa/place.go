package numa

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// SocketAny is the socket of a queue whose device has no NUMA affinity
// (DPDK's SOCKET_ID_ANY, reported by vdevs and by single-node machines).
const SocketAny = -1

// Queue is one RX queue of a port, on the socket the port's NIC sits on.
type Queue struct {
	Port     int
	PortName string
	Queue    int
	Socket   int // SocketAny: unknown, any worker will do
}

// Lcore is an EAL lcore and the socket it runs on.
type Lcore struct {
	ID     int
	Socket int
}

// Worker is a worker lcore and the queues it polls.
type Worker struct {
	Lcore  int
	Socket int
	Queues []Queue
}

// Plan assigns every queue to exactly one worker lcore.
type Plan struct {
	Main     Lcore
	Workers  []Worker // sorted by lcore ID
	Warnings []string // problems that cost performance but still run
}

// Place assigns queues to worker lcores. A queue goes to the least-loaded
// worker on its own socket (ties go to the lowest lcore ID), so that packet
// buffers and descriptors never cross the socket interconnect. A queue whose
// socket has no worker goes to the least-loaded worker anywhere, with a
// warning. maxQueuesPerLcore <= 0 disables the overload warning. topo may be
// nil; when given it is used to suggest concrete -l lists in warnings.
//
// The result depends only on the sets of lcores and queues, not on the order
// they are passed in.
func Place(main Lcore, workers []Lcore, queues []Queue, maxQueuesPerLcore int, topo *Topology) (*Plan, error) {
	if len(workers) == 0 {
		return nil, fmt.Errorf("no worker lcores: give EAL at least two lcores, e.g. -l %s; lcore %d is the main (control) lcore",
			FormatCPUList([]int{main.ID, main.ID + 1}), main.ID)
	}
	if main.ID < 0 {
		return nil, fmt.Errorf("main lcore has invalid id %d", main.ID)
	}
	ws := slices.Clone(workers)
	slices.SortFunc(ws, func(a, b Lcore) int { return a.ID - b.ID })
	for i, w := range ws {
		switch {
		case w.ID < 0:
			return nil, fmt.Errorf("worker lcore has invalid id %d", w.ID)
		case w.ID == main.ID:
			return nil, fmt.Errorf("lcore %d is the main (control) lcore and cannot also be a worker: remove it from the worker lcores (EAL makes the first lcore of -l the main one unless --main-lcore says otherwise)", w.ID)
		case i > 0 && ws[i-1].ID == w.ID:
			return nil, fmt.Errorf("lcore %d is listed twice among the worker lcores", w.ID)
		}
	}
	qs := slices.Clone(queues)
	slices.SortFunc(qs, compareQueues)
	for i := 1; i < len(qs); i++ {
		if qs[i-1].Port == qs[i].Port && qs[i-1].Queue == qs[i].Queue {
			return nil, fmt.Errorf("%s queue %d is listed twice", portLabel(qs[i]), qs[i].Queue)
		}
	}

	p := &Plan{Main: main, Workers: make([]Worker, len(ws))}
	for i, w := range ws {
		p.Workers[i] = Worker{Lcore: w.ID, Socket: w.Socket}
	}
	hasWorker := map[int]bool{}
	for _, w := range ws {
		hasWorker[w.Socket] = true
	}

	// Local queues first so that they balance among themselves; cross-socket
	// and socket-less queues then fill whatever is least loaded.
	var cross []placed
	for _, q := range qs {
		if q.Socket >= 0 && hasWorker[q.Socket] {
			p.assign(q, func(w *Worker) bool { return w.Socket == q.Socket })
		}
	}
	for _, q := range qs {
		if q.Socket >= 0 && !hasWorker[q.Socket] {
			w := p.assign(q, nil)
			cross = append(cross, placed{q, w.Lcore, w.Socket})
		}
	}
	for _, q := range qs {
		if q.Socket < 0 {
			p.assign(q, nil)
		}
	}
	for i := range p.Workers {
		slices.SortFunc(p.Workers[i].Queues, compareQueues)
	}

	used := []int{main.ID}
	for _, w := range ws {
		used = append(used, w.ID)
	}
	perLcore := (len(qs) + len(ws) - 1) / len(ws)
	if maxQueuesPerLcore > 0 && perLcore > maxQueuesPerLcore {
		perLcore = maxQueuesPerLcore
	}
	perLcore = max(perLcore, 1)

	p.warnCrossSocket(cross, used, perLcore, topo)
	p.warnOverload(maxQueuesPerLcore, used, topo)
	p.warnIdle()
	return p, nil
}

type placed struct {
	q      Queue
	lcore  int
	socket int
}

func compareQueues(a, b Queue) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Queue, b.Queue))
}

// assign gives q to the least-loaded eligible worker (lowest ID on ties;
// p.Workers is sorted by ID) and returns it.
func (p *Plan) assign(q Queue, eligible func(*Worker) bool) *Worker {
	var best *Worker
	for i := range p.Workers {
		w := &p.Workers[i]
		if eligible != nil && !eligible(w) {
			continue
		}
		if best == nil || len(w.Queues) < len(best.Queues) {
			best = w
		}
	}
	best.Queues = append(best.Queues, q)
	return best
}

func (p *Plan) warnCrossSocket(cross []placed, used []int, perLcore int, topo *Topology) {
	if len(cross) == 0 {
		return
	}
	// Lcores to suggest per missing socket: enough to keep today's load per lcore.
	perSocket := map[int]int{}
	for _, c := range cross {
		perSocket[c.q.Socket]++
	}
	suggestion := map[int]string{}
	for s, n := range perSocket {
		suggestion[s] = suggestLcores(s, (n+perLcore-1)/perLcore, used, topo)
	}

	// One warning per port: a port has one socket, and per-queue lines
	// would drown the message on NICs with dozens of queues.
	for i := 0; i < len(cross); {
		j := i
		for j < len(cross) && cross[j].q.Port == cross[i].q.Port {
			j++
		}
		group := cross[i:j]
		q0 := group[0].q
		bySocket := map[int]*struct{ queues, lcores []int }{}
		for _, c := range group {
			g := bySocket[c.socket]
			if g == nil {
				g = &struct{ queues, lcores []int }{}
				bySocket[c.socket] = g
			}
			g.queues = append(g.queues, c.q.Queue)
			g.lcores = append(g.lcores, c.lcore)
		}
		var parts []string
		for _, s := range sortedKeys(bySocket) {
			g := bySocket[s]
			parts = append(parts, fmt.Sprintf("%s %s by %s %s on %s",
				plural(len(g.queues), "queue", "queues"), FormatCPUList(g.queues),
				plural(countUnique(g.lcores), "lcore", "lcores"), FormatCPUList(g.lcores),
				socketLabel(s)))
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf(
			"CROSS-SOCKET POLLING: %s is on socket %d but no worker lcore is on socket %d, so it is polled from another socket (%s) and every packet crosses the socket interconnect: lower throughput, higher latency. Fix: %s",
			portLabel(q0), q0.Socket, q0.Socket, strings.Join(parts, "; "), suggestion[q0.Socket]))
		i = j
	}
}

func (p *Plan) warnOverload(limit int, used []int, topo *Topology) {
	if limit <= 0 {
		return
	}
	over := map[int][]Worker{}
	queuesOn := map[int]int{}
	workersOn := map[int]int{}
	for _, w := range p.Workers {
		queuesOn[w.Socket] += len(w.Queues)
		workersOn[w.Socket]++
		if len(w.Queues) > limit {
			over[w.Socket] = append(over[w.Socket], w)
		}
	}
	for _, s := range sortedKeys(over) {
		var each []string
		for _, w := range over[s] {
			each = append(each, fmt.Sprintf("lcore %d polls %d queues", w.Lcore, len(w.Queues)))
		}
		fix := "add worker lcores or use fewer queues per port"
		if s >= 0 {
			need := (queuesOn[s]+limit-1)/limit - workersOn[s]
			fix = suggestLcores(s, max(need, 1), used, topo) + ", or use fewer queues per port"
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf("overloaded lcores on %s: %s, more than the limit of %d per lcore. Fix: %s",
			socketLabel(s), strings.Join(each, ", "), limit, fix))
	}
}

func (p *Plan) warnIdle() {
	idle := map[int][]int{}
	busy := map[int]bool{}
	for _, w := range p.Workers {
		if len(w.Queues) == 0 {
			idle[w.Socket] = append(idle[w.Socket], w.Lcore)
		} else {
			busy[w.Socket] = true
		}
	}
	for _, s := range sortedKeys(idle) {
		ids := idle[s]
		why := "more worker lcores than queues"
		if !busy[s] && s >= 0 {
			why = fmt.Sprintf("no port is on socket %d", s)
		}
		p.Warnings = append(p.Warnings, fmt.Sprintf(
			"idle lcores: worker %s %s on %s %s no queues to poll (%s) and will spin at 100%% CPU for nothing. Fix: remove %s from [eal] args -l",
			plural(len(ids), "lcore", "lcores"), FormatCPUList(ids), socketLabel(s), plural(len(ids), "has", "have"), why,
			plural(len(ids), "it", "them")))
	}
}

// suggestLcores tells how to add n lcores of socket s, naming concrete CPUs
// when the topology is known. DPDK's -l uses CPU ids as lcore ids.
func suggestLcores(s, n int, used []int, topo *Topology) string {
	base := fmt.Sprintf("add lcores of socket %d to [eal] args -l", s)
	if topo == nil {
		return fmt.Sprintf("%s (its CPUs are listed in /sys/devices/system/node/node%d/cpulist)", base, s)
	}
	node, ok := topo.node(s)
	if !ok || len(node.CPUs) == 0 {
		return fmt.Sprintf("%s (the topology shows no CPUs on node %d; check the socket ids of the lcores and ports)", base, s)
	}
	var free []int
	for _, c := range node.CPUs {
		if !slices.Contains(used, c) {
			free = append(free, c)
		}
	}
	if len(free) == 0 {
		return fmt.Sprintf("%s (all CPUs of node %d, %s, are already lcores)", base, s, FormatCPUList(node.CPUs))
	}
	pick := free[:min(n, len(free))]
	return fmt.Sprintf("%s, e.g. -l %s", base, FormatCPUList(append(slices.Clone(used), pick...)))
}

func countUnique(v []int) int {
	c := slices.Clone(v)
	slices.Sort(c)
	return len(slices.Compact(c))
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func socketLabel(s int) string {
	if s < 0 {
		return "an unknown socket"
	}
	return "socket " + strconv.Itoa(s)
}

func portLabel(q Queue) string {
	if q.PortName != "" {
		return fmt.Sprintf("port %d (%s)", q.Port, q.PortName)
	}
	return fmt.Sprintf("port %d", q.Port)
}

func queueLabel(q Queue) string {
	name := q.PortName
	if name == "" {
		name = strconv.Itoa(q.Port)
	}
	sock := "any"
	if q.Socket >= 0 {
		sock = strconv.Itoa(q.Socket)
	}
	return fmt.Sprintf("port %s q%d (socket %s)", name, q.Queue, sock)
}

func socketID(s int) string {
	if s < 0 {
		return "?"
	}
	return strconv.Itoa(s)
}

// String renders the plan as a table followed by its warnings.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "main lcore %d (socket %s)\n", p.Main.ID, socketID(p.Main.Socket))
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "LCORE\tSOCKET\tQUEUES")
	for _, wk := range p.Workers {
		labels := make([]string, len(wk.Queues))
		for i, q := range wk.Queues {
			labels[i] = queueLabel(q)
		}
		qs := strings.Join(labels, ", ")
		if qs == "" {
			qs = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", wk.Lcore, socketID(wk.Socket), qs)
	}
	w.Flush()
	for _, warn := range p.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", warn)
	}
	return b.String()
}
