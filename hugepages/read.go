// Package hugepages inspects the hugetlbfs mounts and hugepage pools of the
// machine, estimates how much hugepage memory the forwarding config needs on
// each socket, turns that into EAL memory arguments, and can reserve the
// missing pages.
//
// Every file-system access goes through a root directory (normally "/") so
// tests can run on fixture trees.
package hugepages

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// GlobalNode is the Node of a pool that is not tied to a NUMA node
// (/sys/kernel/mm/hugepages).
const GlobalNode = -1

// Mount is a hugetlbfs mount.
type Mount struct {
	Path     string // as the kernel reports it, not prefixed by root
	PageSize uint64 // bytes; 0 if neither the mount nor /proc/meminfo tells
}

// Pool is the hugepage pool of one page size on one NUMA node.
type Pool struct {
	Node     int    // GlobalNode for the machine-wide pool
	PageSize uint64 // bytes
	Total    uint64 // pages (nr_hugepages)
	Free     uint64 // pages (free_hugepages)
}

// State is what the kernel offers in hugepages.
type State struct {
	Mounts          []Mount
	Pools           []Pool // sorted by node, then page size
	DefaultPageSize uint64 // bytes; 0 if unknown
}

// Read gathers the hugepage state under root. Missing files and directories
// mean "no hugepages" rather than an error, because containers often hide
// them; malformed contents are errors naming the file.
func Read(root string) (*State, error) {
	st := &State{}
	var err error
	if st.DefaultPageSize, err = readDefaultPageSize(filepath.Join(root, "proc/meminfo")); err != nil {
		return nil, err
	}
	if st.Mounts, err = readMounts(filepath.Join(root, "proc/mounts"), st.DefaultPageSize); err != nil {
		return nil, err
	}
	global, err := readPools(filepath.Join(root, "sys/kernel/mm/hugepages"), GlobalNode)
	if err != nil {
		return nil, err
	}
	st.Pools = global
	nodeDir := filepath.Join(root, "sys/devices/system/node")
	entries, err := os.ReadDir(nodeDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("hugepages: %v", err)
	}
	for _, e := range entries {
		id, ok := nodeID(e.Name())
		if !ok {
			continue
		}
		pools, err := readPools(filepath.Join(nodeDir, e.Name(), "hugepages"), id)
		if err != nil {
			return nil, err
		}
		st.Pools = append(st.Pools, pools...)
	}
	slices.SortFunc(st.Pools, func(a, b Pool) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.PageSize, b.PageSize))
	})
	return st, nil
}

func nodeID(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "node")
	if !ok || s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.Atoi(s)
	return id, err == nil
}

func readDefaultPageSize(path string) (uint64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("hugepages: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		val, ok := strings.CutPrefix(sc.Text(), "Hugepagesize:")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("hugepages: %s: Hugepagesize %q is not of the form \"<n> kB\"", path, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil || kb == 0 {
			return 0, fmt.Errorf("hugepages: %s: Hugepagesize %q is not a positive number", path, fields[0])
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("hugepages: %s: %v", path, err)
	}
	return 0, nil
}

func readMounts(path string, defaultSize uint64) ([]Mount, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hugepages: %v", err)
	}
	defer f.Close()
	var mounts []Mount
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[2] != "hugetlbfs" {
			continue
		}
		m := Mount{Path: unescapeMountPath(fields[1]), PageSize: defaultSize}
		for _, opt := range strings.Split(fields[3], ",") {
			v, ok := strings.CutPrefix(opt, "pagesize=")
			if !ok {
				continue
			}
			if m.PageSize, err = ParseSize(v); err != nil {
				return nil, fmt.Errorf("hugepages: %s line %d: mount %s: %v", path, n, m.Path, err)
			}
		}
		mounts = append(mounts, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("hugepages: %s: %v", path, err)
	}
	return mounts, nil
}

// unescapeMountPath undoes the octal escapes (\040 for space) that the
// kernel applies to paths in /proc/mounts.
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1]) && isOctal(s[i+2]) && isOctal(s[i+3]) {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c byte) bool { return c >= '0' && c <= '7' }

// ParseSize parses a page size such as "2M", "1G", "1024M", "2048k" or
// "2097152" into bytes, as the kernel's memparse does for pagesize=.
func ParseSize(s string) (uint64, error) {
	num, shift := s, 0
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			shift = 10
		case 'm', 'M':
			shift = 20
		case 'g', 'G':
			shift = 30
		}
		if shift != 0 {
			num = s[:len(s)-1]
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil || v == 0 || v > (1<<63)>>shift {
		return 0, fmt.Errorf("page size %q is not a size like 2M or 1G", s)
	}
	return v << shift, nil
}

// readPools reads dir/hugepages-<N>kB/{nr,free}_hugepages.
func readPools(dir string, node int) ([]Pool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hugepages: %v", err)
	}
	var pools []Pool
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		size, err := strconv.ParseUint(kb, 10, 64)
		if !ok || err != nil || size == 0 {
			return nil, fmt.Errorf("hugepages: %s: directory name is not hugepages-<n>kB", filepath.Join(dir, e.Name()))
		}
		p := Pool{Node: node, PageSize: size << 10}
		if p.Total, err = readCount(filepath.Join(dir, e.Name(), "nr_hugepages")); err != nil {
			return nil, err
		}
		if p.Free, err = readCount(filepath.Join(dir, e.Name(), "free_hugepages")); err != nil {
			return nil, err
		}
		pools = append(pools, p)
	}
	return pools, nil
}

func readCount(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("hugepages: %v", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("hugepages: %s: %q is not a page count", path, strings.TrimSpace(string(b)))
	}
	return v, nil
}

// pool returns the pool of page size ps that serves socket s. Per-node pools
// win; without any (non-NUMA kernel, hidden sysfs) the global pool stands in
// for socket 0.
func (st *State) pool(s int, ps uint64) (p Pool, perNode, ok bool) {
	var global *Pool
	for i := range st.Pools {
		q := st.Pools[i]
		if q.PageSize != ps {
			continue
		}
		if q.Node == GlobalNode {
			global = &st.Pools[i]
			continue
		}
		perNode = true
		if q.Node == s {
			p, ok = q, true
		}
	}
	if perNode {
		if !ok {
			p = Pool{Node: s, PageSize: ps}
		}
		return p, true, ok
	}
	if global != nil && s == 0 {
		return *global, false, true
	}
	return Pool{Node: s, PageSize: ps}, false, false
}

// mount returns the first hugetlbfs mount of page size ps.
func (st *State) mount(ps uint64) (Mount, bool) {
	for _, m := range st.Mounts {
		if m.PageSize == ps {
			return m, true
		}
	}
	return Mount{}, false
}

// FormatSize renders a page size the way operators write it: "2 MiB", "1 GiB".
func FormatSize(b uint64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// kernelSize renders a page size for the pagesize= mount option.
func kernelSize(b uint64) string {
	switch {
	case b%(1<<30) == 0:
		return fmt.Sprintf("%dG", b>>30)
	case b%(1<<20) == 0:
		return fmt.Sprintf("%dM", b>>20)
	}
	return fmt.Sprintf("%dK", b>>10)
}
