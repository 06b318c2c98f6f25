package pcidev

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"roce-fwd/internal/fixture"
)

type fixDev struct {
	addr, vendor, device, class string
	driver                      string // "" leaves the device unbound
	netdevs                     []string
	numa                        string // "" leaves numa_node out
	virtio                      bool   // netdevs live under virtio0/net
}

var writeFile = fixture.WriteFile

// buildTree lays devices out as sysfs does: the real directory under
// sys/devices/pci0000:00, a symlink in sys/bus/pci/devices, and a driver
// symlink into sys/bus/pci/drivers.
func buildTree(t *testing.T, devs []fixDev) string {
	t.Helper()
	root := t.TempDir()
	bus := filepath.Join(root, "sys/bus/pci/devices")
	if err := os.MkdirAll(bus, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range devs {
		dir := filepath.Join(root, "sys/devices/pci0000:00", d.addr)
		writeFile(t, filepath.Join(dir, "vendor"), d.vendor+"\n")
		writeFile(t, filepath.Join(dir, "device"), d.device+"\n")
		writeFile(t, filepath.Join(dir, "class"), d.class+"\n")
		if d.numa != "" {
			writeFile(t, filepath.Join(dir, "numa_node"), d.numa+"\n")
		}
		netDir := filepath.Join(dir, "net")
		if d.virtio {
			netDir = filepath.Join(dir, "virtio0", "net")
		}
		for _, n := range d.netdevs {
			writeFile(t, filepath.Join(netDir, n, "ifindex"), "2\n")
		}
		if d.driver != "" {
			drv := filepath.Join(root, "sys/bus/pci/drivers", d.driver)
			if err := os.MkdirAll(drv, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../../../bus/pci/drivers/"+d.driver, filepath.Join(dir, "driver")); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink("../../../devices/pci0000:00/"+d.addr, filepath.Join(bus, d.addr)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

var (
	cx6dxKernel = fixDev{addr: "0000:3b:00.0", vendor: "0x15b3", device: "0x101d", class: "0x020000",
		driver: "mlx5_core", netdevs: []string{"ens1f0np0"}, numa: "0"}
	cx6dxVFIO = fixDev{addr: "0000:3b:00.1", vendor: "0x15b3", device: "0x101d", class: "0x020000",
		driver: "vfio-pci", numa: "0"}
	ionicKernel = fixDev{addr: "0000:b5:00.0", vendor: "0x1dd8", device: "0x1002", class: "0x020000",
		driver: "ionic", netdevs: []string{"enp181s0np0"}, numa: "1"}
	ionicVFIO = fixDev{addr: "0000:b6:00.0", vendor: "0x1dd8", device: "0x1002", class: "0x020000",
		driver: "vfio-pci", numa: "1"}
	unknownNIC = fixDev{addr: "0000:02:00.0", vendor: "0x10ec", device: "0x8168", class: "0x020000",
		driver: "r8169", netdevs: []string{"enp2s0"}, numa: "-1"}
	nvme  = fixDev{addr: "0000:01:00.0", vendor: "0x144d", device: "0xa808", class: "0x010802", driver: "nvme", numa: "0"}
	ibHCA = fixDev{addr: "0000:af:00.0", vendor: "0x15b3", device: "0x1021", class: "0x020700",
		driver: "mlx5_core", netdevs: []string{"ibp175s0"}, numa: "1"}
	virtioNet = fixDev{addr: "0000:00:03.0", vendor: "0x1af4", device: "0x1041", class: "0x020000",
		driver: "virtio-pci", netdevs: []string{"eth0"}, virtio: true}
)

func TestList(t *testing.T) {
	root := buildTree(t, []fixDev{ionicKernel, nvme, cx6dxVFIO, ibHCA, cx6dxKernel, unknownNIC, virtioNet})
	devs, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, d := range devs {
		addrs = append(addrs, d.Addr)
	}
	want := []string{"0000:00:03.0", "0000:02:00.0", "0000:3b:00.0", "0000:3b:00.1", "0000:af:00.0", "0000:b5:00.0"}
	if !reflect.DeepEqual(addrs, want) {
		t.Errorf("addresses = %v, want %v (nvme skipped, sorted)", addrs, want)
	}

	got := devs[2]
	wantDev := Device{
		Addr: "0000:3b:00.0", Vendor: 0x15b3, DeviceID: 0x101d, Class: 0x020000,
		VendorName: "Mellanox/NVIDIA", Model: "ConnectX-6 Dx", Driver: "mlx5_core",
		Netdevs: []string{"ens1f0np0"}, NUMANode: 0, Kind: "mlx5", DPDKCapable: true,
	}
	if !reflect.DeepEqual(got, wantDev) {
		t.Errorf("device = %+v\nwant %+v", got, wantDev)
	}
	if d := devs[0]; d.Kind != "virtio" || d.NUMANode != -1 || !reflect.DeepEqual(d.Netdevs, []string{"eth0"}) {
		t.Errorf("virtio device = %+v", d)
	}
	if d := devs[4]; d.Kind != "mlx5" || d.Model != "ConnectX-7" || d.Class != 0x020700 {
		t.Errorf("InfiniBand device = %+v", d)
	}
	if d := devs[1]; d.Kind != "" || d.DPDKCapable || d.NUMANode != -1 {
		t.Errorf("unknown device = %+v", d)
	}
}

func TestListNoPCI(t *testing.T) {
	devs, err := List(t.TempDir())
	if err != nil || len(devs) != 0 {
		t.Errorf("List(empty) = %v, %v", devs, err)
	}
}

func TestListBadFileNamed(t *testing.T) {
	root := buildTree(t, []fixDev{cx6dxKernel})
	bad := filepath.Join(root, "sys/bus/pci/devices/0000:3b:00.0/device")
	if err := os.WriteFile(bad, []byte("ConnectX\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := List(root)
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "hex") {
		t.Errorf("err = %v", err)
	}
}

func TestGet(t *testing.T) {
	root := buildTree(t, []fixDev{cx6dxKernel, nvme})
	for _, addr := range []string{"3b:00.0", "0000:3b:00.0", "3B:00.0", " 0000:3b:00.0\n"} {
		d, err := Get(root, addr)
		if err != nil || d.Addr != "0000:3b:00.0" || d.Kind != "mlx5" {
			t.Errorf("Get(%q) = %+v, %v", addr, d, err)
		}
	}
	if _, err := Get(root, "3b:00"); err == nil || !strings.Contains(err.Error(), "not a PCI address") {
		t.Errorf("bad address: err = %v", err)
	}
	if _, err := Get(root, "5e:00.0"); err == nil || !strings.Contains(err.Error(), "no PCI device 0000:5e:00.0") {
		t.Errorf("missing device: err = %v", err)
	}
	// Get describes non-network devices; CheckDPDK then refuses them.
	d, err := Get(root, "01:00.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckDPDK(); err == nil || !strings.Contains(err.Error(), "not a network device (PCI class 0x010802)") {
		t.Errorf("CheckDPDK(nvme) = %v", err)
	}
}

func check(t *testing.T, f fixDev) (Device, error) {
	t.Helper()
	d, err := Get(buildTree(t, []fixDev{f}), f.addr)
	if err != nil {
		t.Fatal(err)
	}
	return d, d.CheckDPDK()
}

func wantAll(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("CheckDPDK() = nil, want an error containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error lacks %q:\n%v", p, err)
		}
	}
}

func TestCheckMlx5OnKernelDriver(t *testing.T) {
	if _, err := check(t, cx6dxKernel); err != nil {
		t.Errorf("mlx5 on mlx5_core: %v", err)
	}
}

func TestCheckMlx5OnVFIO(t *testing.T) {
	d, err := check(t, cx6dxVFIO)
	if !d.DPDKCapable || !d.Bifurcated() {
		t.Errorf("device = %+v", d)
	}
	wantAll(t, err, "0000:3b:00.1", "ConnectX-6 Dx", "is bound to vfio-pci", "bifurcated",
		"dpdk-devbind.py --bind=mlx5_core 0000:3b:00.1", "rdma-core/ibverbs")
}

func TestCheckMlx5Unbound(t *testing.T) {
	f := cx6dxKernel
	f.driver, f.netdevs = "", nil
	_, err := check(t, f)
	wantAll(t, err, "is not bound to any driver", "dpdk-devbind.py --bind=mlx5_core 0000:3b:00.0")
}

func TestCheckMlx4OnVFIO(t *testing.T) {
	f := fixDev{addr: "0000:04:00.0", vendor: "0x15b3", device: "0x1007", class: "0x020000", driver: "vfio-pci"}
	_, err := check(t, f)
	wantAll(t, err, "ConnectX-3 Pro", "dpdk-devbind.py --bind=mlx4_core 0000:04:00.0", "libmlx4")
}

func TestCheckIonicOnKernelDriver(t *testing.T) {
	d, err := check(t, ionicKernel)
	if d.Kind != "ionic" || !d.DPDKCapable || d.NUMANode != 1 {
		t.Errorf("device = %+v", d)
	}
	wantAll(t, err, "0000:b5:00.0", "AMD Pensando", "bound to the kernel driver ionic", "interface enp181s0np0",
		"must be down", "ip link set enp181s0np0 down", "modprobe vfio-pci", "dpdk-devbind.py --bind=vfio-pci 0000:b5:00.0")
}

func TestCheckIonicOnVFIO(t *testing.T) {
	if _, err := check(t, ionicVFIO); err != nil {
		t.Errorf("ionic on vfio-pci: %v", err)
	}
	f := ionicVFIO
	f.driver = "uio_pci_generic"
	if _, err := check(t, f); err != nil {
		t.Errorf("ionic on uio_pci_generic: %v", err)
	}
}

func TestCheckIonicUnbound(t *testing.T) {
	f := ionicVFIO
	f.driver = ""
	_, err := check(t, f)
	wantAll(t, err, "not bound to any driver", "modprobe vfio-pci", "dpdk-devbind.py --bind=vfio-pci 0000:b6:00.0")
	if strings.Contains(err.Error(), "ip link") {
		t.Errorf("unbound device has no interface to take down: %v", err)
	}
}

func TestCheckUnknownDevice(t *testing.T) {
	d, err := check(t, unknownNIC)
	if d.DPDKCapable || d.Kind != "" {
		t.Errorf("device = %+v", d)
	}
	wantAll(t, err, "0000:02:00.0", "no DPDK PMD is known for vendor:device 10ec:8168")
}

func TestKinds(t *testing.T) {
	cases := []struct {
		vendor, device uint16
		kind           string
	}{
		{0x15b3, 0x1013, "mlx5"}, {0x15b3, 0x1020, "mlx5"}, {0x15b3, 0x1021, "mlx5"}, {0x15b3, 0xa2d6, "mlx5"},
		{0x15b3, 0x1003, "mlx4"}, {0x15b3, 0x1007, "mlx4"}, {0x15b3, 0x6750, ""},
		{0x1dd8, 0x1002, "ionic"}, {0x1dd8, 0x1004, "ionic"},
		{0x8086, 0x158b, "i40e"}, {0x8086, 0x37d2, "i40e"}, {0x8086, 0x159b, "ice"}, {0x8086, 0x1563, "ixgbe"}, {0x8086, 0x1533, ""},
		{0x14e4, 0x1750, "bnxt"}, {0x1af4, 0x1000, "virtio"}, {0x1af4, 0x1042, ""},
	}
	for _, c := range cases {
		kind := ids[[2]uint16{c.vendor, c.device}].kind
		if kind == "" {
			kind = kindByRange(c.vendor, c.device)
		}
		if kind != c.kind {
			t.Errorf("%04x:%04x kind = %q, want %q", c.vendor, c.device, kind, c.kind)
		}
	}
}
