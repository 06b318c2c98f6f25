// Package hwpfc decides, for one roce-fwd port, who implements 802.1Qbb
// priority flow control, from the configured pfc_mode:
//
//   - "software": roce-fwd's qos package builds and parses PFC frames
//     (PFCTx from its egress queue depth, PFCRx on every ingress port).
//   - "hardware": the NIC does, programmed through the PMD's ethdev op
//     rte_eth_dev_priority_flow_ctrl_set, one call per lossless priority.
//     A port whose PMD has no such op is an error.
//   - "auto" (also the empty string): hardware when the PMD implements the
//     op; on mlx5 (and ionic) with a kernel netdev, "kernel" (below);
//     software otherwise.
//
// The result's Mode is "hardware", "software" or "kernel". "kernel" means
// that the NIC does PFC, but roce-fwd cannot program it: in DPDK 22.11
// neither mlx5 nor ionic implements the op. mlx5 is a bifurcated driver:
// PFC, ETS, the priority → TC map and the DSCP trust state of a ConnectX
// or BlueField port belong to the kernel driver (mlx5_core) and are set on
// the port's netdev through DCB netlink, so Resolve returns the exact
// iproute2 dcb commands (and their MLNX_OFED mlnx_qos equivalents) that
// give the netdev the PFC priorities and the ETS, priority → TC and
// DSCP → priority maps of the port's qos.Config. The upstream ionic driver
// registers no DCB netlink operations, so for ionic Resolve says where the
// setting lives but has no command to print.
//
// Decision: in "hardware" and "kernel" modes roce-fwd does not generate
// PFC in software. The NIC sends PFC from its own receive buffer
// occupancy and acts on received PFC frames in the MAC; software XOFF and
// XON frames sent on the same link would interleave with the NIC's, and
// an XON from either would end a pause the other still needs. So the
// daemon runs software PFC (qos.PFCTx and qos.PFCRx) only when Mode is
// "software". A consequence the daemon must handle: with the NIC doing PFC,
// a full lossless egress queue in roce-fwd pushes back on the sender only
// through the NIC, i.e. by leaving frames in the receive ring.
//
// Nothing here calls DPDK: the ethdev op is a Setter (dpdk.Port
// implements it) so that the decision is testable without a NIC, and the
// netdev is found under a sysfs root.
package hwpfc

import (
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"roce-fwd/pcidev"
	"roce-fwd/qos"
)

// Modes: the three pfc_mode values a configuration asks for, and the
// three a Result reports.
const (
	Auto     = "auto"
	Hardware = "hardware"
	Software = "software"
	Kernel   = "kernel" // Result only: the NIC does PFC, set up on the kernel netdev
)

// CheckMode validates a configured pfc_mode; "" means Auto.
func CheckMode(mode string) error {
	switch mode {
	case "", Auto, Hardware, Software:
		return nil
	}
	return fmt.Errorf("pfc_mode = %q: must be %q, %q or %q", mode, Auto, Hardware, Software)
}

// Setter programs PFC for one priority in the NIC. dpdk.Port implements
// it (rte_eth_dev_priority_flow_ctrl_set with RTE_ETH_FC_FULL). A PMD
// without the op returns an error that errors.Is syscall.ENOTSUP (or,
// for a stub such as i40e's in DPDK 22.11, syscall.ENOSYS).
type Setter interface {
	SetPriorityFlowCtrl(prio uint8, highWater, lowWater uint32, pauseTime uint16, sendXON bool) error
}

// SetterFunc adapts a function to Setter.
type SetterFunc func(prio uint8, highWater, lowWater uint32, pauseTime uint16, sendXON bool) error

// SetPriorityFlowCtrl calls f.
func (f SetterFunc) SetPriorityFlowCtrl(prio uint8, highWater, lowWater uint32, pauseTime uint16, sendXON bool) error {
	return f(prio, highWater, lowWater, pauseTime, sendXON)
}

// NIC receive-buffer watermarks used when Input leaves them 0: the DPDK
// ixgbe PMD's own defaults (IXGBE_FC_HI, IXGBE_FC_LO), in its unit of
// 1 KB. They are the NIC's thresholds, unrelated to qos.PFCConfig's Xoff
// and Xon, which count bytes held in roce-fwd's egress queues.
const (
	DefaultHighWater = 0x80
	DefaultLowWater  = 0x40
)

// DefaultSysfsRoot is where Input.SysfsRoot "" looks for netdevs.
const DefaultSysfsRoot = "/sys"

