package pcidev

import (
	"fmt"
	"strings"
)

const (
	vendorMellanox = 0x15b3
	vendorPensando = 0x1dd8
	vendorIntel    = 0x8086
	vendorBroadcom = 0x14e4
	vendorRedHat   = 0x1af4
)

var vendorNames = map[uint16]string{
	vendorMellanox: "Mellanox/NVIDIA",
	vendorPensando: "AMD Pensando",
	vendorIntel:    "Intel",
	vendorBroadcom: "Broadcom",
	vendorRedHat:   "Red Hat",
}

type idInfo struct{ model, kind string }

// ids names the devices the PMDs of the supported kinds probe. Only the
// models operators meet on RoCE fabrics are named; kindByRange covers the
// remaining mlx5 and ionic ids.
var ids = map[[2]uint16]idInfo{
	{vendorMellanox, 0x1013}: {"ConnectX-4", "mlx5"},
	{vendorMellanox, 0x1014}: {"ConnectX-4 VF", "mlx5"},
	{vendorMellanox, 0x1015}: {"ConnectX-4 Lx", "mlx5"},
	{vendorMellanox, 0x1016}: {"ConnectX-4 Lx VF", "mlx5"},
	{vendorMellanox, 0x1017}: {"ConnectX-5", "mlx5"},
	{vendorMellanox, 0x1018}: {"ConnectX-5 VF", "mlx5"},
	{vendorMellanox, 0x1019}: {"ConnectX-5 Ex", "mlx5"},
	{vendorMellanox, 0x101a}: {"ConnectX-5 Ex VF", "mlx5"},
	{vendorMellanox, 0x101b}: {"ConnectX-6", "mlx5"},
	{vendorMellanox, 0x101c}: {"ConnectX-6 VF", "mlx5"},
	{vendorMellanox, 0x101d}: {"ConnectX-6 Dx", "mlx5"},
	{vendorMellanox, 0x101e}: {"ConnectX VF", "mlx5"},
	{vendorMellanox, 0x101f}: {"ConnectX-6 Lx", "mlx5"},
	{vendorMellanox, 0x1021}: {"ConnectX-7", "mlx5"},
	{vendorMellanox, 0x1023}: {"ConnectX-8", "mlx5"},
	{vendorMellanox, 0xa2d2}: {"BlueField", "mlx5"},
	{vendorMellanox, 0xa2d3}: {"BlueField VF", "mlx5"},
	{vendorMellanox, 0xa2d6}: {"BlueField-2", "mlx5"},
	{vendorMellanox, 0xa2dc}: {"BlueField-3", "mlx5"},
	{vendorMellanox, 0x1003}: {"ConnectX-3", "mlx4"},
	{vendorMellanox, 0x1004}: {"ConnectX-3 VF", "mlx4"},
	{vendorMellanox, 0x1007}: {"ConnectX-3 Pro", "mlx4"},

	{vendorPensando, 0x1002}: {"DSC Ethernet PF", "ionic"},
	{vendorPensando, 0x1003}: {"DSC Ethernet VF", "ionic"},
	{vendorPensando, 0x1004}: {"DSC management", "ionic"},

	{vendorIntel, 0x1572}: {"X710 10GbE SFP+", "i40e"},
	{vendorIntel, 0x1583}: {"XL710 40GbE QSFP+", "i40e"},
	{vendorIntel, 0x1584}: {"XL710 40GbE QSFP+", "i40e"},
	{vendorIntel, 0x158b}: {"XXV710 25GbE SFP28", "i40e"},
	{vendorIntel, 0x37d2}: {"X722 10GbE", "i40e"},
	{vendorIntel, 0x1592}: {"E810-C QSFP", "ice"},
	{vendorIntel, 0x1593}: {"E810-C SFP", "ice"},
	{vendorIntel, 0x159b}: {"E810-XXV SFP", "ice"},
	{vendorIntel, 0x10fb}: {"82599ES 10GbE SFP+", "ixgbe"},
	{vendorIntel, 0x1528}: {"X540-AT2 10GbE", "ixgbe"},
	{vendorIntel, 0x1563}: {"X550T 10GbE", "ixgbe"},

	{vendorBroadcom, 0x16d7}: {"BCM57414 NetXtreme-E 25GbE", "bnxt"},
	{vendorBroadcom, 0x1750}: {"BCM57508 NetXtreme-E 100/200GbE", "bnxt"},
	{vendorBroadcom, 0x1751}: {"BCM57504 NetXtreme-E 25/50/100GbE", "bnxt"},

	{vendorRedHat, 0x1000}: {"virtio-net (legacy)", "virtio"},
	{vendorRedHat, 0x1041}: {"virtio-net", "virtio"},
}

