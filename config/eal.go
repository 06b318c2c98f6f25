package config

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// maxLcore bounds lcore ids. DPDK's RTE_MAX_LCORE is a build option (128 by
// default); this only catches typos, the EAL enforces its own limit.
const maxLcore = 1024

// Lcores reports the lcores the EAL arguments enable and the main lcore, the
// way rte_eal_init reads -l, -c, --lcores and --main-lcore. all is nil when
// none of -l/-c/--lcores is given (the EAL then uses every CPU); main is
// then -1 unless --main-lcore sets it.
func (e EAL) Lcores() (all []int, main int, err error) {
	main = -1
	var setBy string
	for i := 0; i < len(e.Args); i++ {
		a := e.Args[i]
		opt, val, inline := a, "", false
		switch {
		case strings.HasPrefix(a, "--"):
			opt, val, inline = strings.Cut(a, "=")
		case strings.HasPrefix(a, "-c") || strings.HasPrefix(a, "-l"):
			opt, val = a[:2], a[2:]
			inline = val != ""
		}
		switch opt {
		case "-l", "-c", "--lcores", "--main-lcore":
		default:
			continue
		}
		if !inline {
			if i+1 >= len(e.Args) {
				return nil, -1, fmt.Errorf("%s needs a value", opt)
			}
			i++
			val = e.Args[i]
		}
		if opt == "--main-lcore" {
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n >= maxLcore {
				return nil, -1, fmt.Errorf("--main-lcore %q: expected an lcore id 0..%d", val, maxLcore-1)
			}
			main = n
			continue
		}
		if setBy != "" {
			return nil, -1, fmt.Errorf("%s and %s both set the lcores; use one", setBy, opt)
		}
		setBy = opt
		switch opt {
		case "-c":
			all, err = parseCoremask(val)
		case "--lcores":
			if strings.ContainsAny(val, "@()") {
				return nil, -1, fmt.Errorf("--lcores %q: lcore-to-CPU mappings are not supported here; use -l", val)
			}
			fallthrough
		default:
			all, err = parseCorelist(val)
		}
		if err != nil {
			return nil, -1, fmt.Errorf("%s %q: %v", opt, val, err)
		}
	}
	if all == nil {
		return nil, main, nil
	}
	if main < 0 {
		main = all[0]
	} else if !slices.Contains(all, main) {
		return nil, -1, fmt.Errorf("--main-lcore %d is not among the enabled lcores %s", main, formatLcores(all))
	}
	return all, main, nil
}

// parseCorelist parses "0-3,5" into sorted unique ids.
func parseCorelist(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := lcoreID(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = lcoreID(hi); err != nil {
				return nil, err
			}
		}
		// The EAL accepts ranges written backwards.
		for n := min(a, b); n <= max(a, b); n++ {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func lcoreID(s string) (int, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not an lcore id", s)
	}
	if n >= maxLcore {
		return 0, fmt.Errorf("lcore %d is too large (max %d)", n, maxLcore-1)
	}
	return n, nil
}

// parseCoremask parses a hex mask such as "0xf" (bit n enables lcore n).
func parseCoremask(s string) ([]int, error) {
	h := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	m, ok := new(big.Int).SetString(h, 16)
	if h == "" || strings.ContainsAny(h, "+-_") || !ok {
		return nil, fmt.Errorf("not a hexadecimal coremask")
	}
	if m.BitLen() > maxLcore {
		return nil, fmt.Errorf("coremask enables lcores above %d", maxLcore-1)
	}
	var out []int
	for n := 0; n < m.BitLen(); n++ {
		if m.Bit(n) == 1 {
			out = append(out, n)
		}
	}
	if out == nil {
		return nil, fmt.Errorf("coremask enables no lcore")
	}
	return out, nil
}

// formatLcores prints ids compactly, as -l would take them: "0-3,5".
func formatLcores(ids []int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}
