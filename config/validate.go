package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	root       path
	portNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,31}$`)
	vdevNameRE = regexp.MustCompile(`^[a-z0-9_]+$`)
	pciRE      = regexp.MustCompile(`^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$`)
	macRE      = regexp.MustCompile(`^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}$|^[0-9a-fA-F]{2}(?:-[0-9a-fA-F]{2}){5}$`)
)

// intRange reports v outside lo..hi.
func (c *checker) intRange(p path, v, lo, hi int) {
	if v < lo || v > hi {
		c.errorf(p, "%d is out of range %d..%d", v, lo, hi)
	}
}

func validateEAL(c *checker, cfg *Config) {
	p := root.key("eal").key("args")
	for i, a := range cfg.EAL.Args {
		if a == "" {
			c.errorf(p.index(i), "empty argument")
		}
	}
	if _, _, err := cfg.EAL.Lcores(); err != nil {
		c.errorf(p, "%v", err)
	}
}

func validatePorts(c *checker, cfg *Config) {
	if len(cfg.Ports) == 0 {
		c.errorf(root.key("port"), `no [[port]] defined; add one with name and vdev or pci`)
		return
	}
	names := map[string]int{} // name → index of first port using it
	devs := map[string]int{}  // DPDK device name → index of first port using it
	for i := range cfg.Ports {
		pt := &cfg.Ports[i]
		p := root.key("port").index(i)
		if c.failed(p) {
			continue // not a table; already reported
		}
		key := p.key

		switch {
		case pt.Name == "":
			c.errorf(key("name"), "missing; every port needs a name")
		case !portNameRE.MatchString(pt.Name):
			c.errorf(key("name"), "%q is not a valid name: use a letter, then up to 31 letters, digits, '_', '.' or '-'", pt.Name)
		default:
			if j, dup := names[pt.Name]; dup {
				c.errorf(key("name"), "%q is already the name of port[%d] (line %d)", pt.Name, j, cfg.Ports[j].Line)
			} else {
				names[pt.Name] = i
			}
		}

		dev := ""
		switch {
		case pt.Vdev != "" && pt.PCI != "":
			c.errorf(key("pci"), "set either vdev or pci, not both")
		case pt.Vdev == "" && pt.PCI == "":
			c.errorf(key("vdev"), `missing; set vdev = "net_..." or pci = "0000:3b:00.0"`)
		case pt.Vdev != "":
			dev, _, _ = strings.Cut(pt.Vdev, ",")
			if !vdevNameRE.MatchString(dev) {
				c.errorf(key("vdev"), "%q: the driver name before the first comma must be non-empty and made of a-z, 0-9 and '_'", pt.Vdev)
				dev = ""
			}
		default:
			if norm, ok := normalisePCI(pt.PCI); ok {
				pt.PCI, dev = norm, norm
			} else {
				c.errorf(key("pci"), "%q is not a PCI address like \"0000:3b:00.0\" or \"3b:00.0\"", pt.PCI)
			}
		}
		if dev != "" {
			what := key("vdev")
			if pt.PCI != "" {
				what = key("pci")
			}
			if j, dup := devs[dev]; dup {
				c.errorf(what, "device %s is already used by port[%d] (line %d); DPDK device names must be unique", dev, j, cfg.Ports[j].Line)
			} else {
				devs[dev] = i
			}
		}
		if pt.Devargs != "" && pt.PCI == "" {
			c.errorf(key("devargs"), "only valid with pci; put vdev arguments after a comma in vdev")
		}

		c.intRange(key("rx_queues"), pt.RxQueues, 1, 1024)
		c.intRange(key("tx_queues"), pt.TxQueues, 1, 1024)
		c.intRange(key("rx_desc"), pt.RxDesc, 32, 32768)
		c.intRange(key("tx_desc"), pt.TxDesc, 32, 32768)
		if pt.MTU != 0 && (pt.MTU < 68 || pt.MTU > 9600) {
			c.errorf(key("mtu"), "%d is out of range: use 68..9600, or 0 to keep the device's MTU", pt.MTU)
		}
		if pt.Socket != -1 && (pt.Socket < 0 || pt.Socket > 7) {
			c.errorf(key("socket"), "%d is out of range: use 0..7, or -1 for the device's own socket", pt.Socket)
		}
		if pt.PeerMAC == "" {
			// Like testpmd's default --eth-peer addresses.
			pt.PeerMAC = fmt.Sprintf("02:00:00:00:00:%02x", byte(i))
		} else if macRE.MatchString(pt.PeerMAC) {
			pt.PeerMAC = strings.ToLower(strings.ReplaceAll(pt.PeerMAC, "-", ":"))
		} else {
			c.errorf(key("peer_mac"), "%q is not a MAC address like \"02:00:00:00:00:01\"", pt.PeerMAC)
		}
	}
}

// CheckFiles checks the files the ports' vdevs name, on this machine:
// each net_pcap rx_pcap must be a readable file and each tx_pcap's
// directory must exist (EAL would report a missing one as an unrelated
// errno). validate and run call it; Parse does not, so that a config can
// be checked, and its running copy handled, away from its files.
func (cfg *Config) CheckFiles() error {
	var es Errors
	for i, pt := range cfg.Ports {
		drv, args, _ := strings.Cut(pt.Vdev, ",")
		if !strings.HasPrefix(drv, "net_pcap") && !strings.HasPrefix(drv, "eth_pcap") {
			continue
		}
		bad := func(format string, a ...any) {
			es = append(es, &Error{File: cfg.File, Line: pt.VdevLine, Key: root.key("port").index(i).key("vdev").String(), Msg: fmt.Sprintf(format, a...)})
		}
		for _, kv := range strings.Split(args, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "rx_pcap":
				if st, err := os.Stat(v); err != nil {
					bad("rx_pcap %s: %v", v, errors.Unwrap(err))
				} else if st.IsDir() {
					bad("rx_pcap %s: is a directory, not a capture", v)
				} else if f, err := os.Open(v); err != nil {
					bad("rx_pcap %s: %v", v, errors.Unwrap(err))
				} else {
					f.Close()
				}
			case "tx_pcap":
				if st, err := os.Stat(filepath.Dir(v)); err != nil || !st.IsDir() {
					bad("tx_pcap %s: directory %s does not exist", v, filepath.Dir(v))
				}
			}
		}
	}
	if len(es) == 0 {
		return nil
	}
	return es
}

// normalisePCI returns addr as "dddd:bb:dd.f" in lower case.
func normalisePCI(addr string) (string, bool) {
	m := pciRE.FindStringSubmatch(addr)
	if m == nil {
		return "", false
	}
	var n [4]uint64
	for i, s := range m[1:] {
		if s == "" {
			continue // domain defaults to 0
		}
		n[i], _ = strconv.ParseUint(s, 16, 32)
	}
	if n[2] > 0x1f { // 5-bit device number
		return "", false
	}
	return fmt.Sprintf("%04x:%02x:%02x.%x", n[0], n[1], n[2], n[3]), true
}

func validateMempool(c *checker, cfg *Config) {
	m := &cfg.Mempool
	p := root.key("mempool")
	c.intRange(p.key("mbufs"), m.Mbufs, 1, 1<<30)
	c.intRange(p.key("cache"), m.Cache, 0, 512) // RTE_MEMPOOL_CACHE_MAX_SIZE
	// rte_mempool_create rejects a cache larger than n / 1.5.
	if m.Mbufs > 0 && m.Cache*3 > m.Mbufs*2 {
		c.errorf(p.key("cache"), "%d is more than mbufs/1.5 (%d); lower cache or raise mbufs", m.Cache, m.Mbufs*2/3)
	}
	// Whether DPDK has the driver is known once EAL is up (ports.Open).
	if m.Ops == "" || len(m.Ops) > 31 { // RTE_MEMPOOL_OPS_NAMESIZE
		c.errorf(p.key("ops"), "%q is not a mempool driver's name: want auto, ring_mp_mc, stack, lf_stack or another driver DPDK has", m.Ops)
	}
	dr := p.key("data_room")
	c.intRange(dr, m.DataRoom, 128+64, 65535) // data_room_size is a uint16
	drLine, drSet := c.loc.lookup(dr)
	for i, pt := range cfg.Ports {
		// Without scatter one mbuf holds a whole frame: MTU + Ethernet
		// header/CRC (18) + headroom (128).
		need := pt.MTU + 18 + 128
		if pt.MTU == 0 || m.DataRoom >= need {
			continue
		}
		line := drLine
		if !drSet { // point at what made the default too small
			line = c.loc.line(root.key("port").index(i).key("mtu"))
		}
		c.errorAt(line, dr, "%d is too small for port %q with mtu %d: need at least %d (mtu + 18 + 128 headroom)", m.DataRoom, pt.Name, pt.MTU, need)
	}
	// A port's RX rings are filled from the pool at start; if one port
	// alone needs more mbufs than the pool has, it cannot start.
	mb := p.key("mbufs")
	mbLine, mbSet := c.loc.lookup(mb)
	for i, pt := range cfg.Ports {
		if need := pt.RxQueues * pt.RxDesc; m.Mbufs > 0 && need > m.Mbufs {
			if !mbSet {
				mbLine = c.loc.line(root.key("port").index(i).key("rx_desc"))
			}
			c.errorAt(mbLine, mb, "%d is too few for port %q: its RX rings alone hold %d mbufs (rx_queues × rx_desc)", m.Mbufs, pt.Name, need)
			return
		}
	}
	// What run checks once the ports are probed, checked here where the
	// ports' sockets are known without EAL: virtual devices all share the
	// main lcore's, a port with socket set has that one. (A PCI port's
	// socket comes from sysfs: run checks those.)
	if len(c.errs) > 0 || cfg.Pipeline.Burst < 1 {
		return // the sums of values already refused mean nothing
	}
	x := *cfg
	x.Ports = cfg.PortsWithKernel()
	pci := 0
	demand := x.MbufDemand(func(pt Port) int {
		switch {
		case pt.Socket >= 0:
			return pt.Socket
		case pt.PCI == "":
			return -1 // the virtual devices' socket
		}
		pci++
		return -1 - pci // unknown: each on its own
	}, cfg.workers())
	for s, need := range demand {
		if s >= -1 && need > m.Mbufs {
			where := "the virtual devices' socket"
			if s >= 0 {
				where = fmt.Sprintf("socket %d", s)
			}
			c.errorAt(mbLine, mb, "%d is too few for %s: its rx/tx rings, bursts and lcore caches can hold %d mbufs at once; set mbufs to at least %d", m.Mbufs, where, need, need)
			return
		}
	}
}

// workers is how many worker lcores the EAL arguments give: the lcores
// listed in [pipeline] lcores, else every EAL lcore but the main one.
func (c *Config) workers() int {
	if n := len(c.Pipeline.Lcores); n > 0 {
		return n
	}
	all, _, _ := c.EAL.Lcores()
	if len(all) == 0 {
		return max(runtime.NumCPU()-1, 1) // EAL takes every CPU
	}
	return max(len(all)-1, 1)
}

func validateRoCE(c *checker, cfg *Config) {
	r := &cfg.RoCE
	p := root.key("roce")
	oneOf(c, p.key("bad_icrc"), r.BadICRC, "drop", "forward")
	oneOf(c, p.key("malformed"), r.Malformed, "forward", "drop")
	c.intRange(p.key("qp_table"), r.QPTable, 0, 1<<20)
	if d, err := time.ParseDuration(r.QPMaxAge); err != nil || d < 0 {
		c.errorf(p.key("qp_max_age"), "%q is not a duration such as \"60s\" or \"5m\"", r.QPMaxAge)
	}
}

// tcMap checks a { value = tc } table: keys 0..maxKey, TCs 0..7.
func tcMap(c *checker, p path, m map[string]int, maxKey int, what string) {
	for k, tc := range m {
		if n, err := strconv.Atoi(k); err != nil || n < 0 || n > maxKey {
			c.errorf(p.key(k), "%q is not a %s value (0..%d)", k, what, maxKey)
			continue
		}
		c.intRange(p.key(k), tc, 0, 7)
	}
}

func oneOf(c *checker, p path, v string, valid ...string) {
	if !slices.Contains(valid, v) {
		c.errorf(p, "%q is not one of %s", v, strings.Join(valid, ", "))
	}
}

func validatePipeline(c *checker, cfg *Config) {
	pl := &cfg.Pipeline
	p := root.key("pipeline")
	if !slices.Contains(Modes, pl.Mode) {
		c.errorf(p.key("mode"), "unknown mode %q; valid modes: %s", pl.Mode, strings.Join(Modes, ", "))
	}
	c.intRange(p.key("burst"), pl.Burst, 1, 512)
	c.intRange(p.key("max_bursts"), pl.MaxBursts, 1, 16)

	all, main, err := cfg.EAL.Lcores()
	seen := map[int]int{}
	for i, lc := range pl.Lcores {
		e := p.key("lcores").index(i)
		switch j, dup := seen[lc]; {
		case lc < 0:
			c.errorf(e, "%d is not an lcore id", lc)
		case dup:
			c.errorf(e, "lcore %d is already listed at lcores[%d]", lc, j)
		case err != nil || all == nil:
			// Nothing to check against (an EAL error is reported by eal).
		case !slices.Contains(all, lc):
			c.errorf(e, "lcore %d is not enabled by eal.args (lcores %s)", lc, formatLcores(all))
		case lc == main:
			c.errorf(e, "lcore %d is the EAL main lcore, which does not run workers", lc)
		}
		if _, dup := seen[lc]; !dup {
			seen[lc] = i
		}
	}
}

func validateForward(c *checker, cfg *Config) {
	if len(cfg.Forward) == 0 && cfg.Routed() {
		return // routes forward instead (routing.go)
	}
	if len(cfg.Forward) == 0 {
		at := root.key("pipeline")
		if _, ok := c.loc.lookup(at); !ok {
			at = nil
		}
		from, to := "...", "..."
		if n := len(cfg.Ports); n > 0 && cfg.Ports[0].Name != "" && cfg.Ports[n-1].Name != "" {
			from, to = cfg.Ports[0].Name, cfg.Ports[n-1].Name
		}
		c.errorAt(c.loc.line(at), root.key("forward"), `no [[forward]] defined; add [[forward]] from = %q to = %q`, from, to)
		return
	}
	var names []string
	for _, pt := range cfg.Ports {
		if q := strconv.Quote(pt.Name); pt.Name != "" && !slices.Contains(names, q) { // a duplicate is reported once, at its port
			names = append(names, q)
		}
	}
	valid := "no port has a name yet"
	if len(names) > 0 {
		valid = "valid ports: " + strings.Join(names, ", ")
	}
	from := map[string]int{} // port → forward index using it as from
	for i, f := range cfg.Forward {
		p := root.key("forward").index(i)
		if c.failed(p) {
			continue
		}
		for _, end := range []struct{ key, name string }{{"from", f.From}, {"to", f.To}} {
			switch _, ok := cfg.PortByName(end.name); {
			case end.name == "":
				c.errorf(p.key(end.key), "missing; name a port (%s)", valid)
			case !ok:
				c.errorf(p.key(end.key), "unknown port %q; %s", end.name, valid)
			}
		}
		if f.From == "" {
			continue
		}
		if j, dup := from[f.From]; dup {
			c.errorf(p.key("from"), "port %q is already forwarded by forward[%d] (line %d); each port can be the from of one forward", f.From, j, cfg.Forward[j].Line)
		} else {
			from[f.From] = i
		}
	}
}
