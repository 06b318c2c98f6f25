package hwpfc

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"roce-fwd/internal/fixture"
	"roce-fwd/qos"
	"roce-fwd/roce"
)

// call is one SetPriorityFlowCtrl call.
type call struct {
	prio      uint8
	high, low uint32
	pause     uint16
	sendXON   bool
}

// fakeHW records calls and fails with errs[prio] when set.
type fakeHW struct {
	calls []call
	errs  map[uint8]error
}

func (f *fakeHW) SetPriorityFlowCtrl(prio uint8, high, low uint32, pause uint16, xon bool) error {
	f.calls = append(f.calls, call{prio, high, low, pause, xon})
	return f.errs[prio]
}

// failAll fails every priority with err.
func failAll(err error) *fakeHW {
	f := &fakeHW{errs: map[uint8]error{}}
	for p := range uint8(8) {
		f.errs[p] = err
	}
	return f
}

// dpdkError mimics *dpdk.Error: an errno behind errors.Is.
type dpdkError struct{ errno syscall.Errno }

func (e *dpdkError) Error() string {
	return fmt.Sprintf("port 0: priority flow control on priority 3: %v (errno %d)", e.errno, int(e.errno))
}
func (e *dpdkError) Is(target error) bool { t, ok := target.(syscall.Errno); return ok && t == e.errno }

var (
	errNotSup = &dpdkError{syscall.ENOTSUP}
	errNoSys  = &dpdkError{syscall.ENOSYS}
	errInval  = &dpdkError{syscall.EINVAL}
)

const (
	mlxPCI    = "0000:3b:00.0"
	mlxNetdev = "enp59s0f0np0"
	ionicPCI  = "0000:b5:00.0"
	bareMLX   = "0000:5e:00.0" // mlx5 without a netdev
)

// sysfs writes a fixture tree: mlx5 and ionic functions with netdevs, and
// one mlx5 function without.
func sysfs(t *testing.T) string {
	root := t.TempDir()
	dev := func(addr string) string { return filepath.Join(root, "bus", "pci", "devices", addr) }
	fixture.WriteFile(t, filepath.Join(dev(mlxPCI), "net", mlxNetdev, "ifindex"), "4\n")
	fixture.WriteFile(t, filepath.Join(dev(ionicPCI), "net", "enp181s0", "ifindex"), "5\n")
	fixture.WriteFile(t, filepath.Join(dev(bareMLX), "vendor"), "0x15b3\n")
	return root
}