// kindByRange maps ids not named in the table: every mlx5 generation from
// ConnectX-4 (0x1013) to ConnectX-7 (0x1021) uses consecutive ids, and
// every network function of a Pensando card is driven by ionic.
func kindByRange(vendor, device uint16) string {
	switch {
	case vendor == vendorMellanox && device >= 0x1013 && device <= 0x1021:
		return "mlx5"
	case vendor == vendorPensando:
		return "ionic"
	}
	return ""
}

// kernelDrivers is the in-kernel driver of each kind.
var kernelDrivers = map[string]string{
	"mlx5":   "mlx5_core",
	"mlx4":   "mlx4_core",
	"ionic":  "ionic",
	"i40e":   "i40e",
	"ice":    "ice",
	"ixgbe":  "ixgbe",
	"bnxt":   "bnxt_en",
	"virtio": "virtio-pci",
}

// userspaceDrivers hand the device to DPDK.
var userspaceDrivers = map[string]bool{"vfio-pci": true, "uio_pci_generic": true, "igb_uio": true}

// Bifurcated reports whether DPDK drives the device through its kernel
// driver (mlx5, mlx4) rather than taking it over through vfio-pci.
func (d Device) Bifurcated() bool { return d.Kind == "mlx5" || d.Kind == "mlx4" }

func (d Device) label() string {
	var parts []string
	if name := strings.TrimSpace(d.VendorName + " " + d.Model); name != "" {
		parts = append(parts, name)
	}
	if d.NUMANode >= 0 {
		parts = append(parts, fmt.Sprintf("NUMA node %d", d.NUMANode))
	}
	if len(parts) == 0 {
		return d.Addr
	}
	return fmt.Sprintf("%s (%s)", d.Addr, strings.Join(parts, ", "))
}

// CheckDPDK returns nil if DPDK can use the device as it is bound now, and
// otherwise an error that says what is wrong and the commands that fix it.
func (d Device) CheckDPDK() error {
	if !isNetwork(d.Class) {
		return fmt.Errorf("%s is not a network device (PCI class 0x%06x)", d.label(), d.Class)
	}
	if d.Kind == "" {
		return fmt.Errorf("%s: no DPDK PMD is known for vendor:device %04x:%04x; roce-fwd supports mlx5, mlx4, ionic, i40e, ice, ixgbe, bnxt and virtio NICs",
			d.label(), d.Vendor, d.DeviceID)
	}
	kdrv := kernelDrivers[d.Kind]
	if d.Bifurcated() {
		if d.Driver == kdrv {
			return nil
		}
		state := "is not bound to any driver;"
		if d.Driver != "" {
			state = "is bound to " + d.Driver + ", but"
		}
		return fmt.Errorf("%s %s %s NICs are bifurcated: DPDK's %s PMD works through the kernel driver %s, not vfio-pci. "+
			"Rebind: dpdk-devbind.py --bind=%s %s; the rdma-core/ibverbs libraries (libibverbs, lib%s) must be installed and the %s_ib and ib_uverbs modules loaded",
			d.label(), state, d.Kind, d.Kind, kdrv, kdrv, d.Addr, d.Kind, d.Kind)
	}
	if userspaceDrivers[d.Driver] {
		return nil
	}
	bind := fmt.Sprintf("modprobe vfio-pci; dpdk-devbind.py --bind=vfio-pci %s", d.Addr)
	const iommu = "vfio-pci needs the IOMMU enabled: intel_iommu=on iommu=pt on the kernel command line of Intel hosts"
	if d.Driver == "" {
		return fmt.Errorf("%s is not bound to any driver; DPDK's %s PMD needs vfio-pci. Run: %s. %s", d.label(), d.Kind, bind, iommu)
	}
	var down []string
	for _, n := range d.Netdevs {
		down = append(down, "ip link set "+n+" down")
	}
	iface := ""
	if len(d.Netdevs) > 0 {
		iface = fmt.Sprintf(" (interface %s)", strings.Join(d.Netdevs, ", "))
		bind = strings.Join(down, "; ") + "; " + bind
	}
	return fmt.Errorf("%s is bound to the kernel driver %s%s; DPDK's %s PMD needs vfio-pci. "+
		"The interface must be down, and its kernel traffic stops. Run: %s. %s",
		d.label(), d.Driver, iface, d.Kind, bind, iommu)
}
