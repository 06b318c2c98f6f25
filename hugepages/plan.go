package hugepages

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Plan is how EAL should get its memory.
type Plan struct {
	PageSize  uint64 // bytes
	HugeDir   string // hugetlbfs mount of PageSize; "" if there is none
	PerSocket []SocketPlan
	EALArgs   []string
	NoHuge    bool // hugepages are unusable: EAL runs on ordinary memory
	Warnings  []string
}

// SocketPlan is the need and supply of hugepages on one socket.
type SocketPlan struct {
	Socket      int
	NeedBytes   uint64
	PagesNeeded uint64
	PagesFree   uint64
	PagesTotal  uint64
	OK          bool
}

// fallbackPageSize is used when the kernel reports no page size at all:
// 2 MiB is the x86-64 and arm64 (4K granule) default.
const fallbackPageSize = 2 * mib

// MakePlan works out the EAL memory arguments for demands. wantPageSize 0
// picks the largest page size that satisfies every socket (1 GiB pages mean
// fewer TLB misses); if none does, the kernel's default size is planned for,
// since those are the pages that can usually still be reserved at runtime.
// When hugepages cannot cover the demand, the plan falls back to --no-huge
// and says why and how to fix it.
func MakePlan(st *State, demands []Demand, wantPageSize uint64) Plan {
	if st == nil {
		st = &State{}
	}
	need := map[int]uint64{}
	if len(demands) == 0 {
		need[0] = 0
	}
	for _, d := range demands {
		need[max(d.Socket, 0)] += variableBytes(d)
	}
	maxSocket := 0
	for s := range need {
		maxSocket = max(maxSocket, s)
	}
	sockets := make([]int, 0, len(need))
	for s := range need {
		sockets = append(sockets, s)
	}
	slices.Sort(sockets)

	build := func(ps uint64) Plan {
		p := Plan{PageSize: ps}
		if m, ok := st.mount(ps); ok {
			p.HugeDir = m.Path
		}
		for _, s := range sockets {
			pool, _, _ := st.pool(s, ps)
			sp := SocketPlan{Socket: s, NeedBytes: finish(need[s]), PagesFree: pool.Free, PagesTotal: pool.Total}
			sp.PagesNeeded = (sp.NeedBytes + ps - 1) / ps
			sp.OK = sp.PagesFree >= sp.PagesNeeded
			p.PerSocket = append(p.PerSocket, sp)
		}
		return p
	}
	usable := func(p Plan) bool {
		if p.HugeDir == "" {
			return false
		}
		for _, sp := range p.PerSocket {
			if !sp.OK {
				return false
			}
		}
		return true
	}

	var p Plan
	if wantPageSize != 0 {
		p = build(wantPageSize)
	} else {
		found := false
		for _, ps := range st.pageSizes() {
			if p = build(ps); usable(p) {
				found = true
				break
			}
		}
		if !found {
			ps := st.DefaultPageSize
			if ps == 0 {
				if sizes := st.pageSizes(); len(sizes) > 0 {
					ps = sizes[0]
				} else {
					ps = fallbackPageSize
				}
			}
			p = build(ps)
		}
	}

	if usable(p) {
		mem := make([]string, maxSocket+1)
		for i := range mem {
			mem[i] = "0"
		}
		for _, sp := range p.PerSocket {
			mem[sp.Socket] = strconv.FormatUint(sp.NeedBytes/mib, 10)
		}
		p.EALArgs = []string{"--socket-mem", strings.Join(mem, ","), "--huge-dir", p.HugeDir}
		return p
	}

	p.NoHuge = true
	var total uint64
	for _, sp := range p.PerSocket {
		total += sp.NeedBytes
	}
	p.EALArgs = []string{"--no-huge", "-m", strconv.FormatUint(total/mib, 10)}
	p.Warnings = p.missing(st)
	p.Warnings = append(p.Warnings, fmt.Sprintf(
		"falling back to --no-huge -m %d: that memory is not physically contiguous and is not usable by real NICs for DMA; only vdevs such as net_null, net_tap, net_pcap and net_af_packet will work",
		total/mib))
	return p
}

