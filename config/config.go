// Package config loads, validates and prints the roce-fwd TOML configuration.
//
// Every problem is reported as "FILE:LINE: key: problem", all of them at
// once, with keys spelled as in the file plus array indices
// ("port[1].rx_queues"). Unknown keys are errors: a misspelt option that is
// silently ignored is worse than a daemon that refuses to start.
//
// Adding a section takes three steps: a field in Config, a setDefaults
// method on its type if it has non-zero defaults, and an entry in sections.
package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the whole configuration with defaults filled in.
type Config struct {
	File      string     `toml:"-"` // path it was read from, or "<built-in default>"
	EAL       EAL        `toml:"eal"`
	Mempool   Mempool    `toml:"mempool"`
	Ports     []Port     `toml:"port"`
	Pipeline  Pipeline   `toml:"pipeline"`
	Forward   []Forward  `toml:"forward"`
	Routing   Routing    `toml:"routing"`
	Routes    []Route    `toml:"route"`
	Neighbors []Neighbor `toml:"neighbor"`
	Kernel    Kernel     `toml:"kernel"`
	RoCE      RoCE       `toml:"roce"`
	QoS       QoS        `toml:"qos"`
	PFC       *PFC       `toml:"pfc"` // nil: no [pfc] section (see qos.go)
	Console   Console    `toml:"console"`
	Telemetry Telemetry  `toml:"telemetry"`
	Offload   Offload    `toml:"offload"`
	Capture   *Capture   `toml:"capture"` // nil: no [capture] section
	Impair    *Impair    `toml:"impair"`  // nil: no [impair] section
}

// Impair holds impairment rules armed before the first packet, each in
// the words of the console's "impair add" (the impair package reads them:
// impair.FromConfig), the seed of rules without their own, and how many
// packets a worker may hold back for delay and reorder rules.
type Impair struct {
	Seed  uint64   `toml:"seed"`
	Hold  int      `toml:"hold"`
	Rules []string `toml:"rules"`
	Lines []int    `toml:"-"` // line of each rule, for later errors
	Line  int      `toml:"-"` // line of the section
}

// Capture starts a packet capture with the daemon: Start holds the words
// of the console's "capture start" (port, direction, filters, file), for
// example "port in drop file /var/log/roce-fwd/drops.pcapng count 100000".
// The capture package checks them (capture.CheckConfig).
type Capture struct {
	Start string `toml:"start"`
	Line  int    `toml:"-"` // line of start, for later errors
}

// EAL holds the DPDK EAL arguments, passed to rte_eal_init verbatim.
type EAL struct {
	Args []string `toml:"args"`
}

// Mempool sizes the mbuf pool created on each NUMA socket in use.
type Mempool struct {
	Mbufs    int `toml:"mbufs"`     // per-socket pool size; 2^n-1 is optimal for rte_mempool
	Cache    int `toml:"cache"`     // per-lcore cache, 0..512, <= mbufs/1.5
	DataRoom int `toml:"data_room"` // mbuf data room including headroom
	// Ops is the DPDK mempool driver behind the per-lcore caches: "auto"
	// (a lock-free LIFO stack where the platform's own choice is the
	// plain ring, else the platform's), or a driver's name ("ring_mp_mc",
	// "stack", "lf_stack", ...).
	Ops string `toml:"ops"`
}

func (m *Mempool) setDefaults() {
	m.Mbufs = 16383
	m.Cache = 256
	m.DataRoom = 2176 // RTE_MBUF_DEFAULT_BUF_SIZE: 2048 + 128 headroom
	m.Ops = "auto"
}

// Port is one ethdev, either a virtual device or a PCI device.
type Port struct {
	Name        string `toml:"name"`
	Vdev        string `toml:"vdev,omitempty"`    // e.g. "net_pcap0,rx_pcap=in.pcap"
	PCI         string `toml:"pci,omitempty"`     // normalised to "0000:3b:00.0"
	Devargs     string `toml:"devargs,omitempty"` // PCI devargs, e.g. "dv_flow_en=1"
	RxQueues    int    `toml:"rx_queues"`
	TxQueues    int    `toml:"tx_queues"`
	RxDesc      int    `toml:"rx_desc"`
	TxDesc      int    `toml:"tx_desc"`
	MTU         int    `toml:"mtu"`    // 0 leaves the device's MTU alone
	Socket      int    `toml:"socket"` // -1 means the device's own NUMA socket
	Promiscuous *bool  `toml:"promiscuous"`
	PeerMAC     string `toml:"peer_mac"` // destination MAC in "mac" mode, lower case
	// Addresses are the port's IPv4 and IPv6 addresses with their prefix
	// lengths: a port with addresses is routed (see Routing).
	Addresses []string `toml:"addresses,omitempty"`
	Line      int      `toml:"-"` // line of the [[port]] header, for later errors
	VdevLine  int      `toml:"-"` // line of its vdev key (the header's when absent)
}

