// Package numa reads the machine's NUMA topology from sysfs and plans which
// worker lcore polls which NIC queue, so that every queue is polled from the
// socket its NIC is attached to.
//
// All readers take a root directory (normally "/") so that tests can run on
// fixture trees.
package numa

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds parsed CPU ids so that a corrupt range such as "0-4000000000"
// fails instead of allocating gigabytes. The kernel's NR_CPUS tops out at 8192.
const maxCPU = 1 << 16

// ParseCPUList parses the kernel cpulist format ("0-3,8,10-11") as found in
// sysfs files such as cpu/online and node*/cpulist. Surrounding whitespace and
// a trailing newline are ignored and "" yields an empty list. The result is
// sorted and free of duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	cpus := []int{}
	if s == "" {
		return cpus, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("cpu list %q: empty element", s)
		}
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: element %q: %v", s, part, err)
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: element %q: %v", s, part, err)
			}
			if last < first {
				return nil, fmt.Errorf("cpu list %q: element %q: range end is below its start", s, part)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func parseCPU(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("missing cpu number")
	}
	// Atoi would accept "+3"; the kernel never writes signs.
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a cpu number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n >= maxCPU {
		return 0, fmt.Errorf("cpu number %q out of range (max %d)", s, maxCPU-1)
	}
	return n, nil
}

// FormatCPUList is the inverse of ParseCPUList: it sorts, removes duplicates
// and compresses runs, e.g. [0 1 2 3 8 10 11] → "0-3,8,10-11".
func FormatCPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	c = slices.Compact(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}
