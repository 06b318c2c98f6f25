package capture

import (
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
	c := newCapture(Options{Ports: []Port{{ID: 0, Name: "in"}}, TCMap: &m}, nil)
	c.w = newNgWriter(sink)
	f := demotraffic.Frames()[0]
	for _, d := range []pipeline.TapDir{pipeline.TapRx, pipeline.TapTx, pipeline.TapDrop} {
		rec := pipeline.TapRecord{Dir: d, Reason: pipeline.DropQoSWRED, Len: uint32(len(f)), Data: f}
		allocs := testing.AllocsPerRun(10000, func() { c.write(&rec) })
		if allocs != 0 {
			t.Errorf("%v: %v allocations per packet written", d, allocs)
		}
	}
	if c.written.Load() != 3*10001 || sink.writes == 0 || sink.bytes/sink.writes < ngFlushAt {
		t.Errorf("%d packets written in %d writes of %d bytes", c.written.Load(), sink.writes, sink.bytes)
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
		if i%13 == 0 {
			rec.Data = append([]byte(nil), rec.Data...)
			rec.Data[15] = byte(i) // another DSCP and ECN
		}
		got = appendVerdict(got[:0], &rec, names, &m, &vc)
		want = AppendVerdict(want[:0], &rec, names, &m)
		if !bytes.Equal(got, want) {
			t.Fatalf("record %d: cached %q, want %q", i, got, want)
		}
	}
	if s := string(appendHex(nil, 0x1a2b, 6)) + " " + string(appendHex(nil, 0x1234567, 6)) + " " + string(appendHex(nil, 0, 2)); s != "001a2b 1234567 00" {
		t.Errorf("hex: %s", s)
	}
}
