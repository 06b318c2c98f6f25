package hugepages

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Seams for tests: Reserve must not need root or mount anything there, and
// a fixture file cannot refuse pages the way the kernel does.
var (
	geteuid = os.Geteuid
	mount   = syscall.Mount
	writeNr = func(path string, n uint64) error {
		return os.WriteFile(path, []byte(strconv.FormatUint(n, 10)+"\n"), 0o644)
	}
)

// Reserve asks the kernel for the hugepages plan lacks on each socket and
// mounts hugetlbfs for plan.PageSize if no such mount exists. The state is
// re-read first, so pages freed or taken since the plan was made count.
// It needs root. Pages the kernel does not grant (fragmented memory) are
// reported as an error naming the node; the mount is still attempted.
func Reserve(root string, plan Plan) error {
	if geteuid() != 0 {
		return errors.New("reserving hugepages needs root: run sudo roce-fwd hugepages --reserve")
	}
	ps := plan.PageSize
	if ps == 0 {
		return errors.New("hugepages: plan has no page size")
	}
	st, err := Read(root)
	if err != nil {
		return err
	}
	size := FormatSize(ps)
	var shortfalls []error
	for _, sp := range plan.PerSocket {
		pool, perNode, ok := st.pool(sp.Socket, ps)
		if !ok {
			return fmt.Errorf("hugepages: the kernel has no %s hugepage pool for socket %d, so none can be reserved there", size, sp.Socket)
		}
		if pool.Free >= sp.PagesNeeded {
			continue
		}
		dir := filepath.Join(root, "sys/kernel/mm/hugepages", fmt.Sprintf("hugepages-%dkB", ps>>10))
		if perNode {
			dir = filepath.Join(root, "sys/devices/system/node", fmt.Sprintf("node%d", sp.Socket), "hugepages", fmt.Sprintf("hugepages-%dkB", ps>>10))
		}
		want := pool.Total + sp.PagesNeeded - pool.Free
		file := filepath.Join(dir, "nr_hugepages")
		if err := writeNr(file, want); err != nil {
			return fmt.Errorf("hugepages: socket %d: %v", sp.Socket, err)
		}
		got, err := readCount(file)
		if err != nil {
			return err
		}
		if got < want {
			granted := uint64(0)
			if got > pool.Total {
				granted = got - pool.Total
			}
			boot := strconv.FormatUint(want, 10)
			if perNode {
				boot = fmt.Sprintf("%d:%d", sp.Socket, want) // per-node form; older kernels take only a count
			}
			shortfalls = append(shortfalls, fmt.Errorf(
				"hugepages: node %d: asked the kernel for %d more %s pages (nr_hugepages %d), it granted %d, leaving %d free of the %d needed: memory is too fragmented. Fix: reserve them at boot (kernel command line hugepagesz=%s hugepages=%s), or free memory and retry (sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory)",
				sp.Socket, want-pool.Total, size, want, granted, pool.Free+granted, sp.PagesNeeded,
				kernelSize(ps), boot))
		}
	}
	if _, ok := st.mount(ps); !ok {
		if err := mountHugetlbfs(root, st, ps); err != nil {
			return errors.Join(append(shortfalls, err)...)
		}
	}
	return errors.Join(shortfalls...)
}

// mountHugetlbfs mounts hugetlbfs with page size ps at /dev/hugepages, or at
// /dev/hugepages-<size> when /dev/hugepages already holds another page size
// (mounting over it would hide the pages other programs use).
func mountHugetlbfs(root string, st *State, ps uint64) error {
	target := "/dev/hugepages"
	for _, m := range st.Mounts {
		if m.Path == target {
			target = "/dev/hugepages-" + kernelSize(ps)
			break
		}
	}
	dir := filepath.Join(root, target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hugepages: creating mount point: %v", err)
	}
	opt := "pagesize=" + kernelSize(ps)
	if err := mount("nodev", dir, "hugetlbfs", 0, opt); err != nil {
		return fmt.Errorf("hugepages: mount -t hugetlbfs -o %s nodev %s: %v", opt, dir, err)
	}
	return nil
}