func TestResolveTable(t *testing.T) {
	root := sysfs(t)
	type want struct {
		mode   string // "" when only an error is expected
		err    string // substring; "" = no error
		detail string // substring of Detail
		cmds   bool   // Commands non-empty
	}
	tests := []struct {
		name   string
		driver string
		pci    string
		hw     func() Setter
		modes  map[string]want
	}{
		{"null", "net_null", "", func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto:     {mode: Software, detail: "no priority flow control op (ENOTSUP)"},
			"":       {mode: Software, detail: "roce-fwd sends and honours PFC on priority 3 itself"},
			Hardware: {err: `port out (net_null): pfc_mode = "hardware": the PMD has no priority flow control op (ENOTSUP); use "auto" or "software"`},
			Software: {mode: Software, detail: `pfc_mode = "software"`},
		}},
		{"ring nil op", "net_ring", "", func() Setter { return nil }, map[string]want{
			Auto:     {mode: Software, detail: "ENOTSUP"},
			Hardware: {err: "no priority flow control op (ENOTSUP)"},
		}},
		{"i40e stub", "net_i40e", "0000:18:00.0", func() Setter { return failAll(errNoSys) }, map[string]want{
			Auto:     {mode: Software, detail: "stub that returns ENOSYS"},
			Hardware: {err: `port out (net_i40e): pfc_mode = "hardware": the PMD's priority flow control op is a stub that returns ENOSYS; use "auto" or "software"`},
			Software: {mode: Software},
		}},
		{"ixgbe ok", "net_ixgbe", "0000:04:00.0", func() Setter { return &fakeHW{} }, map[string]want{
			Auto:     {mode: Hardware, detail: "programmed in the NIC"},
			Hardware: {mode: Hardware, detail: "pause 65535 quanta"},
			Software: {mode: Software},
		}},
		{"ixgbe rejects", "net_ixgbe", "0000:04:00.0", func() Setter { return failAll(errInval) }, map[string]want{
			Auto:     {mode: Software, detail: "the PMD rejected priority flow control on priority 3"},
			Hardware: {err: "the PMD rejected priority flow control on priority 3: port 0: priority flow control on priority 3: invalid argument"},
		}},
		{"mlx5_pci", "mlx5_pci", mlxPCI, func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto:     {mode: Kernel, detail: "kernel netdev " + mlxNetdev, cmds: true},
			"":       {mode: Kernel, cmds: true},
			Hardware: {mode: Kernel, cmds: true, err: `port out (mlx5_pci): pfc_mode = "hardware": the PMD has no priority flow control op (ENOTSUP); on mlx5, PFC is set on the kernel netdev enp59s0f0np0, not through DPDK: use "auto" (which prints what to run on enp59s0f0np0) or "software"`},
			Software: {mode: Software},
		}},
		{"net_mlx5 short pci", "net_mlx5", "3B:00.0", func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto: {mode: Kernel, cmds: true},
		}},
		{"mlx5 no netdev", "mlx5_pci", bareMLX, func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto:     {mode: Software, detail: "has no kernel netdev"},
			Hardware: {err: "0000:5e:00.0 has no kernel netdev"},
		}},
		{"mlx5 vdev-like", "mlx5_pci", "", func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto: {mode: Software, detail: "no PCI address"},
		}},
		{"ionic netdev", "net_ionic", ionicPCI, func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto:     {mode: Kernel, detail: "no DCB netlink support"},
			Hardware: {mode: Kernel, err: "on ionic, PFC is set on the kernel netdev enp181s0"},
			Software: {mode: Software},
		}},
		{"ionic vfio", "net_ionic", "0000:b6:00.0", func() Setter { return failAll(errNotSup) }, map[string]want{
			Auto:     {mode: Software, detail: "has no kernel netdev"},
			Hardware: {err: "ENOTSUP"},
		}},
	}
	for _, tc := range tests {
		for mode, w := range tc.modes {
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				in := Input{Mode: mode, Port: "out", Driver: tc.driver, PCI: tc.pci,
					Lossless: 1 << 3, QoS: qos.NVIDIARoCE(), HW: tc.hw(), SysfsRoot: root}
				res, err := Resolve(in)
				switch {
				case w.err == "" && err != nil:
					t.Fatalf("unexpected error: %v", err)
				case w.err != "" && err == nil:
					t.Fatalf("no error, want %q; result %+v", w.err, res)
				case w.err != "" && !strings.Contains(err.Error(), w.err):
					t.Fatalf("error\n%v\nwant it to contain\n%s", err, w.err)
				}
				if res.Mode != w.mode {
					t.Errorf("mode %q, want %q (detail %q)", res.Mode, w.mode, res.Detail)
				}
				if w.detail != "" && !strings.Contains(res.Detail, w.detail) {
					t.Errorf("detail %q does not contain %q", res.Detail, w.detail)
				}
				if (len(res.Commands) > 0) != w.cmds {
					t.Errorf("commands %q, want some: %v", res.Commands, w.cmds)
				}
				if res.Port != "out" {
					t.Errorf("port %q", res.Port)
				}
				if res.Mode == Kernel && res.Netdev == "" {
					t.Error("kernel mode without a netdev")
				}
			})
		}
	}
}