// Input describes one port.
type Input struct {
	Mode      string     // configured pfc_mode: "auto" (or ""), "hardware" or "software"
	Port      string     // roce-fwd's name for the port, for messages
	Driver    string     // ethdev driver name (dev_info): "mlx5_pci", "net_i40e", "net_null", ...
	PCI       string     // PCI address, "0000:3b:00.0" or "3b:00.0"; "" for virtual devices
	Lossless  uint8      // bit p: PFC on priority p; normally QoS.PFCPriorities()
	QoS       qos.Config // the port's QoS, for the pause time and the kernel commands
	HW        Setter     // the ethdev op, normally the dpdk.Port; nil: the PMD has none
	SysfsRoot string     // "" = DefaultSysfsRoot

	// NIC watermarks for the ethdev op, in the PMD's units; 0 = the
	// defaults above. The pause time is QoS.PFC.Quanta (0 = qos.DefaultQuanta).
	HighWater, LowWater uint32
}

// Result is the decision for one port.
type Result struct {
	Port   string
	Mode   string // Hardware, Software or Kernel
	Detail string // why, and what the operator should know, in one line
	Netdev string // the kernel interface, when Mode is Kernel

	// Commands, when Mode is Kernel, configure the netdev with iproute2's
	// dcb; Alternative does the same with MLNX_OFED's mlnx_qos. Run one
	// set or the other, as root.
	Commands    []string
	Alternative []string
}

// Resolve decides how port in does PFC, calling in.HW for each lossless
// priority in modes "auto" and "hardware". The error is non-nil when
// "hardware" was asked for and is not available, when the op failed after
// programming some priorities (the NIC is then left half configured), or
// when the mode is invalid. With an error, the Result still says what was
// found (for mlx5, the kernel commands).
func Resolve(in Input) (Result, error) {
	res := Result{Port: in.Port}
	label := portLabel(in)
	mode := in.Mode
	if mode == "" {
		mode = Auto
	}
	if err := CheckMode(in.Mode); err != nil {
		return res, fmt.Errorf("%s: %w", label, err)
	}
	if in.Lossless == 0 {
		res.Mode = Software
		res.Detail = "no priority is lossless: PFC is off"
		return res, nil
	}
	if mode == Software {
		res.Mode = Software
		res.Detail = fmt.Sprintf("pfc_mode = \"software\": roce-fwd sends and honours PFC on priorit%s itself", prioWord(in.Lossless))
		return res, nil
	}

	high, low := in.HighWater, in.LowWater
	if high == 0 {
		high = DefaultHighWater
	}
	if low == 0 {
		low = DefaultLowWater
	}
	quanta := in.QoS.PFC.Quanta
	if quanta == 0 {
		quanta = qos.DefaultQuanta
	}
	var done uint8
	var opErr error
	var failed uint8
	for p := range uint8(qos.NumTC) {
		if in.Lossless&(1<<p) == 0 {
			continue
		}
		if in.HW == nil {
			opErr = syscall.ENOTSUP
		} else {
			opErr = in.HW.SetPriorityFlowCtrl(p, high, low, quanta, true)
		}
		if opErr != nil {
			failed = p
			break
		}
		done |= 1 << p
	}
	if opErr == nil {
		res.Mode = Hardware
		res.Detail = fmt.Sprintf("PFC on priorit%s is programmed in the NIC (rte_eth_dev_priority_flow_ctrl_set: XOFF above %d, XON below %d in the PMD's units, pause %d quanta)",
			prioWord(in.Lossless), high, low, quanta)
		return res, nil
	}
	if done != 0 {
		return res, fmt.Errorf("%s: pfc_mode = %q: PFC is programmed in the NIC for priorit%s but failed for priority %d: %w; the NIC is left with PFC on part of the lossless priorities",
			label, mode, prioWord(done), failed, opErr)
	}

	notImpl := errors.Is(opErr, syscall.ENOTSUP) || errors.Is(opErr, syscall.ENOSYS)
	var why string
	switch {
	case in.HW == nil || errors.Is(opErr, syscall.ENOTSUP):
		why = "the PMD has no priority flow control op (ENOTSUP)"
	case errors.Is(opErr, syscall.ENOSYS):
		why = "the PMD's priority flow control op is a stub that returns ENOSYS"
	default:
		why = fmt.Sprintf("the PMD rejected priority flow control on priority %d: %v", failed, opErr)
	}

	fam := family(in.Driver)
	var notes []string
	if notImpl && (fam == "mlx5" || fam == "ionic") {
		nd, note := findNetdev(in)
		if nd != "" {
			res = kernelResult(in, fam, nd, note)
			if mode == Hardware {
				return res, fmt.Errorf("%s: pfc_mode = \"hardware\": %s; on %s, PFC is set on the kernel netdev %s, not through DPDK: use \"auto\" (which prints what to run on %s) or \"software\"",
					label, why, fam, nd, nd)
			}
			return res, nil
		}
		notes = append(notes, note)
	}
	if mode == Hardware {
		msg := fmt.Sprintf("%s: pfc_mode = \"hardware\": %s", label, why)
		if len(notes) > 0 {
			msg += "; " + strings.Join(notes, "; ")
		}
		return res, errors.New(msg + "; use \"auto\" or \"software\"")
	}
	res.Mode = Software
	res.Detail = strings.Join(append(append([]string{why}, notes...),
		fmt.Sprintf("roce-fwd sends and honours PFC on priorit%s itself", prioWord(in.Lossless))), "; ")
	return res, nil
}

