package hugepages

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	fsfix "roce-fwd/internal/fixture"
)

const (
	kB2M = 2048
	kB1G = 1048576
)

type pages struct{ total, free uint64 }

// fixture describes a hugepage sysfs/procfs tree.
type fixture struct {
	mounts    string             // proc/mounts; "" leaves the file out
	defaultKB uint64             // Hugepagesize in proc/meminfo; 0 leaves it out
	global    map[uint64]pages   // by page size in kB
	nodes     []map[uint64]pages // index = node id
}

var writeFile = fsfix.WriteFile

func writePools(t *testing.T, dir string, pools map[uint64]pages) {
	for kb, p := range pools {
		d := filepath.Join(dir, fmt.Sprintf("hugepages-%dkB", kb))
		writeFile(t, filepath.Join(d, "nr_hugepages"), fmt.Sprintf("%d\n", p.total))
		writeFile(t, filepath.Join(d, "free_hugepages"), fmt.Sprintf("%d\n", p.free))
		writeFile(t, filepath.Join(d, "surplus_hugepages"), "0\n")
	}
}

func (f fixture) build(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	if f.mounts != "" {
		writeFile(t, filepath.Join(root, "proc/mounts"), f.mounts)
	}
	if f.defaultKB != 0 {
		writeFile(t, filepath.Join(root, "proc/meminfo"), fmt.Sprintf(
			"MemTotal:       263782552 kB\nHugePages_Total:       0\nHugepagesize:       %d kB\nHugetlb:               0 kB\n", f.defaultKB))
	}
	writePools(t, filepath.Join(root, "sys/kernel/mm/hugepages"), f.global)
	for id, pools := range f.nodes {
		nodeDir := filepath.Join(root, "sys/devices/system/node", fmt.Sprintf("node%d", id))
		writeFile(t, filepath.Join(nodeDir, "cpulist"), "0\n")
		writePools(t, filepath.Join(nodeDir, "hugepages"), pools)
	}
	return root
}

func read(t *testing.T, root string) *State {
	t.Helper()
	st, err := Read(root)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const procMounts2M = "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n" +
	"tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0\n" +
	"hugetlbfs /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0\n"

func TestReadNothing(t *testing.T) {
	st, err := Read(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Mounts) != 0 || len(st.Pools) != 0 || st.DefaultPageSize != 0 {
		t.Errorf("state = %+v, want empty", st)
	}
}

func TestReadMounts(t *testing.T) {
	root := fixture{
		defaultKB: kB2M,
		mounts: procMounts2M +
			"none /mnt/huge\\0401G hugetlbfs rw,relatime,pagesize=1024M 0 0\n" +
			"nodev /mnt/hp-default hugetlbfs rw,relatime 0 0\n" +
			"nodev /mnt/hp-g hugetlbfs rw,pagesize=1G,size=4G 0 0\n" +
			"proc /proc proc rw 0 0\n",
	}.build(t)
	st := read(t, root)
	want := []Mount{
		{"/dev/hugepages", 2 << 20},
		{"/mnt/huge 1G", 1 << 30},
		{"/mnt/hp-default", 2 << 20},
		{"/mnt/hp-g", 1 << 30},
	}
	if !reflect.DeepEqual(st.Mounts, want) {
		t.Errorf("mounts = %+v, want %+v", st.Mounts, want)
	}
	if st.DefaultPageSize != 2<<20 {
		t.Errorf("default page size = %d", st.DefaultPageSize)
	}

	root = fixture{mounts: "nodev /mnt/bad hugetlbfs rw,pagesize=huge 0 0\n"}.build(t)
	if _, err := Read(root); err == nil || !strings.Contains(err.Error(), "proc/mounts line 1") || !strings.Contains(err.Error(), `"huge"`) {
		t.Errorf("bad pagesize: err = %v", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]uint64{"2M": 2 << 20, "1G": 1 << 30, "1024M": 1 << 30, "2048k": 2 << 20, "64K": 64 << 10, "4096": 4096} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "0", "-2M", "2T", "99999999999G"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) succeeded", in)
		}
	}
}

