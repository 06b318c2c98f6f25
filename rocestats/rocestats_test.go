package rocestats

import (
	"testing"

	"roce-fwd/demotraffic"
	"roce-fwd/qpstats"
	"roce-fwd/roce"
)

// The counters must agree with what the classifier says of each frame.
func TestAddCountsTheDemoMix(t *testing.T) {
	frames := demotraffic.Frames()
	m := roce.DefaultTCMap()
	var c Counters
	var r roce.Result
	var wantRoCE, wantCNP, wantOther, wantBytes, wantRoCEBytes uint64
	for _, f := range frames {
		roce.Classify(f, &m, true, &r)
		c.Add(f, &r, len(f))
		wantBytes += uint64(len(f))
		switch {
		case r.RoCE && r.Err == roce.ReasonNone:
			wantRoCE++
			wantRoCEBytes += uint64(len(f))
			if r.CNP {
				wantCNP++
			}
		case r.Err == roce.ReasonNone:
			wantOther++
		}
	}
	if c.Frames() != uint64(len(frames)) || c.RoCE() != wantRoCE || c.CNPs() != wantCNP || c.Other != wantOther {
		t.Errorf("counters %+v, want roce %d cnp %d other %d", c.Report(), wantRoCE, wantCNP, wantOther)
	}
	if c.ICRCOK != wantRoCE || c.ICRCBad != 0 || c.ECN[2] != wantRoCE {
		t.Errorf("icrc ok %d bad %d ect0 %d", c.ICRCOK, c.ICRCBad, c.ECN[2])
	}
	if c.Bytes() != wantBytes || c.RoCEBytes != wantRoCEBytes {
		t.Errorf("bytes %d (roce %d), want %d (roce %d)", c.Bytes(), c.RoCEBytes, wantBytes, wantRoCEBytes)
	}
	rep := c.Report()
	if rep.Opcodes["RC SEND Only"] != 1 || rep.Opcodes["CNP"] != 1 {
		t.Errorf("opcodes by name %v", rep.Opcodes)
	}
	var twice Counters
	twice.Merge(&c)
	twice.Merge(&c)
	if twice.Frames() != 2*c.Frames() || twice.Opcodes[4] != 2*c.Opcodes[4] || twice.TC != [8]uint64{2 * c.TC[0], 2 * c.TC[1], 2 * c.TC[2], 2 * c.TC[3], 2 * c.TC[4], 2 * c.TC[5], 2 * c.TC[6], 2 * c.TC[7]} {
		t.Errorf("merge")
	}
	twice.Sub(&c)
	if twice != c {
		t.Errorf("merge twice then sub once: %+v, want %+v", twice, c)
	}
}

func TestBadICRCAndMalformed(t *testing.T) {
	f := append([]byte(nil), demotraffic.Frames()[0]...)
	f[len(f)-1] ^= 0xff // breaks the ICRC
	m := roce.DefaultTCMap()
	var c Counters
	var r roce.Result
	roce.Classify(f, &m, true, &r)
	c.Add(f, &r, len(f))
	roce.Classify(f[:20], &m, true, &r) // truncated IPv4
	c.Add(f[:20], &r, 20)
	if c.ICRCBad != 1 || c.RoCE() != 1 || c.MalformedTotal() != 1 || c.Malformed[roce.ErrTruncatedIPv4] != 1 {
		t.Errorf("%+v", c.Report())
	}
}

func TestPFCAndPauseCounted(t *testing.T) {
	buf := make([]byte, 64)
	n, err := roce.BuildPFC(buf, roce.MAC{2, 0, 0, 0, 0, 1}, 0x08, [8]uint16{3: 0xffff})
	if err != nil {
		t.Fatal(err)
	}
	pfc := append([]byte(nil), buf[:n]...)
	n, err = roce.BuildPause(buf, roce.MAC{2, 0, 0, 0, 0, 1}, 100)
	if err != nil {
		t.Fatal(err)
	}
	pause := buf[:n]
	m := roce.DefaultTCMap()
	var c Counters
	var r roce.Result
	// Neither a tagged PFC frame nor another MAC control opcode counts.
	tagged := append(append(append([]byte(nil), pfc[:12]...), 0x81, 0, 0, 1), pfc[12:]...)
	other := append([]byte(nil), pause...)
	other[15] = 3
	for _, f := range [][]byte{pfc, pause, tagged, other, pfc[:30]} {
		roce.Classify(f, &m, false, &r)
		c.Add(f, &r, len(f))
	}
	if c.PFC != 1 || c.Pause != 1 || c.RoCE() != 0 || c.Other != 5 {
		t.Errorf("pfc %d pause %d roce %d other %d", c.PFC, c.Pause, c.RoCE(), c.Other)
	}
	// Add reads the classifier's result only.
	roce.Classify(pfc, &m, false, &r)
	c.Add(nil, &r, len(pfc))
	if c.PFC != 2 {
		t.Errorf("pfc %d", c.PFC)
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	frames := demotraffic.Frames()
	m := roce.DefaultTCMap()
	var c Counters
	var r roce.Result
	allocs := testing.AllocsPerRun(1000, func() {
		for _, f := range frames {
			roce.Classify(f, &m, false, &r)
			c.Add(f, &r, len(f))
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations", allocs)
	}
}

// BenchmarkStage is the "roce" mode's per-packet work on the demo mix:
// classify, count, and the QP table.
func BenchmarkStage(b *testing.B) {
	frames := demotraffic.Frames()
	m := roce.DefaultTCMap()
	var c Counters
	var r roce.Result
	qp := qpstats.New(4096, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := frames[i%len(frames)]
		roce.Classify(f, &m, false, &r)
		c.Add(f, &r, len(f))
		if r.RoCE && r.Err == roce.ReasonNone {
			qp.Observe(f, &r, len(f), int64(i))
		}
	}
}
