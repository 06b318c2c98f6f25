// Package pcidev describes the network PCI devices of the machine from sysfs
// (vendor, model, bound driver, interfaces, NUMA node) and tells whether
// DPDK can drive each one as currently bound, and if not, how to fix it.
//
// Every file-system access goes through a root directory (normally "/") so
// tests can run on fixture trees.
package pcidev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Device is one PCI function.
type Device struct {
	Addr        string // full form, "0000:3b:00.0"
	Vendor      uint16
	DeviceID    uint16
	Class       uint32 // 24-bit class code, e.g. 0x020000 for Ethernet
	VendorName  string // "" if not in the table below
	Model       string // "" if not in the table below
	Driver      string // "" if unbound
	Netdevs     []string
	NUMANode    int    // -1 unknown (also what single-socket machines report)
	Kind        string // DPDK PMD family: "mlx5", "mlx4", "ionic", "i40e", "ice", "ixgbe", "bnxt", "virtio" or ""
	DPDKCapable bool   // a DPDK PMD exists for the device, however it is bound now
}

const devicesDir = "sys/bus/pci/devices"

// List returns the network (class 0x02xxxx, which includes 0x0207
// InfiniBand) devices under root, sorted by address. A machine without
// sys/bus/pci has no PCI devices, which is not an error.
func List(root string) ([]Device, error) {
	dir := filepath.Join(root, devicesDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pcidev: %v", err)
	}
	var devs []Device
	for _, e := range entries {
		class, err := readHex(filepath.Join(dir, e.Name(), "class"), 24)
		if err != nil {
			return nil, err
		}
		if !isNetwork(uint32(class)) {
			continue
		}
		d, err := read(dir, e.Name())
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	slices.SortFunc(devs, func(a, b Device) int { return strings.Compare(a.Addr, b.Addr) })
	return devs, nil
}

var (
	shortAddr = regexp.MustCompile(`^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	fullAddr  = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
)

// NormalizeAddr turns "3B:00.0" or "0000:3b:00.0" into "0000:3b:00.0".
func NormalizeAddr(addr string) (string, error) {
	a := strings.ToLower(strings.TrimSpace(addr))
	switch {
	case shortAddr.MatchString(a):
		return "0000:" + a, nil
	case fullAddr.MatchString(a):
		return a, nil
	}
	return "", fmt.Errorf("pcidev: %q is not a PCI address like 3b:00.0 or 0000:3b:00.0", addr)
}

// Get describes the device at addr ("3b:00.0" or "0000:3b:00.0"), whatever
// its class.
func Get(root, addr string) (Device, error) {
	a, err := NormalizeAddr(addr)
	if err != nil {
		return Device{}, err
	}
	dir := filepath.Join(root, devicesDir)
	if _, err := os.Stat(filepath.Join(dir, a)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Device{}, fmt.Errorf("pcidev: no PCI device %s (%s does not exist; see lspci -D)", a, filepath.Join(dir, a))
		}
		return Device{}, fmt.Errorf("pcidev: %v", err)
	}
	return read(dir, a)
}

func read(dir, addr string) (Device, error) {
	p := filepath.Join(dir, addr)
	d := Device{Addr: addr, NUMANode: -1}
	v, err := readHex(filepath.Join(p, "vendor"), 16)
	if err != nil {
		return d, err
	}
	d.Vendor = uint16(v)
	if v, err = readHex(filepath.Join(p, "device"), 16); err != nil {
		return d, err
	}
	d.DeviceID = uint16(v)
	if v, err = readHex(filepath.Join(p, "class"), 24); err != nil {
		return d, err
	}
	d.Class = uint32(v)

	link, err := os.Readlink(filepath.Join(p, "driver"))
	switch {
	case err == nil:
		d.Driver = filepath.Base(link)
	case !errors.Is(err, fs.ErrNotExist):
		return d, fmt.Errorf("pcidev: %v", err)
	}

	if d.Netdevs, err = netdevs(p); err != nil {
		return d, err
	}

	if b, err := os.ReadFile(filepath.Join(p, "numa_node")); err == nil {
		s := strings.TrimSpace(string(b))
		n, err := strconv.Atoi(s)
		if err != nil || n < -1 {
			return d, fmt.Errorf("pcidev: %s: %q is not a NUMA node", filepath.Join(p, "numa_node"), s)
		}
		d.NUMANode = n
	} else if !errors.Is(err, fs.ErrNotExist) {
		return d, fmt.Errorf("pcidev: %v", err)
	}

	d.VendorName = vendorNames[d.Vendor]
	id := ids[[2]uint16{d.Vendor, d.DeviceID}]
	d.Model, d.Kind = id.model, id.kind
	if d.Kind == "" {
		d.Kind = kindByRange(d.Vendor, d.DeviceID)
	}
	d.DPDKCapable = d.Kind != "" && isNetwork(d.Class)
	return d, nil
}

// netdevs lists the kernel interfaces of the device. virtio-net puts them
// one level down, under the virtioN child device.
func netdevs(devDir string) ([]string, error) {
	dirs := []string{filepath.Join(devDir, "net")}
	if sub, err := filepath.Glob(filepath.Join(devDir, "virtio*", "net")); err == nil {
		dirs = append(dirs, sub...)
	}
	var names []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pcidev: %v", err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

func readHex(path string, bits int) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("pcidev: %v", err)
	}
	s := strings.TrimSpace(string(b))
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, bits)
	if err != nil || !strings.HasPrefix(s, "0x") {
		return 0, fmt.Errorf("pcidev: %s: %q is not a %d-bit hex value like 0x15b3", path, s, bits)
	}
	return v, nil
}

func isNetwork(class uint32) bool { return class>>16 == 0x02 }