func TestReadPools(t *testing.T) {
	root := fixture{
		global: map[uint64]pages{kB2M: {1024, 1000}, kB1G: {4, 4}},
		nodes: []map[uint64]pages{
			{kB2M: {512, 500}, kB1G: {2, 2}},
			{kB2M: {512, 500}, kB1G: {2, 2}},
		},
	}.build(t)
	st := read(t, root)
	want := []Pool{
		{GlobalNode, 2 << 20, 1024, 1000}, {GlobalNode, 1 << 30, 4, 4},
		{0, 2 << 20, 512, 500}, {0, 1 << 30, 2, 2},
		{1, 2 << 20, 512, 500}, {1, 1 << 30, 2, 2},
	}
	if !reflect.DeepEqual(st.Pools, want) {
		t.Errorf("pools = %+v\nwant %+v", st.Pools, want)
	}

	bad := filepath.Join(root, "sys/devices/system/node/node1/hugepages/hugepages-2048kB/free_hugepages")
	writeFile(t, bad, "lots\n")
	if _, err := Read(root); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "not a page count") {
		t.Errorf("bad free_hugepages: err = %v", err)
	}
}

var demand = Demand{Mbufs: 16384, DataRoom: 2176, Cache: 256, Lcores: 4, RxDesc: 4096, TxDesc: 4096}

func onSocket(d Demand, s int) Demand { d.Socket = s; return d }

func TestEstimate(t *testing.T) {
	if got := Estimate(Demand{}); got != 80<<20 {
		t.Errorf("Estimate(empty) = %d MiB, want the 64 MiB overhead plus 25%% = 80 MiB", got>>20)
	}
	// 8192+4×256 elements of roundup64(64+128+2176) = 2368 B, a 16384-slot
	// ring, 8192 descriptors: (21823488+131072+524288+64 MiB)×1.25 → 107 MiB.
	d := Demand{Mbufs: 8192, DataRoom: 2176, Cache: 256, Lcores: 4, RxDesc: 4096, TxDesc: 4096}
	if got := Estimate(d); got != 107<<20 {
		t.Errorf("Estimate(%+v) = %d bytes, want 107 MiB", d, got)
	}
	prev := uint64(0)
	for _, n := range []int{0, 1, 1000, 8191, 8192, 65536, 262144, 1 << 20} {
		d.Mbufs = n
		got := Estimate(d)
		if got < prev {
			t.Errorf("Estimate not monotonic: %d mbufs → %d < %d", n, got, prev)
		}
		if got%(1<<20) != 0 {
			t.Errorf("Estimate(%d mbufs) = %d is not a whole MiB", n, got)
		}
		if got < 64<<20+uint64(n)*2368 {
			t.Errorf("Estimate(%d mbufs) = %d is below overhead + mbufs", n, got)
		}
		prev = got
	}
	if Estimate(Demand{Mbufs: 1000}) != Estimate(Demand{Mbufs: 1000, DataRoom: 2176}) {
		t.Error("DataRoom 0 is not RTE_MBUF_DEFAULT_BUF_SIZE")
	}
	if got, want := Estimate(Demand{Mbufs: 1000, TableBytes: 100 * mib})-Estimate(Demand{Mbufs: 1000}), uint64(125*mib); got != want {
		t.Errorf("100 MiB of tables add %d bytes, want %d (with the margin)", got, want)
	}
	if Estimate(Demand{Mbufs: 1000, DataRoom: 9216}) <= Estimate(Demand{Mbufs: 1000}) {
		t.Error("jumbo data room does not cost more")
	}
}