func (p *Port) setDefaults() {
	p.RxQueues, p.TxQueues = 1, 1
	p.RxDesc, p.TxDesc = 1024, 1024
	p.Socket = -1
	on := true // like testpmd
	p.Promiscuous = &on
	// PeerMAC depends on the port index and is set during validation.
}

// Modes lists the forwarding modes, with testpmd's meanings: "io" forwards
// packets untouched, "mac" rewrites the Ethernet addresses.
var Modes = []string{"io", "mac", "roce"}

// Pipeline selects what the workers do with each burst.
type Pipeline struct {
	Mode  string `toml:"mode"`
	Burst int    `toml:"burst"`
	// MaxBursts is how many bursts a worker takes from a queue per poll
	// while they come back full: under load one trip into C serves more
	// packets; an idle queue still costs one rx call.
	MaxBursts int   `toml:"max_bursts"`
	Lcores    []int `toml:"lcores"` // explicit worker lcores; empty = all but the main lcore (no omitempty: [] must round-trip; nil is not printed)
}

// RoCE configures the "roce" mode's classification and telemetry.
type RoCE struct {
	VerifyICRC bool   `toml:"verify_icrc"` // check every RoCEv2 frame's ICRC (costs a CRC-32 per frame)
	BadICRC    string `toml:"bad_icrc"`    // "drop" (default, as a NIC would) or "forward"
	Malformed  string `toml:"malformed"`   // "forward" (default) or "drop"
	QPTable    int    `toml:"qp_table"`    // per-QP table slots per worker lcore (264 bytes each, qpstats.SlotBytes, in hugepage memory); 0 turns it off
	QPMaxAge   string `toml:"qp_max_age"`  // idle time after which a QP entry may be reused; "0s" never
}

func (r *RoCE) setDefaults() {
	r.BadICRC = "drop"
	r.Malformed = "forward"
	r.QPTable = 65536
	r.QPMaxAge = "60s"
}

// QPMaxAgeDuration is QPMaxAge parsed (validation guarantees it parses).
func (r RoCE) QPMaxAgeDuration() time.Duration {
	d, _ := time.ParseDuration(r.QPMaxAge)
	return d
}

func (p *Pipeline) setDefaults() {
	p.Mode = "io"
	p.Burst = 32
	p.MaxBursts = 4
}

// Forward sends every packet received on From out of To.
type Forward struct {
	From string `toml:"from"`
	To   string `toml:"to"`
	Line int    `toml:"-"` // line of the [[forward]] header
}

// A section is one top-level table. validate checks it, normalises values
// and fills defaults that depend on other values. Order matters where a
// check reads other sections (mempool needs the ports' MTUs).
type section struct {
	key      string
	validate func(c *checker, cfg *Config)
}

var sections = []section{
	{"eal", validateEAL},
	{"port", validatePorts},
	{"mempool", validateMempool},
	{"pipeline", validatePipeline},
	{"forward", validateForward},
	{"roce", validateRoCE},
	{"qos", validateQoS}, // also [pfc]: a port's qos.Config needs both
	{"console", validateConsole},
	{"telemetry", validateTelemetry},
	{"offload", validateOffload},
	{"routing", validateRouting}, // also [[route]] and [[neighbor]]
	{"kernel", validateKernel},
	{"impair", validateImpair},
}

// DefaultFile is the Config.File of the built-in default configuration.
const DefaultFile = "<built-in default>"

//go:embed default.toml
var defaultTOML string

// Load reads and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		msg := err.Error()
		if errors.As(err, &pe) {
			msg = pe.Err.Error()
		}
		return nil, Errors{{File: path, Msg: msg, err: err}}
	}
	return Parse(path, data)
}

// Default returns the built-in configuration: one pcap port replaying
// demoPcap forever into a null port, with no NIC and no hugepages needed.
func Default(demoPcap string) (*Config, error) {
	// A comma would end the pcap path inside the DPDK devargs.
	if demoPcap == "" || strings.ContainsAny(demoPcap, ",\n") {
		return nil, fmt.Errorf("config: demo pcap path %q must be non-empty and contain no comma or newline", demoPcap)
	}
	src := strings.ReplaceAll(defaultTOML, "@DEMO_PCAP@", escapeBasic(demoPcap))
	return Parse(DefaultFile, []byte(src))
}