func kernelResult(in Input, fam, netdev, note string) Result {
	res := Result{Port: in.Port, Mode: Kernel, Netdev: netdev}
	var detail []string
	switch fam {
	case "mlx5":
		res.Commands = DCBCommands(netdev, in.Lossless, &in.QoS)
		res.Alternative = MlnxQosCommands(netdev, in.Lossless, &in.QoS)
		detail = append(detail, fmt.Sprintf("mlx5 has no priority flow control op in DPDK 22.11: PFC, ETS and trust of a ConnectX/BlueField port belong to its kernel netdev %s (bifurcated driver); run the dcb commands (or the mlnx_qos ones) on %s to enable PFC on priorit%s, and roce-fwd does not send PFC itself",
			netdev, netdev, prioWord(in.Lossless)))
		detail = append(detail, mapNotes(&in.QoS)...)
	case "ionic":
		detail = append(detail, fmt.Sprintf("ionic has no priority flow control op in DPDK 22.11, and the upstream Linux ionic driver has no DCB netlink support, so neither roce-fwd nor dcb can set it: enable PFC on priorit%s in the card's QoS configuration with AMD Pensando's tools for %s; roce-fwd does not send PFC itself",
			prioWord(in.Lossless), netdev))
	}
	if note != "" {
		detail = append(detail, note)
	}
	res.Detail = strings.Join(detail, "; ")
	return res
}

// findNetdev returns the kernel interface of in's PCI function, or "" and
// why there is none. With several it takes the first by name and says so.
func findNetdev(in Input) (string, string) {
	if in.PCI == "" {
		return "", "the port has no PCI address, so no kernel netdev to configure"
	}
	addr, err := pcidev.NormalizeAddr(in.PCI)
	if err != nil {
		return "", err.Error()
	}
	root := in.SysfsRoot
	if root == "" {
		root = DefaultSysfsRoot
	}
	dir := filepath.Join(root, "bus", "pci", "devices", addr, "net")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Sprintf("%s has no kernel netdev (%s does not exist)", addr, dir)
	}
	if err != nil {
		return "", fmt.Sprintf("looking for the kernel netdev of %s: %v", addr, err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		return "", fmt.Sprintf("%s has no kernel netdev (%s is empty)", addr, dir)
	case 1:
		return names[0], ""
	}
	return names[0], fmt.Sprintf("%s has several netdevs (%s); the commands are for %s", addr, strings.Join(names, ", "), names[0])
}

// family is the PMD family of an ethdev driver name: "mlx5_pci" and
// "net_mlx5" are "mlx5", "net_ionic" is "ionic".
func family(driver string) string {
	d := strings.TrimPrefix(driver, "net_")
	if i := strings.IndexByte(d, '_'); i >= 0 {
		d = d[:i]
	}
	return d
}

func portLabel(in Input) string {
	name := "port"
	if in.Port != "" {
		name += " " + in.Port
	}
	if in.Driver != "" {
		name += " (" + in.Driver + ")"
	}
	return name
}

// prioWord completes "priorit" for a mask: "y 3" or "ies 3,4".
func prioWord(mask uint8) string {
	if bits.OnesCount8(mask) == 1 {
		return "y " + qos.MaskList(mask)
	}
	return "ies " + qos.MaskList(mask)
}
