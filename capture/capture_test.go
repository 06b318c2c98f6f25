package capture

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/gopacket/gopacket/pcapgo"

	"roce-fwd/demotraffic"
	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

// What ngWriter writes, an independent reader (gopacket's) reads back:
// the section's comment, an interface per port, each packet's bytes,
// lengths, nanosecond time, direction and verdict comment.
func TestPcapngReadsBack(t *testing.T) {
	var out bytes.Buffer
	w := newNgWriter(&out)
	if err := w.section("roce-fwd", "capture start port in"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"in", "out"} {
		if err := w.iface(n, "roce-fwd port", 128); err != nil {
			t.Fatal(err)
		}
	}
	frames := demotraffic.Frames()
	m := roce.DefaultTCMap()
	names := func(id uint16) string { return []string{"in", "out"}[id] }
	var cmt []byte
	var want []string
	for i, f := range frames {
		data := f[:min(len(f), 128)]
		rec := pipeline.TapRecord{NS: 1_700_000_000_123_456_789 + int64(i), Dir: pipeline.TapRx, Len: uint32(len(f)), Data: data}
		dir := uint32(flagInbound)
		if i%2 == 1 {
			rec.Dir, rec.TxPort, dir = pipeline.TapTx, 1, flagOutbound
		}
		cmt = AppendVerdict(cmt[:0], &rec, names, &m)
		want = append(want, string(cmt))
		w.beginPacket(uint32(i%2), rec.NS, data, rec.Len)
		w.option(optComment, cmt)
		if err := w.endPacket(dir); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	r, err := pcapgo.NewNgReader(&out, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	if r.SectionInfo().Comment != "capture start port in" {
		t.Fatalf("section %+v", r.SectionInfo())
	}
	for i, f := range frames {
		data, ci, opts, err := r.ReadPacketDataWithOptions()
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		wantDir := pcapgo.NgEpbFlagDirectionInbound
		if i%2 == 1 {
			wantDir = pcapgo.NgEpbFlagDirectionOutbound
		}
		if !bytes.Equal(data, f[:min(len(f), 128)]) || ci.Length != len(f) || ci.InterfaceIndex != i%2 ||
			ci.Timestamp.UnixNano() != 1_700_000_000_123_456_789+int64(i) ||
			len(opts.Comments) != 1 || opts.Comments[0] != want[i] || opts.Flags == nil || opts.Flags.Direction != wantDir {
			t.Fatalf("packet %d read back as %d bytes of %d, interface %d, %v, %+v", i, len(data), ci.Length, ci.InterfaceIndex, ci.Timestamp, opts)
		}
	}
	if ifc, err := r.Interface(1); err != nil || r.NInterfaces() != 2 || ifc.Name != "out" || ifc.SnapLength != 128 {
		t.Errorf("%d interfaces; interface 1: %+v %v", r.NInterfaces(), ifc, err)
	}
}

// Writing a packet with its verdict allocates nothing, and the file is
// written a megabyte at a time.
func TestWriteDoesNotAllocate(t *testing.T) {
	sink := &countingWriter{}
	m := roce.DefaultTCMap()
	c := newCapture(Options{Ports: []Port{{ID: 0, Name: "in"}}, TCMap: &m}, newNgWriter(sink))
	f := demotraffic.Frames()[0]
	for _, d := range []pipeline.TapDir{pipeline.TapRx, pipeline.TapTx, pipeline.TapDrop} {
		rec := pipeline.TapRecord{Dir: d, Reason: pipeline.DropQoSWRED, Len: uint32(len(f)), Data: f}
		allocs := testing.AllocsPerRun(10000, func() { c.write(&rec) })
		if allocs != 0 {
			t.Errorf("%v: %v allocations per packet written", d, allocs)
		}
	}
	if c.n != 3*10001 || sink.writes == 0 || sink.bytes/sink.writes < ngFlushAt {
		t.Errorf("%d packets written in %d writes of %d bytes", c.n, sink.writes, sink.bytes)
	}
}

type countingWriter struct{ writes, bytes int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.bytes += len(p)
	return len(p), nil
}

// The capture writer's verdicts, taking repeated parts from its cache,
// read as the uncached ones do, whatever order records of several ports,
// queues, lcores and directions come in.
func TestCachedVerdicts(t *testing.T) {
	recs := workloadRecords(t)[:3000]
	m := roce.DefaultTCMap()
	names := func(id uint16) string { return []string{"in", "out", "in.kernel"}[id%3] }
	var vc verdictCache
	var got, want []byte
	for i := range recs {
		rec := recs[i]
		rec.RxPort, rec.RxQueue, rec.Lcore = uint16(i%3), uint16(i/7%2), uint16(1+i/11%2)
		switch i % 5 {
		case 3:
			rec.Dir, rec.TxPort = pipeline.TapTx, 1
		case 4:
			rec.Dir, rec.Reason = pipeline.TapDrop, pipeline.Reason(i%int(pipeline.NumReasons))
		}
		if i%13 == 0 || i%17 == 0 {
			rec.Data = append([]byte(nil), rec.Data...)
		}
		if i%13 == 0 {
			rec.Data[15] = byte(i) // another DSCP and ECN
		}
		if i%17 == 0 && rec.Data[42] == byte(roce.OpRC|roce.OpAck) {
			rec.Data[54] = byte(i * 7) // another AETH syndrome: credits, RNR NAKs, NAKs
		}
		switch i % 23 {
		case 1:
			rec.FlowRule = int32(i)
		case 2:
			rec.Impair = int32(i)
		case 3:
			rec.Data = rec.Data[:60] // cut by a snaplen
		}
		got = appendVerdict(got[:0], &rec, names, &m, &vc)
		want = AppendVerdict(want[:0], &rec, names, &m)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d: cached %q, want %q", i, got, want)
		}
		// The QP and PSN, read from the BTH (IPv4, no VLAN) and printed
		// by fmt.
		if len(rec.Data) == int(rec.Len) {
			qp := uint32(rec.Data[47])<<16 | uint32(rec.Data[48])<<8 | uint32(rec.Data[49])
			psn := uint32(rec.Data[51])<<16 | uint32(rec.Data[52])<<8 | uint32(rec.Data[53])
			if s := fmt.Sprintf(" qp 0x%06x psn %d", qp, psn); !bytes.Contains(got, []byte(s)) {
				t.Fatalf("record %d: %q does not say%s", i, got, s)
			}
		}
	}
	rec := recs[0]
	if s := Verdict(&rec, names, &m); !strings.HasPrefix(s, "rx in queue 0 lcore 1; RoCEv2 RC ") || !strings.HasSuffix(s, "; dscp 26 tc 3 ecn ECT0") {
		t.Errorf("verdict %q", s)
	}
	if s := string(appendHex(nil, 0x1a2b, 6)) + " " + string(appendHex(nil, 0x1234567, 6)) + " " + string(appendHex(nil, 0, 2)); s != "001a2b 1234567 00" {
		t.Errorf("hex: %s", s)
	}
}

func TestDecimalDigits(t *testing.T) {
	for _, v := range []uint32{0, 1, 9, 10, 11, 99, 100, 999, 1000, 9999, 10000, 65535, 99999, 100000, 999999, 1000000, 9999999, 10000000, 16777215, 99999999, 100000000, 4294967295} {
		if got, want := decimalDigits(v), len(strconv.FormatUint(uint64(v), 10)); got != want {
			t.Errorf("decimalDigits(%d) = %d, want %d", v, got, want)
		}
	}
}

// A file sink writes the bytes a plain writer does, whether the file
// system takes direct I/O (whole blocks from aligned buffers, the partial
// block carried over) or not (tmpfs), with flushes at any point, as the
// capture's idle flushes come.
func TestFileSinkWritesEveryByte(t *testing.T) {
	recs := workloadRecords(t)[:30000]
	m := roce.DefaultTCMap()
	for _, dir := range sinkDirs(t) {
		name, fs, buf := openTestSink(t, dir, "sink-test")
		var want bytes.Buffer
		cf := newCapture(Options{Ports: []Port{{ID: 0, Name: "src"}}, TCMap: &m}, ngWriter{s: fs, buf: buf})
		cw := newCapture(Options{Ports: []Port{{ID: 0, Name: "src"}}, TCMap: &m}, newNgWriter(&want))
		for _, c := range []*Capture{cf, cw} {
			if err := c.w.section("roce-fwd", "test"); err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				c.write(&recs[i])
				if i%7919 == 0 { // an idle flush, anywhere in a block
					if err := c.w.flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := c.w.close(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s (direct I/O %v): file of %d bytes, want %d", dir, fs.direct, len(got), want.Len())
		}
		t.Logf("%s: direct I/O %v, %d bytes", dir, fs.direct, len(got))
	}
}

// With direct I/O each buffer is a 2 MiB huge page's worth, on a 2 MiB
// boundary, so the kernel can pin and unpin a write as one folio; through
// the page cache, buffers stay page-sized.
func TestFileSinkBuffersForDirectIO(t *testing.T) {
	for _, dir := range sinkDirs(t) {
		_, fs, buf := openTestSink(t, dir, "sink-align")
		bufs := [][]byte{buf}
		for range fileSinkBuffers - 1 {
			bufs = append(bufs, <-fs.free)
		}
		for _, b := range bufs {
			a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			switch {
			case fs.direct && (a%hugeBuffer != 0 || cap(b) != hugeBuffer):
				t.Errorf("%s, direct I/O: buffer at %#x of %d bytes, want 2 MiB on a 2 MiB boundary", dir, a, cap(b))
			case !fs.direct && (a%directBlock != 0 || cap(b) < ngBufferSize || cap(b) >= hugeBuffer):
				t.Errorf("%s, page cache: buffer at %#x of %d bytes, want %d page-aligned", dir, a, cap(b), ngBufferSize)
			}
			if len(b) != 0 {
				t.Errorf("%s: buffer holds %d bytes, want none", dir, len(b))
			}
		}
		for _, b := range bufs[1:] {
			fs.free <- b
		}
		if err := fs.close(buf); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: direct I/O %v", dir, fs.direct)
	}
}

// sinkDirs are where the file sink tests write: the test's own directory,
// /var/tmp (a disk, with direct I/O) and /dev/shm (tmpfs), those that exist.
func sinkDirs(t *testing.T) []string {
	var dirs []string
	for _, dir := range []string{t.TempDir(), "/var/tmp", "/dev/shm"} {
		if _, err := os.Stat(dir); err == nil {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// openTestSink opens a file sink on a file named for prefix in dir,
// removed when the test ends.
func openTestSink(t *testing.T, dir, prefix string) (string, *fileSink, []byte) {
	t.Helper()
	name := filepath.Join(dir, fmt.Sprintf("%s-%d.pcapng", prefix, os.Getpid()))
	fs, buf, err := openFileSink(name, ngBufferSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(name) })
	return name, fs, buf
}

// A write error (a full disk) stops the capture with the error, and the
// writer does not block.
func TestFileSinkWriteError(t *testing.T) {
	fs, buf, err := openFileSink("/dev/full", ngBufferSize)
	if err != nil {
		t.Skip(err)
	}
	m := roce.DefaultTCMap()
	c := newCapture(Options{Ports: []Port{{ID: 0, Name: "src"}}, TCMap: &m}, ngWriter{s: fs, buf: buf})
	recs := workloadRecords(t)
	for i := 0; i < 100000 && c.w.err == nil; i++ {
		c.write(&recs[i%len(recs)])
	}
	if err := c.w.close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing to /dev/full: %v, want ENOSPC", err)
	}
}