// missing explains, one line per problem, why p cannot use hugepages.
func (p Plan) missing(st *State) []string {
	size := FormatSize(p.PageSize)
	var w []string
	if p.HugeDir == "" {
		w = append(w, fmt.Sprintf(
			"no hugetlbfs mount with %s pages in /proc/mounts. Fix: sudo roce-fwd hugepages --reserve, or mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=%s nodev /dev/hugepages",
			size, kernelSize(p.PageSize)))
	}
	if len(st.Pools) == 0 {
		w = append(w, "no hugepage pools found under /sys/kernel/mm/hugepages or /sys/devices/system/node (kernel without hugetlbfs, or a container hiding /sys)")
	}
	for _, sp := range p.PerSocket {
		if sp.OK {
			continue
		}
		_, perNode, exists := st.pool(sp.Socket, p.PageSize)
		dir := fmt.Sprintf("/sys/devices/system/node/node%d/hugepages/hugepages-%dkB", sp.Socket, p.PageSize>>10)
		if !perNode && sp.Socket == 0 {
			dir = fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB", p.PageSize>>10)
		}
		if perNode && !exists {
			w = append(w, fmt.Sprintf(
				"socket %d has no %s hugepage pool (%s does not exist): the machine has no NUMA node %d; check the socket ids of the ports",
				sp.Socket, size, dir, sp.Socket))
			continue
		}
		if !exists && len(st.Pools) > 0 {
			w = append(w, fmt.Sprintf(
				"the kernel offers no %s hugepages (%s does not exist): this CPU or kernel does not support that page size; choose one of %s",
				size, dir, st.sizeList()))
			break
		}
		file := dir + "/nr_hugepages"
		msg := fmt.Sprintf(
			"not enough free %s hugepages on socket %d: need %d (%d MiB), free %d of %d. Fix: sudo roce-fwd hugepages --reserve, or echo %d > %s",
			size, sp.Socket, sp.PagesNeeded, sp.NeedBytes/mib, sp.PagesFree, sp.PagesTotal,
			sp.PagesTotal+sp.PagesNeeded-sp.PagesFree, file)
		if p.PageSize >= 1<<30 {
			msg += fmt.Sprintf(" (%s pages can rarely be found at runtime; reserve them at boot with hugepagesz=%s hugepages=<count> on the kernel command line)",
				size, kernelSize(p.PageSize))
		}
		w = append(w, msg)
	}
	return w
}

// pageSizes lists the page sizes the kernel offers, largest first.
func (st *State) pageSizes() []uint64 {
	var sizes []uint64
	for _, p := range st.Pools {
		sizes = append(sizes, p.PageSize)
	}
	for _, m := range st.Mounts {
		if m.PageSize != 0 {
			sizes = append(sizes, m.PageSize)
		}
	}
	slices.Sort(sizes)
	sizes = slices.Compact(sizes)
	slices.Reverse(sizes)
	return sizes
}

func (st *State) sizeList() string {
	var names []string
	for _, ps := range st.pageSizes() {
		names = append(names, FormatSize(ps))
	}
	return strings.Join(names, ", ")
}

// String renders the plan for `roce-fwd hugepages`.
func (p Plan) String() string {
	var b strings.Builder
	dir := p.HugeDir
	if dir == "" {
		dir = "none"
	}
	fmt.Fprintf(&b, "page size %s, hugetlbfs mount: %s\n", FormatSize(p.PageSize), dir)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "SOCKET\tNEED\tPAGES NEEDED\tFREE\tTOTAL\tOK")
	for _, sp := range p.PerSocket {
		ok := "yes"
		if !sp.OK {
			ok = "NO"
		}
		fmt.Fprintf(w, "%d\t%d MiB\t%d\t%d\t%d\t%s\n", sp.Socket, sp.NeedBytes/mib, sp.PagesNeeded, sp.PagesFree, sp.PagesTotal, ok)
	}
	w.Flush()
	fmt.Fprintf(&b, "EAL args: %s\n", strings.Join(p.EALArgs, " "))
	for _, warn := range p.Warnings {
		fmt.Fprintf(&b, "WARNING: %s\n", warn)
	}
	return b.String()
}
