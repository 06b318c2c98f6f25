package main

// make bench's punt workload (scripts/bench.py punt-pcap): the capture
// with frames for the box inserted, the rest of it left as it was.

import (
	"bytes"
	be "encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"roce-fwd/demotraffic"
	"roce-fwd/pcapio"
)

func TestPuntPcapInsertsFramesForTheBox(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed (make test installs it)")
	}
	dir := t.TempDir()
	// IPv4 frames with IPv6 ones among them, which are not counted.
	var in [][]byte
	for _, w := range []demotraffic.Workload{
		{Mix: demotraffic.MixControl, QPs: 64, Frames: 512, Seed: 3},
		{Mix: demotraffic.MixControl, QPs: 8, Frames: 64, Seed: 4, IPv6: true},
	} {
		p := filepath.Join(dir, fmt.Sprintf("w%d.pcap", len(in)))
		if _, err := w.WriteFile(p); err != nil {
			t.Fatal(err)
		}
		frames, err := pcapio.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(in) == 0 {
			in = frames
			continue
		}
		var mixed [][]byte
		for i, f := range in {
			mixed = append(mixed, f)
			if i%8 == 7 && len(frames) > 0 {
				mixed, frames = append(mixed, frames[0]), frames[1:]
			}
		}
		in = mixed
	}
	src, out := filepath.Join(dir, "in.pcap"), filepath.Join(dir, "out.pcap")
	if err := pcapio.WriteFile(src, in); err != nil {
		t.Fatal(err)
	}
	box := netip.MustParseAddr("172.16.0.1")
	const n = 50
	text, err := exec.Command("python3", "../../scripts/bench.py", "punt-pcap", src, fmt.Sprint(n), box.String(), out).CombinedOutput()
	if err != nil {
		t.Fatalf("bench.py punt-pcap: %v\n%s", err, text)
	}
	got, err := pcapio.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	isV4 := func(f []byte) bool { return len(f) >= 34 && be.BigEndian.Uint16(f[12:]) == 0x0800 }
	// Walk the output: every Nth IPv4 frame is for the box and a copy of
	// the IPv4 frame before it but for its destination and checksum; the
	// others are the input's frames, in order.
	var rest [][]byte
	v4, added := 0, 0
	var last []byte
	for i, f := range got {
		if !isV4(f) {
			rest = append(rest, f)
			continue
		}
		v4++
		toBox := netip.AddrFrom4([4]byte(f[30:34])) == box
		if toBox != (v4%n == 0) {
			t.Fatalf("frame %d, IPv4 frame %d: for the box %v, want it every %dth", i, v4, toBox, n)
		}
		if !toBox {
			rest, last = append(rest, f), f
			continue
		}
		added++
		if len(f) != len(last) || !bytes.Equal(f[:24], last[:24]) || !bytes.Equal(f[26:30], last[26:30]) || !bytes.Equal(f[34:], last[34:]) {
			t.Fatalf("frame %d: not the frame before it readdressed", i)
		}
		var sum uint32
		for k := 14; k < 34; k += 2 {
			sum += uint32(be.BigEndian.Uint16(f[k:]))
		}
		for sum>>16 != 0 {
			sum = sum&0xffff + sum>>16
		}
		if sum != 0xffff {
			t.Fatalf("frame %d: IPv4 header checksum wrong (sum %#x)", i, sum)
		}
	}
	if len(rest) != len(in) {
		t.Fatalf("%d frames besides the box's, want the input's %d", len(rest), len(in))
	}
	for i := range in {
		if !bytes.Equal(rest[i], in[i]) {
			t.Fatalf("input frame %d changed or moved", i)
		}
	}
	if added == 0 || added != v4/n {
		t.Fatalf("%d frames for the box among %d IPv4 frames, want %d", added, v4, v4/n)
	}
	if want := fmt.Sprintf("%d %d", added, v4); strings.TrimSpace(string(text)) != want {
		t.Errorf("punt-pcap printed %q, want %q", text, want)
	}
}
