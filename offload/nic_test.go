package offload

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roce-fwd/config"
	"roce-fwd/flowrule"
	"roce-fwd/internal/testenv"
	ethports "roce-fwd/ports"
)

func TestMain(m *testing.M) { testenv.Main(m, "offload") }

// openProbed brings up vdev ports with the manager probing each between
// set-up and start, as the daemon does.
func openProbed(t *testing.T, backend string, vdevs ...string) (*Manager, *ethports.Set, *fakeSW) {
	t.Helper()
	src := "[eal]\nargs = [\"--no-huge\"]\n"
	for i, v := range vdevs {
		src += fmt.Sprintf("[[port]]\nname = \"p%d\"\nvdev = %q\n", i, v)
	}
	src += "[[forward]]\nfrom = \"p0\"\nto = \"p0\"\n"
	cfg, err := config.Parse("offload.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(backend)
	if err != nil {
		t.Fatal(err)
	}
	set, err := ethports.OpenWith(cfg, 1, func(p *ethports.Port) error {
		return m.AddPort(PortInfo{ID: uint16(p.ID), Name: p.Name, Driver: p.Info.Driver}, NIC(p.ID))
	})
	if err != nil {
		t.Fatalf("vdevs %v: %v", vdevs, err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	sw := &fakeSW{counters: make([]flowrule.Counter, 16)}
	m.Start(sw)
	return m, set, sw
}

var vdevSeq int

func vdev(format string) string {
	vdevSeq++
	return fmt.Sprintf(format, vdevSeq)
}

// PMDs without rte_flow: every rule runs in software, and says why in
// the sentence an operator reads.
func TestVdevsWithoutFlowEngine(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "in.pcap")
	testenv.WritePcap(t, pcap, testenv.Frames(4))
	m, set, sw := openProbed(t, "auto",
		vdev("net_null%d,no-rx=1"), vdev("net_ring%d"), vdev("net_pcap%d,rx_pcap="+pcap+",infinite_rx=1"))
	for i, st := range m.Ports() {
		p := set.Ports[i]
		if st.Backend != BackendSoftware || st.Caps.Engine != "none" || st.Caps.Driver != p.Info.Driver {
			t.Errorf("%s: backend %v engine %q driver %q", p.Info.Driver, st.Backend, st.Caps.Engine, st.Caps.Driver)
		}
		e, err := m.Create(uint16(p.ID), mustRule(t, roceCount), true)
		if err != nil {
			t.Fatalf("%s: %v", p.Info.Driver, err)
		}
		want := fmt.Sprintf("port %d (%s) has no flow engine; rule runs in software", p.ID, p.Info.Driver)
		if e.Where != InSoftware || e.Why != want {
			t.Errorf("%s: %v %q, want sw %q", p.Info.Driver, e.Where, e.Why, want)
		}
		if sw.tables[uint16(p.ID)] == nil {
			t.Errorf("%s: no software table", p.Info.Driver)
		}
	}
}

func TestAfPacketWithoutFlowEngine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("net_af_packet needs root")
	}
	m, set, _ := openProbed(t, "auto", vdev("net_af_packet%d,iface=lo"))
	if st := m.Ports()[0]; st.Backend != BackendSoftware || st.Caps.Engine != "none" {
		t.Errorf("%s: backend %v engine %q", set.Ports[0].Info.Driver, st.Backend, st.Caps.Engine)
	}
}

// net_tap has a synchronous engine that validates some shapes; on a
// kernel without cls_flower it cannot create them, which the trial create
// finds. Either way every rule ends up somewhere, with a reason.
func TestTapProbeAndFallback(t *testing.T) {
	needTap(t)
	m, set, sw := openProbed(t, "auto", vdev("net_tap%d,iface=rfoff"+fmt.Sprint(os.Getpid()%1000)))
	p := set.Ports[0]
	st := m.Ports()[0]
	if st.Caps.Engine != "rte_flow" || len(st.Caps.Shapes) != len(shapes) {
		t.Fatalf("engine %q with %d shapes, want rte_flow and the matrix", st.Caps.Engine, len(st.Caps.Shapes))
	}
	ok := map[string]bool{}
	for _, s := range st.Caps.Shapes {
		ok[s.Name] = s.Err == nil
		t.Logf("%-32s %v", s.Name, s.Err)
	}
	// What tap's flow engine takes and refuses (drivers/net/tap/tap_flow.c).
	if !ok["udp 4791 → queue"] || !ok["group 1 rule"] || ok["udp 4791 → mark + count"] || ok["udp 4791 → set dscp"] || ok["cnp (dscp 48, udp 4791) → queue"] {
		t.Errorf("validate matrix %v differs from tap's engine", ok)
	}
	if !st.Caps.Tried {
		t.Fatal("no trial create")
	}
	refused := "ingress pattern eth / ipv4 / udp dst is 4791 / end actions mark id 1 / count / end"
	e, err := m.Create(uint16(p.ID), mustRule(t, refused), true)
	if err != nil || e.Where != InSoftware {
		t.Fatalf("mark rule: %+v %v, want software", e, err)
	}
	if st.Caps.Trial != nil {
		t.Logf("trial create refused: %v", st.Caps.Trial)
		if st.Backend != BackendSoftware || !strings.Contains(e.Why, "validates rules but could not create one") {
			t.Errorf("backend %v, why %q", st.Backend, e.Why)
		}
	} else {
		if st.Backend != BackendRTEFlow || !strings.Contains(e.Why, "net_tap refused it") {
			t.Errorf("backend %v, why %q", st.Backend, e.Why)
		}
		hw, err := m.Create(uint16(p.ID), mustRule(t, "ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 0 / end"), true)
		if err != nil || hw.Where != InHardware {
			t.Errorf("queue rule: %+v %v, want hw", hw, err)
		}
	}
	if sw.tables[uint16(p.ID)] == nil {
		t.Error("no software table for the refused rule")
	}
}

// Asked for the template API, which tap does not have, the port says so.
func TestTemplateRequestedOnTap(t *testing.T) {
	needTap(t)
	m2, _, _ := openProbed(t, "template", vdev("net_tap%d,iface=rftpl"+fmt.Sprint(os.Getpid()%1000)))
	if st := m2.Ports()[0]; st.Backend != BackendSoftware || !strings.Contains(st.Caps.Note, "no template API") {
		t.Errorf("template on tap: %v %q", st.Backend, st.Caps.Note)
	}
}

func needTap(t *testing.T) {
	if _, err := os.Stat("/dev/net/tun"); err != nil || os.Geteuid() != 0 {
		t.Skip("net_tap needs /dev/net/tun and root")
	}
}