func TestPlanNoHugepages(t *testing.T) {
	st := read(t, t.TempDir())
	p := MakePlan(st, []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 0)
	if !p.NoHuge {
		t.Fatalf("plan uses hugepages: %+v", p)
	}
	total := Estimate(onSocket(demand, 0)) + Estimate(onSocket(demand, 1))
	want := []string{"--no-huge", "-m", strconv.FormatUint(total>>20, 10)}
	if !reflect.DeepEqual(p.EALArgs, want) {
		t.Errorf("EAL args = %q, want %q", p.EALArgs, want)
	}
	all := strings.Join(p.Warnings, "\n")
	for _, w := range []string{"no hugetlbfs mount with 2 MiB pages", "roce-fwd hugepages --reserve", "no hugepage pools",
		"not physically contiguous", "not usable by real NICs for DMA", "vdevs"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
	if p.PageSize != 2<<20 {
		t.Errorf("page size = %d, want the 2 MiB fallback", p.PageSize)
	}
}

func TestPlanTwoNodesEnough2M(t *testing.T) {
	root := fixture{
		mounts:    procMounts2M,
		defaultKB: kB2M,
		global:    map[uint64]pages{kB2M: {2048, 2048}},
		nodes:     []map[uint64]pages{{kB2M: {1024, 1024}}, {kB2M: {1024, 1024}}},
	}.build(t)
	d0, d1 := onSocket(demand, 0), onSocket(demand, 1)
	d1.Mbufs *= 2
	p := MakePlan(read(t, root), []Demand{d1, d0}, 0)
	if p.NoHuge || len(p.Warnings) != 0 {
		t.Fatalf("plan = %+v", p)
	}
	want := []string{"--socket-mem", fmt.Sprintf("%d,%d", Estimate(d0)>>20, Estimate(d1)>>20), "--huge-dir", "/dev/hugepages"}
	if !reflect.DeepEqual(p.EALArgs, want) {
		t.Errorf("EAL args = %q, want %q", p.EALArgs, want)
	}
	if p.PageSize != 2<<20 || p.HugeDir != "/dev/hugepages" {
		t.Errorf("page size %d, dir %q", p.PageSize, p.HugeDir)
	}
	sp := p.PerSocket[1]
	if sp.Socket != 1 || sp.PagesNeeded != (Estimate(d1)+2<<20-1)/(2<<20) || sp.PagesFree != 1024 || !sp.OK {
		t.Errorf("socket 1 plan = %+v", sp)
	}
	s := p.String()
	for _, w := range []string{"page size 2 MiB", "/dev/hugepages", "SOCKET", "--socket-mem"} {
		if !strings.Contains(s, w) {
			t.Errorf("String() lacks %q:\n%s", w, s)
		}
	}
}

func TestPlanSocketMemSkipsUnusedSockets(t *testing.T) {
	root := fixture{
		mounts: procMounts2M, defaultKB: kB2M,
		nodes: []map[uint64]pages{{kB2M: {0, 0}}, {kB2M: {1024, 1024}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 1)}, 0)
	if p.NoHuge || p.EALArgs[1] != fmt.Sprintf("0,%d", Estimate(demand)>>20) {
		t.Errorf("plan = %+v", p)
	}
}

func TestPlanOneNodeShort(t *testing.T) {
	root := fixture{
		mounts:    procMounts2M,
		defaultKB: kB2M,
		nodes:     []map[uint64]pages{{kB2M: {1024, 1024}}, {kB2M: {40, 12}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 0)
	if !p.NoHuge || p.EALArgs[0] != "--no-huge" {
		t.Fatalf("plan = %+v", p)
	}
	need := (Estimate(demand) + 2<<20 - 1) / (2 << 20)
	all := strings.Join(p.Warnings, "\n")
	for _, w := range []string{
		fmt.Sprintf("not enough free 2 MiB hugepages on socket 1: need %d", need),
		"free 12 of 40",
		fmt.Sprintf("echo %d > /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", 40+need-12),
		"sudo roce-fwd hugepages --reserve",
		"not usable by real NICs",
	} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
	if strings.Contains(all, "socket 0") || strings.Contains(all, "no hugetlbfs mount") {
		t.Errorf("warnings blame something that is fine:\n%s", all)
	}
	if p.PerSocket[0].OK != true || p.PerSocket[1].OK != false {
		t.Errorf("per socket = %+v", p.PerSocket)
	}
}

func TestPlanPrefers1G(t *testing.T) {
	mounts := procMounts2M + "nodev /mnt/huge1g hugetlbfs rw,relatime,pagesize=1024M 0 0\n"
	f := fixture{
		mounts:    mounts,
		defaultKB: kB2M,
		nodes: []map[uint64]pages{
			{kB2M: {1024, 1024}, kB1G: {4, 4}},
			{kB2M: {1024, 1024}, kB1G: {4, 4}},
		},
	}
	demands := []Demand{onSocket(demand, 0), onSocket(demand, 1)}
	p := MakePlan(read(t, f.build(t)), demands, 0)
	if p.NoHuge || p.PageSize != 1<<30 || p.HugeDir != "/mnt/huge1g" || p.PerSocket[0].PagesNeeded != 1 {
		t.Errorf("plan = %+v", p)
	}

	// 1 GiB pages all taken: 2 MiB pages do the job instead.
	f.nodes[1][kB1G] = pages{4, 0}
	p = MakePlan(read(t, f.build(t)), demands, 0)
	if p.NoHuge || p.PageSize != 2<<20 || p.HugeDir != "/dev/hugepages" {
		t.Errorf("plan = %+v", p)
	}

	// Asking for 1 GiB explicitly keeps to it and explains the shortage.
	p = MakePlan(read(t, f.build(t)), demands, 1<<30)
	if !p.NoHuge || p.PageSize != 1<<30 || !strings.Contains(strings.Join(p.Warnings, "\n"), "hugepagesz=1G") {
		t.Errorf("plan = %+v", p)
	}
}

func TestPlanNoMount(t *testing.T) {
	root := fixture{
		defaultKB: kB2M,
		nodes:     []map[uint64]pages{{kB2M: {1024, 1024}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{demand}, 0)
	if !p.NoHuge || len(p.Warnings) != 2 || !strings.Contains(p.Warnings[0], "no hugetlbfs mount with 2 MiB pages") ||
		!strings.Contains(p.Warnings[0], "mount -t hugetlbfs -o pagesize=2M nodev /dev/hugepages") {
		t.Errorf("plan = %+v", p)
	}
}

func TestPlanNonNUMAUsesGlobalPool(t *testing.T) {
	root := fixture{
		mounts:    procMounts2M,
		defaultKB: kB2M,
		global:    map[uint64]pages{kB2M: {10, 10}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, -1)}, 0)
	if !p.NoHuge || p.PerSocket[0].Socket != 0 || p.PerSocket[0].PagesFree != 10 {
		t.Fatalf("plan = %+v", p)
	}
	if !strings.Contains(p.Warnings[0], "> /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages") {
		t.Errorf("warning = %s", p.Warnings[0])
	}
}

type mountCall struct{ source, target, fstype, data string }

func fakeSystem(t *testing.T, uid int) *[]mountCall {
	var calls []mountCall
	oldUID, oldMount, oldWrite := geteuid, mount, writeNr
	t.Cleanup(func() { geteuid, mount, writeNr = oldUID, oldMount, oldWrite })
	geteuid = func() int { return uid }
	mount = func(source, target, fstype string, flags uintptr, data string) error {
		calls = append(calls, mountCall{source, target, fstype, data})
		return nil
	}
	return &calls
}

func readNr(t *testing.T, root string, node int, kb uint64) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sys/devices/system/node", fmt.Sprintf("node%d", node), "hugepages", fmt.Sprintf("hugepages-%dkB", kb), "nr_hugepages"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestReserve(t *testing.T) {
	calls := fakeSystem(t, 0)
	root := fixture{
		defaultKB: kB2M,
		nodes:     []map[uint64]pages{{kB2M: {1024, 1024}}, {kB2M: {40, 12}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 0)
	if err := Reserve(root, p); err != nil {
		t.Fatal(err)
	}
	need := p.PerSocket[1].PagesNeeded
	if got := readNr(t, root, 1, kB2M); got != strconv.FormatUint(40+need-12, 10) {
		t.Errorf("node1 nr_hugepages = %s, want %d", got, 40+need-12)
	}
	if got := readNr(t, root, 0, kB2M); got != "1024" {
		t.Errorf("node0 nr_hugepages = %s, want it untouched", got)
	}
	want := []mountCall{{"nodev", filepath.Join(root, "dev/hugepages"), "hugetlbfs", "pagesize=2M"}}
	if !reflect.DeepEqual(*calls, want) {
		t.Errorf("mount calls = %+v, want %+v", *calls, want)
	}
	if fi, err := os.Stat(filepath.Join(root, "dev/hugepages")); err != nil || !fi.IsDir() {
		t.Errorf("mount point not created: %v", err)
	}
}

func TestReserve1GNextToA2MMount(t *testing.T) {
	calls := fakeSystem(t, 0)
	root := fixture{
		mounts:    procMounts2M,
		defaultKB: kB2M,
		nodes:     []map[uint64]pages{{kB2M: {0, 0}, kB1G: {0, 0}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{demand}, 1<<30)
	if err := Reserve(root, p); err != nil {
		t.Fatal(err)
	}
	if got := readNr(t, root, 0, kB1G); got != "1" {
		t.Errorf("node0 1G nr_hugepages = %s, want 1", got)
	}
	if len(*calls) != 1 || (*calls)[0].target != filepath.Join(root, "dev/hugepages-1G") || (*calls)[0].data != "pagesize=1G" {
		t.Errorf("mount calls = %+v", *calls)
	}
}

func TestReserveNothingToDo(t *testing.T) {
	calls := fakeSystem(t, 0)
	root := fixture{
		mounts: procMounts2M, defaultKB: kB2M,
		nodes: []map[uint64]pages{{kB2M: {1024, 1024}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{demand}, 0)
	if err := Reserve(root, p); err != nil {
		t.Fatal(err)
	}
	if len(*calls) != 0 || readNr(t, root, 0, kB2M) != "1024" {
		t.Errorf("Reserve changed a sufficient system: mounts %+v", *calls)
	}
}

func TestReserveNeedsRoot(t *testing.T) {
	calls := fakeSystem(t, 1000)
	root := fixture{nodes: []map[uint64]pages{{kB2M: {0, 0}}}}.build(t)
	err := Reserve(root, MakePlan(read(t, root), []Demand{demand}, 0))
	if err == nil || err.Error() != "reserving hugepages needs root: run sudo roce-fwd hugepages --reserve" {
		t.Errorf("err = %v", err)
	}
	if len(*calls) != 0 || readNr(t, root, 0, kB2M) != "0" {
		t.Error("non-root Reserve touched the system")
	}
}

func TestReserveShortfall(t *testing.T) {
	fakeSystem(t, 0)
	// The kernel finds only 10 of the pages asked for.
	writeNr = func(path string, n uint64) error {
		b, _ := os.ReadFile(path)
		cur, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		return os.WriteFile(path, []byte(strconv.FormatUint(min(n, cur+10), 10)), 0o644)
	}
	root := fixture{
		mounts: procMounts2M, defaultKB: kB2M,
		nodes: []map[uint64]pages{{kB2M: {1024, 1024}}, {kB2M: {0, 0}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 0)
	err := Reserve(root, p)
	need := p.PerSocket[1].PagesNeeded
	want := fmt.Sprintf("node 1: asked the kernel for %d more 2 MiB pages (nr_hugepages %d), it granted 10, leaving 10 free of the %d needed", need, need, need)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant it to contain %q", err, want)
	}
}

func TestReserveMountFailure(t *testing.T) {
	fakeSystem(t, 0)
	mount = func(string, string, string, uintptr, string) error { return errors.New("operation not permitted") }
	root := fixture{defaultKB: kB2M, nodes: []map[uint64]pages{{kB2M: {1024, 1024}}}}.build(t)
	err := Reserve(root, MakePlan(read(t, root), []Demand{demand}, 0))
	if err == nil || !strings.Contains(err.Error(), "mount -t hugetlbfs -o pagesize=2M") || !strings.Contains(err.Error(), "operation not permitted") {
		t.Errorf("err = %v", err)
	}
}

func TestPlanUnsupportedPageSize(t *testing.T) {
	root := fixture{
		mounts: procMounts2M, defaultKB: kB2M,
		nodes: []map[uint64]pages{{kB2M: {1024, 1024}}, {kB2M: {1024, 1024}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 1<<30)
	all := strings.Join(p.Warnings, "\n")
	if !p.NoHuge || !strings.Contains(all, "the kernel offers no 1 GiB hugepages") || !strings.Contains(all, "choose one of 2 MiB") {
		t.Errorf("plan = %+v", p)
	}
	if strings.Count(all, "offers no") != 1 {
		t.Errorf("repeated per socket:\n%s", all)
	}
}

func TestPlanSocketWithoutNode(t *testing.T) {
	root := fixture{
		mounts: procMounts2M, defaultKB: kB2M,
		nodes: []map[uint64]pages{{kB2M: {1024, 1024}}},
	}.build(t)
	p := MakePlan(read(t, root), []Demand{onSocket(demand, 0), onSocket(demand, 1)}, 0)
	if !p.NoHuge || !strings.Contains(strings.Join(p.Warnings, "\n"), "the machine has no NUMA node 1") {
		t.Errorf("plan = %+v", p)
	}
}
