// Package testenv starts EAL for a test binary on virtual devices,
// without hugepages, removes EAL's runtime directory after the tests, and
// writes and reads pcap files for tests.
package testenv

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"roce-fwd/demotraffic"
	"roce-fwd/dpdk"
	"roce-fwd/pcapio"
	"roce-fwd/roce"
)

// EALArgs are the arguments tests run EAL with: no hugepages, no shared
// files, and a file prefix unique to this test binary (go test runs
// packages in parallel).
func EALArgs(name string) []string {
	return []string{"--no-huge", "-m", "512", "--no-pci", "--no-shconf",
		"--file-prefix", FilePrefix(name), "-l", "0-1", "--log-level", "*:error"}
}

// FilePrefix is the EAL file prefix of EALArgs(name).
func FilePrefix(name string) string { return fmt.Sprintf("rf-%s-%d", name, os.Getpid()) }

// Main initialises EAL, runs the tests and cleans up. Use it from TestMain.
func Main(m *testing.M, name string) {
	if err := dpdk.Init(EALArgs(name)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir := dpdk.RuntimeDir()
	code := m.Run()
	if err := dpdk.Cleanup(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if err := RemoveRuntimeDir(dir, FilePrefix(name)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// RemoveRuntimeDir removes EAL's runtime directory dir (dpdk.RuntimeDir,
// read while EAL ran) once EAL has cleaned up: EAL leaves it behind, with
// its telemetry socket. dir must be named prefix, the test's own file
// prefix, so that nothing else is ever removed.
func RemoveRuntimeDir(dir, prefix string) error {
	if dir == "" || filepath.Base(dir) != prefix {
		return fmt.Errorf("EAL runtime directory %q is not named after the file prefix %q; left in place", dir, prefix)
	}
	return os.RemoveAll(dir)
}

// WritePcap writes frames to a new pcap file.
func WritePcap(t testing.TB, path string, frames [][]byte) {
	t.Helper()
	if err := pcapio.WriteFile(path, frames); err != nil {
		t.Fatal(err)
	}
}

// ReadPcap returns every frame of a pcap file.
func ReadPcap(t testing.TB, path string) [][]byte {
	t.Helper()
	frames, err := pcapio.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// Frames returns n frames of the demo mix with sizes spread from 60 to
// 1514 bytes, each distinct (a sequence number in the IPv4 identification,
// or in the padding of non-IP frames) so that reordering or duplication
// shows. RoCEv2 frames keep a valid ICRC.
func Frames(n int) [][]byte {
	base := demotraffic.Frames()
	out := make([][]byte, n)
	for i := range out {
		f := append([]byte(nil), base[i%len(base)]...)
		if binary.BigEndian.Uint16(f[12:]) == 0x0800 {
			ip := roce.IPv4(f[14:])
			binary.BigEndian.PutUint16(f[18:], uint16(i))
			ip.SetChecksum()
			if binary.BigEndian.Uint16(f[36:]) == 4791 {
				if err := roce.SetICRC(f); err != nil {
					panic(err)
				}
			}
		} else {
			binary.BigEndian.PutUint16(f[len(f)-2:], uint16(i))
		}
		if i%3 == 0 { // Ethernet padding after the IP packet, up to a full frame
			f = append(f, make([]byte, (i*97)%1455)...)
		}
		out[i] = f
	}
	return out
}
