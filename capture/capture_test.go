package capture

import (
	"bufio"
	"bytes"
	"testing"

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
	bw := bufio.NewWriter(&out)
	w := ngWriter{w: bw}
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
		if err := w.packet(uint32(i%2), rec.NS, data, rec.Len, dir, cmt); err != nil {
			t.Fatal(err)
		}
	}
	bw.Flush()
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

// Writing a packet with its verdict allocates nothing.
func TestWriteDoesNotAllocate(t *testing.T) {
	var sink bytes.Buffer
	w := ngWriter{w: bufio.NewWriterSize(&sink, 1<<20)}
	m := roce.DefaultTCMap()
	f := demotraffic.Frames()[0]
	rec := pipeline.TapRecord{Dir: pipeline.TapDrop, Reason: pipeline.DropQoSWRED, Len: uint32(len(f)), Data: f}
	names := func(uint16) string { return "in" }
	var cmt []byte
	allocs := testing.AllocsPerRun(1000, func() {
		cmt = AppendVerdict(cmt[:0], &rec, names, &m)
		w.packet(0, 1, rec.Data, rec.Len, flagInbound, cmt)
		if sink.Len() > 1<<19 {
			w.w.Flush()
			sink.Reset()
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per packet written", allocs)
	}
}