// escapeBasic escapes s for use inside a TOML basic string.
func escapeBasic(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Parse parses and validates config data; name is used in error messages.
// All semantic problems are reported together, but a TOML syntax error is
// reported alone since nothing after it can be trusted.
func Parse(name string, data []byte) (*Config, error) {
	if line, why := checkShape(data); line > 0 {
		return nil, Errors{{File: name, Line: line, Key: "syntax", Msg: why}}
	}
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		return nil, syntaxError(name, data, err)
	}
	c := newChecker(name, locate(data))
	cfg := &Config{File: name}
	cv := reflect.ValueOf(cfg).Elem()
	for i := 0; i < cv.NumField(); i++ {
		if d, ok := cv.Field(i).Addr().Interface().(defaulter); ok {
			d.setDefaults()
		}
	}
	c.decode(nil, raw, cv)
	for i := range cfg.Ports {
		cfg.Ports[i].Line = c.loc.line(path{}.key("port").index(i))
		cfg.Ports[i].VdevLine = c.loc.line(path{}.key("port").index(i).key("vdev"))
	}
	for i := range cfg.Forward {
		cfg.Forward[i].Line = c.loc.line(path{}.key("forward").index(i))
	}
	if cfg.Capture != nil {
		cfg.Capture.Line = c.loc.line(path{}.key("capture").key("start"))
	}
	if im := cfg.Impair; im != nil {
		im.Line = c.loc.line(path{}.key("impair"))
		for i := range im.Rules {
			im.Lines = append(im.Lines, c.loc.line(path{}.key("impair").key("rules").index(i)))
		}
	}
	for i := range cfg.Routes {
		cfg.Routes[i].Line = c.loc.line(path{}.key("route").index(i))
	}
	for i := range cfg.Neighbors {
		cfg.Neighbors[i].Line = c.loc.line(path{}.key("neighbor").index(i))
	}
	for _, s := range sections {
		s.validate(c, cfg)
	}
	if err := c.result(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func syntaxError(name string, data []byte, err error) error {
	e := &Error{File: name, Line: 1, Key: "syntax", Msg: err.Error(), err: err}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e.Msg = pe.Message
		if pe.Position.Line > 0 {
			e.Line = pe.Position.Line
			// An unexpected end of line may be reported on the next line:
			// the mistake is on the one the newline ends ("[pipeline").
			if at := pe.Position.Start; at >= 0 && at < len(data) && data[at] == '\n' {
				e.Line = 1 + strings.Count(string(data[:at]), "\n")
			}
		}
		if k := syntaxKey(data, e.Line); k != "" {
			e.Key = k
		}
	}
	return Errors{e}
}

// Encode writes the effective configuration, defaults included, as TOML
// that Parse accepts (for "show running-config").
func (c *Config) Encode(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "# roce-fwd effective configuration, from %q\n\n", c.File); err != nil {
		return err
	}
	enc := toml.NewEncoder(w)
	enc.Indent = ""
	return enc.Encode(c)
}

// Copy returns a deep copy of c checked like a file (Encode then Parse):
// how the console edits the running config. Problems name the key and
// "the running config", not lines of the generated text; the copy keeps
// c's file name and line numbers.
func (c *Config) Copy() (*Config, error) {
	var buf strings.Builder
	if err := c.Encode(&buf); err != nil {
		return nil, err
	}
	out, err := Parse(c.File+" (running config)", []byte(buf.String()))
	if err != nil {
		var es Errors
		if errors.As(err, &es) {
			for _, e := range es {
				e.Line = 0
			}
		}
		return nil, err
	}
	out.File = c.File
	for i := range out.Ports {
		if i < len(c.Ports) && out.Ports[i].Name == c.Ports[i].Name {
			out.Ports[i].Line, out.Ports[i].VdevLine = c.Ports[i].Line, c.Ports[i].VdevLine
		}
	}
	for i := range out.Forward {
		if i < len(c.Forward) {
			out.Forward[i].Line = c.Forward[i].Line
		}
	}
	if out.Capture != nil && c.Capture != nil {
		out.Capture.Line = c.Capture.Line
	}
	if out.Impair != nil && c.Impair != nil {
		out.Impair.Line, out.Impair.Lines = c.Impair.Line, slices.Clone(c.Impair.Lines)
	}
	for i := range out.Routes {
		if i < len(c.Routes) && out.Routes[i].Prefix == c.Routes[i].Prefix {
			out.Routes[i].Line = c.Routes[i].Line
		}
	}
	for i := range out.Neighbors {
		if i < len(c.Neighbors) && out.Neighbors[i].IP == c.Neighbors[i].IP {
			out.Neighbors[i].Line = c.Neighbors[i].Line
		}
	}
	return out, nil
}

// PortByName returns the index of the port called name.
func (c *Config) PortByName(name string) (int, bool) {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return i, true
		}
	}
	return -1, false
}

// PortID resolves a port as a console command names it, before any port
// is open: by name, or by its index in [[port]] (the id it will get).
func (c *Config) PortID(s string) (uint16, error) {
	if i, ok := c.PortByName(s); ok {
		return uint16(i), nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(c.Ports) {
		return uint16(n), nil
	}
	var names []string
	for _, p := range c.Ports {
		names = append(names, strconv.Quote(p.Name))
	}
	return 0, fmt.Errorf("port %q: not a port (%s)", s, strings.Join(names, ", "))
}
