package capture

import (
	"io"
	"os"
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
// the pcapng block, into a buffer (discard) or a file in /dev/shm (file:
// the kernel's copy too).
func BenchmarkWrite(b *testing.B) {
	recs := workloadRecords(b)
	m := roce.DefaultTCMap()
	for _, sink := range []string{"discard", "file"} {
		b.Run(sink, func(b *testing.B) {
			var out io.Writer = io.Discard
			if sink == "file" {
				f, err := os.CreateTemp("/dev/shm", "capture-bench-*.pcapng")
				if err != nil {
					b.Skip(err)
				}
				defer os.Remove(f.Name())
				defer f.Close()
				out = f
			}
			c := newCapture(Options{Ports: []Port{{ID: 0, Name: "src"}}, TCMap: &m}, nil)
			c.w = newNgWriter(out)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c.write(&recs[i%len(recs)])
			}
			if err := c.w.flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