func TestResolveCallsOp(t *testing.T) {
	cfg := qos.SONiCAzure() // lossless 3 and 4
	cfg.PFC.Quanta = 0x1234
	hw := &fakeHW{}
	res, err := Resolve(Input{Port: "p0", Driver: "net_ixgbe", Lossless: cfg.PFCPriorities(), QoS: cfg, HW: hw,
		HighWater: 200, LowWater: 150})
	if err != nil || res.Mode != Hardware {
		t.Fatalf("%+v %v", res, err)
	}
	want := []call{{3, 200, 150, 0x1234, true}, {4, 200, 150, 0x1234, true}}
	if !slices.Equal(hw.calls, want) {
		t.Errorf("calls %+v, want %+v", hw.calls, want)
	}
	if !strings.Contains(res.Detail, "priorities 3,4") {
		t.Errorf("detail %q", res.Detail)
	}

	// Defaults: ixgbe's watermarks, DefaultQuanta.
	hw = &fakeHW{}
	cfg.PFC.Quanta = 0
	if _, err := Resolve(Input{Driver: "net_ixgbe", Lossless: 1 << 3, QoS: cfg, HW: hw}); err != nil {
		t.Fatal(err)
	}
	if want := []call{{3, DefaultHighWater, DefaultLowWater, qos.DefaultQuanta, true}}; !slices.Equal(hw.calls, want) {
		t.Errorf("calls %+v, want %+v", hw.calls, want)
	}

	// Software never calls the op.
	hw = &fakeHW{}
	if res, err := Resolve(Input{Mode: Software, Driver: "net_ixgbe", Lossless: 1 << 3, QoS: cfg, HW: hw}); err != nil || res.Mode != Software || len(hw.calls) != 0 {
		t.Errorf("%+v %v, %d calls", res, err, len(hw.calls))
	}
	// Nothing lossless: nothing to program, whatever the mode.
	for _, mode := range []string{Auto, Hardware, Software} {
		hw = &fakeHW{}
		res, err := Resolve(Input{Mode: mode, Driver: "net_null", QoS: qos.DefaultConfig(), HW: failAll(errNotSup)})
		if err != nil || res.Mode != Software || !strings.Contains(res.Detail, "PFC is off") || len(hw.calls) != 0 {
			t.Errorf("%s: %+v %v", mode, res, err)
		}
	}
}

func TestResolvePartialFailure(t *testing.T) {
	hw := &fakeHW{errs: map[uint8]error{4: errInval}}
	for _, mode := range []string{Auto, Hardware} {
		hw.calls = nil
		_, err := Resolve(Input{Mode: mode, Port: "p1", Driver: "net_ixgbe", Lossless: 1<<3 | 1<<4, QoS: qos.SONiCAzure(), HW: hw})
		if err == nil || !strings.Contains(err.Error(), "programmed in the NIC for priority 3 but failed for priority 4") {
			t.Errorf("%s: %v", mode, err)
		}
		if !errors.Is(err, syscall.EINVAL) {
			t.Errorf("%s: error does not wrap the op's: %v", mode, err)
		}
	}
}

func TestResolveBadMode(t *testing.T) {
	_, err := Resolve(Input{Mode: "firmware", Port: "p0", Driver: "net_null", Lossless: 8})
	if err == nil || err.Error() != `port p0 (net_null): pfc_mode = "firmware": must be "auto", "hardware" or "software"` {
		t.Errorf("%v", err)
	}
	for _, m := range []string{"", Auto, Hardware, Software} {
		if err := CheckMode(m); err != nil {
			t.Error(err)
		}
	}
	if CheckMode(Kernel) == nil {
		t.Error(`"kernel" is a result, not a configurable mode`)
	}
}

func TestSeveralNetdevs(t *testing.T) {
	root := t.TempDir()
	for _, n := range []string{"eth3", "eth2"} {
		fixture.WriteFile(t, filepath.Join(root, "bus/pci/devices", mlxPCI, "net", n, "ifindex"), "1\n")
	}
	res, err := Resolve(Input{Driver: "mlx5_pci", PCI: mlxPCI, Lossless: 8, QoS: qos.NVIDIARoCE(), HW: failAll(errNotSup), SysfsRoot: root})
	if err != nil || res.Netdev != "eth2" || !strings.Contains(res.Detail, "several netdevs (eth2, eth3)") {
		t.Errorf("%+v %v", res, err)
	}
	if !strings.HasPrefix(res.Commands[0], "dcb pfc set dev eth2 ") {
		t.Errorf("%q", res.Commands[0])
	}
}

