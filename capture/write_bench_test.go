package capture

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"roce-fwd/demotraffic"
	"roce-fwd/pipeline"
	"roce-fwd/roce"
)

// workloadRecords are tap records of the 8192-QP control mix as a
// capture of every packet received on a port sees them.
func workloadRecords(tb testing.TB) []pipeline.TapRecord {
	var recs []pipeline.TapRecord
	w := demotraffic.Workload{Mix: demotraffic.MixControl, QPs: 8192, Seed: 1}
	_, err := w.Generate(func(f []byte) error {
		recs = append(recs, pipeline.TapRecord{NS: 1_700_000_000_000_000_000 + int64(len(recs)), Lcore: 1, Dir: pipeline.TapRx, Len: uint32(len(f)), Data: append([]byte(nil), f...)})
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return recs
}

// BenchmarkWrite is the capture writer's cost per packet: the verdict and
// the pcapng block, into a buffer (discard), or a file in /dev/shm (shm:
// tmpfs, the kernel copies each buffer into its pages) or in /var/tmp
// (disk: direct I/O where the file system takes it). rx is a capture of
// every packet received; drop a capture of drops by an impairment rule.
func BenchmarkWrite(b *testing.B) {
	recs := workloadRecords(b)
	drops := append([]pipeline.TapRecord(nil), recs...)
	for i := range drops {
		drops[i].Dir, drops[i].Reason, drops[i].Impair = pipeline.TapDrop, pipeline.DropImpair, 1
	}
	m := roce.DefaultTCMap()
	for _, sink := range []string{"rx/discard", "drop/discard", "rx/shm", "rx/disk"} {
		b.Run(sink, func(b *testing.B) {
			w := newNgWriter(io.Discard)
			if dir, ok := map[string]string{"rx/shm": "/dev/shm", "rx/disk": "/var/tmp"}[sink]; ok {
				name := filepath.Join(dir, fmt.Sprintf("capture-bench-%d.pcapng", os.Getpid()))
				fs, buf, err := openFileSink(name, ngBufferSize)
				if err != nil {
					b.Skip(err)
				}
				defer os.Remove(name)
				w = ngWriter{s: fs, buf: buf}
			}
			rs := recs
			if sink == "drop/discard" {
				rs = drops
			}
			c := newCapture(Options{Ports: []Port{{ID: 0, Name: "src"}}, TCMap: &m}, w)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.write(&rs[i%len(rs)])
			}
			if err := c.w.close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