// dscpAll is the dscp-prio list of NVIDIARoCE: 26 → 3, 48 → 6, the rest 0.
func dscpAll() string {
	var m []string
	for d := range 64 {
		p := 0
		switch d {
		case 26:
			p = 3
		case 48:
			p = 6
		}
		m = append(m, fmt.Sprintf("%d:%d", d, p))
	}
	return strings.Join(m, " ")
}

func TestNVIDIARoCECommands(t *testing.T) {
	cfg := qos.NVIDIARoCE()
	res, err := Resolve(Input{Port: "p0", Driver: "mlx5_pci", PCI: mlxPCI, Lossless: cfg.PFCPriorities(), QoS: cfg,
		HW: failAll(errNotSup), SysfsRoot: sysfs(t)})
	if err != nil || res.Mode != Kernel || res.Netdev != mlxNetdev {
		t.Fatalf("%+v %v", res, err)
	}
	want := []string{
		"dcb pfc set dev enp59s0f0np0 prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off",
		"dcb ets set dev enp59s0f0np0 tc-tsa 0:ets 1:ets 2:ets 3:ets 4:ets 5:ets 6:strict 7:ets tc-bw 0:50 1:0 2:0 3:50 4:0 5:0 6:0 7:0",
		"dcb ets set dev enp59s0f0np0 prio-tc 0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7",
		"dcb app add dev enp59s0f0np0 dscp-prio " + dscpAll(),
	}
	if !slices.Equal(res.Commands, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(res.Commands, "\n"), strings.Join(want, "\n"))
	}
	// mlnx_qos: every DSCP from 8 up except 26 and 48 differs from the
	// firmware map DSCP >> 3 (e.g. 24 and 25 would otherwise be lossless).
	var set []string
	for d := 8; d < 64; d++ {
		if d != 26 && d != 48 {
			set = append(set, fmt.Sprintf("--dscp2prio set,%d,0", d))
		}
	}
	wantAlt := []string{
		"mlnx_qos -i enp59s0f0np0 --dscp2prio flush",
		"mlnx_qos -i enp59s0f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0 --prio_tc 0,1,2,3,4,5,6,7 --tsa ets,ets,ets,ets,ets,ets,strict,ets --tcbw 50,0,0,50,0,0,0,0",
		"mlnx_qos -i enp59s0f0np0 " + strings.Join(set, " "),
	}
	if !slices.Equal(res.Alternative, wantAlt) {
		t.Errorf("alternative:\n%s\nwant:\n%s", strings.Join(res.Alternative, "\n"), strings.Join(wantAlt, "\n"))
	}
	if strings.Contains(res.Detail, "no priority maps") {
		t.Errorf("unexpected note: %s", res.Detail)
	}
	for _, c := range append(res.Commands, res.Alternative...) {
		t.Log(c)
	}
}

func TestPCPTrustCommands(t *testing.T) {
	cfg := qos.SONiCAzure()
	cfg.TCMap.Trust = roce.TrustPCP
	cfg.TCMap.PCP[5] = 1 // the NIC cannot follow this: PCP 5 is priority 5, TC5
	cmds := DCBCommands("eth2", cfg.PFCPriorities(), &cfg)
	want := []string{
		"dcb pfc set dev eth2 prio-pfc 0:off 1:off 2:off 3:on 4:on 5:off 6:off 7:off",
		"dcb ets set dev eth2 tc-tsa 0:ets 1:ets 2:ets 3:ets 4:ets 5:ets 6:ets 7:ets tc-bw 0:12 1:12 2:12 3:14 4:14 5:12 6:12 7:12",
		"dcb ets set dev eth2 prio-tc 0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7",
		"dcb app flush dev eth2 dscp-prio",
	}
	if !slices.Equal(cmds, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(cmds, "\n"), strings.Join(want, "\n"))
	}
	alt := MlnxQosCommands("eth2", cfg.PFCPriorities(), &cfg)
	wantAlt := []string{"mlnx_qos -i eth2 --trust pcp --pfc 0,0,0,1,1,0,0,0 --prio_tc 0,1,2,3,4,5,6,7 --tsa ets,ets,ets,ets,ets,ets,ets,ets --tcbw 12,12,12,14,14,12,12,12"}
	if !slices.Equal(alt, wantAlt) {
		t.Errorf("alternative %q", alt)
	}
	notes := strings.Join(mapNotes(&cfg), "; ")
	if !strings.Contains(notes, "PCP 5: TC1, NIC TC5") {
		t.Errorf("notes %q", notes)
	}
}

func TestDSCPToPrioUsesTCToPrio(t *testing.T) {
	cfg := qos.NVIDIARoCE()
	// Priorities 3 and 4 both go to TC3; 6 goes to TC5 (and nothing to TC6).
	cfg.PrioToTC = [8]uint8{0, 1, 2, 3, 3, 6, 5, 7}
	m := DSCPToPrio(&cfg)
	if m[26] != 3 || m[48] != 5 || m[0] != 0 {
		t.Errorf("26→%d 48→%d 0→%d", m[26], m[48], m[0])
	}
	cfg.PrioToTC = [8]uint8{0, 1, 2, 3, 4, 5, 7, 7} // no priority for TC6
	if notes := strings.Join(mapNotes(&cfg), "; "); !strings.Contains(notes, "no priority maps to TC 6") {
		t.Errorf("notes %q", notes)
	}
}

func TestETSBandwidth(t *testing.T) {
	nv, sonic, def := qos.NVIDIARoCE(), qos.SONiCAzure(), qos.DefaultConfig()
	for _, tc := range []struct {
		cfg  *qos.Config
		want [8]uint8
	}{
		{&nv, [8]uint8{50, 0, 0, 50, 0, 0, 0, 0}},
		{&sonic, [8]uint8{12, 12, 12, 14, 14, 12, 12, 12}},
		{&def, [8]uint8{13, 13, 13, 13, 12, 12, 12, 12}},
	} {
		if got := ETSBandwidth(tc.cfg); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.cfg.Name, got, tc.want)
		}
	}
	var strict qos.Config
	for i := range strict.TC {
		strict.TC[i].Mode = qos.Strict
	}
	if got := ETSBandwidth(&strict); got != [8]uint8{} {
		t.Errorf("all strict: %v", got)
	}
	// Any weights: ETS TCs sum to 100, strict ones are 0.
	for seed := uint32(1); seed < 2000; seed++ {
		var c qos.Config
		x := seed
		for i := range c.TC {
			x = x*1103515245 + 12345
			if x>>29 == 0 {
				c.TC[i].Mode = qos.Strict
			}
			c.TC[i].Weight = 1 + (x>>8)%255
		}
		pct := ETSBandwidth(&c)
		sum, ets := 0, false
		for i, p := range pct {
			if c.TC[i].Mode == qos.Strict {
				if p != 0 {
					t.Fatalf("%+v: strict TC%d gets %d%%", c.TC, i, p)
				}
				continue
			}
			ets = true
			sum += int(p)
		}
		if ets && sum != 100 {
			t.Fatalf("weights %+v: %v sums to %d", c.TC, pct, sum)
		}
	}
}

func TestFamily(t *testing.T) {
	for drv, want := range map[string]string{
		"mlx5_pci": "mlx5", "net_mlx5": "mlx5", "mlx5_auxiliary": "mlx5", "net_ionic": "ionic",
		"net_i40e": "i40e", "net_null": "null", "net_ring": "ring", "": "",
	} {
		if got := family(drv); got != want {
			t.Errorf("%q: %q, want %q", drv, got, want)
		}
	}
}
