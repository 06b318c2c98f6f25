package roce_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"roce-fwd/pcapio"
	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

// tsharkFields are compared with our views; "ours" reads the same value.
var tsharkFields = []struct {
	name string
	ours func(f []byte, r *roce.Result) (uint64, bool)
}{
	{"infiniband.bth.opcode", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.Opcode), true }},
	{"infiniband.bth.se", func(f []byte, r *roce.Result) (uint64, bool) { return u(r.SE), true }},
	{"infiniband.bth.m", func(f []byte, r *roce.Result) (uint64, bool) { return u(r.MigReq), true }},
	{"infiniband.bth.padcnt", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.PadCount), true }},
	{"infiniband.bth.tver", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.TVer), true }},
	{"infiniband.bth.p_key", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.PKey), true }},
	{"infiniband.bth.destqp", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.DestQP), true }},
	{"infiniband.bth.a", func(f []byte, r *roce.Result) (uint64, bool) { return u(r.AckReq), true }},
	{"infiniband.bth.psn", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.PSN), true }},
	{"ip.dsfield.dscp", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.DSCP), r.IPVersion == 4 }},
	{"ip.dsfield.ecn", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.ECN), r.IPVersion == 4 }},
	{"ipv6.tclass.dscp", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.DSCP), r.IPVersion == 6 }},
	{"ipv6.tclass.ecn", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.ECN), r.IPVersion == 6 }},
	{"vlan.id", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.VID), r.Tagged }},
	{"vlan.priority", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(r.PCP), r.Tagged }},
	{"udp.length", func(f []byte, r *roce.Result) (uint64, bool) { return uint64(roce.UDP(f[r.L4:]).Length()), true }},
	{"infiniband.aeth.syndrome", func(f []byte, r *roce.Result) (uint64, bool) {
		return uint64(r.AETH), r.HasAETH && r.Transport != roce.TransportRD
	}},
	{"infiniband.aeth.msn", ext(roce.ExtAETH, func(e roce.ExtFields) uint64 { return uint64(e.MSN) })},
	{"infiniband.reth.va", func(f []byte, r *roce.Result) (uint64, bool) {
		if v, ok := ext(roce.ExtRETH, func(e roce.ExtFields) uint64 { return e.VA })(f, r); ok {
			return v, true
		}
		return ext(roce.ExtAtomicETH, func(e roce.ExtFields) uint64 { return e.AtomicVA })(f, r)
	}},
	{"infiniband.reth.r_key", func(f []byte, r *roce.Result) (uint64, bool) {
		if v, ok := ext(roce.ExtRETH, func(e roce.ExtFields) uint64 { return uint64(e.RKey) })(f, r); ok {
			return v, true
		}
		return ext(roce.ExtAtomicETH, func(e roce.ExtFields) uint64 { return uint64(e.AtomicRKey) })(f, r)
	}},
	{"infiniband.reth.dmalen", ext(roce.ExtRETH, func(e roce.ExtFields) uint64 { return uint64(e.DMALength) })},
	{"infiniband.atomiceth.swapdt", ext(roce.ExtAtomicETH, func(e roce.ExtFields) uint64 { return e.SwapAdd })},
	{"infiniband.atomiceth.cmpdt", ext(roce.ExtAtomicETH, func(e roce.ExtFields) uint64 { return e.Compare })},
	{"infiniband.atomicacketh.origremdt", ext(roce.ExtAtomicAckETH, func(e roce.ExtFields) uint64 { return e.OrigRemoteData })},
	{"infiniband.deth.q_key", ext(roce.ExtDETH, func(e roce.ExtFields) uint64 { return uint64(e.QKey) })},
	{"infiniband.deth.srcqp", ext(roce.ExtDETH, func(e roce.ExtFields) uint64 { return uint64(e.SrcQP) })},
	{"infiniband.immdt", ext(roce.ExtImmDt, func(e roce.ExtFields) uint64 { return uint64(e.Imm) })},
	{"infiniband.ieth", ext(roce.ExtIETH, func(e roce.ExtFields) uint64 { return uint64(e.InvRKey) })},
}

func u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func ext(h roce.ExtMask, get func(roce.ExtFields) uint64) func([]byte, *roce.Result) (uint64, bool) {
	return func(f []byte, r *roce.Result) (uint64, bool) {
		// tshark 4.0 lays out 0x40-0x5F (RD) headers differently from the
		// IBTA spec (and from rxe); only the BTH of those is compared.
		if r.Transport == roce.TransportRD {
			return 0, false
		}
		b := roce.BTH(f[r.BTH : int(r.ICRCOff)+4])
		e, has := b.ExtFields()
		return get(e), has&h != 0
	}
}

func runTshark(t *testing.T, path string, extra ...string) [][]string {
	args := []string{"-r", path, "-n", "--disable-protocol", "rpcordma",
		"-T", "fields", "-E", "occurrence=l", "-E", "separator=|"}
	args = append(args, extra...)
	for _, f := range tsharkFields {
		args = append(args, "-e", f.name)
	}
	out, err := exec.Command("tshark", args...).Output()
	if err != nil {
		t.Fatalf("tshark %s: %v", path, err)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		rows = append(rows, strings.Split(line, "|"))
	}
	return rows
}

func parseTshark(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	if v, err := strconv.ParseUint(s, 0, 64); err == nil {
		return v, true
	}
	if v, err := strconv.ParseUint(s, 16, 64); err == nil { // FT_BYTES
		return v, true
	}
	switch s {
	case "True":
		return 1, true
	case "False":
		return 0, true
	}
	return 0, false
}

// TestTshark compares every field tshark decodes with our views, for the
// real captures, the scapy corpus and the builder corpus.
func TestTshark(t *testing.T) {
	if _, err := exec.LookPath("tshark"); err != nil {
		t.Skip("tshark not installed")
	}
	type input struct {
		path   string
		frames [][]byte
		extra  []string
	}
	var inputs []input
	decodeAs := []string{"-d", "udp.port==69,infiniband", "-d", "udp.port==72,infiniband"}
	if dir := captureDirOrEmpty(); dir != "" {
		paths, _ := filepath.Glob(filepath.Join(dir, "*.pcap"))
		for _, p := range paths {
			inputs = append(inputs, input{p, rocetest.ReadPcap(t, p), decodeAs})
		}
	}
	inputs = append(inputs, input{"testdata/scapy_corpus.pcap", rocetest.ReadPcap(t, "testdata/scapy_corpus.pcap"), nil})
	var built [][]byte
	for _, c := range rocetest.Corpus() {
		built = append(built, c.Frame)
	}
	tmp := filepath.Join(t.TempDir(), "built.pcap")
	if err := pcapio.WriteFile(tmp, built); err != nil {
		t.Fatal(err)
	}
	inputs = append(inputs, input{tmp, built, nil})

	compared := 0
	for _, in := range inputs {
		rows := runTshark(t, in.path, in.extra...)
		if len(rows) != len(in.frames) {
			t.Fatalf("%s: tshark gave %d rows for %d frames", in.path, len(rows), len(in.frames))
		}
		for i, f := range in.frames {
			var r roce.Result
			roce.Classify(f, nil, false, &r)
			row := rows[i]
			_, tsRoCE := parseTshark(row[0])
			if r.RoCE != tsRoCE {
				t.Errorf("%s #%d: RoCE %v, tshark %v", in.path, i+1, r.RoCE, tsRoCE)
				continue
			}
			if !r.RoCE {
				continue
			}
			for j, fld := range tsharkFields {
				theirs, ok := parseTshark(row[j])
				if !ok {
					continue
				}
				ours, ok := fld.ours(f, &r)
				if !ok {
					// A header tshark decodes must exist for us too,
					// except where tshark 4.0 mislays RD headers.
					if r.Transport != roce.TransportRD && !bytes.HasPrefix([]byte(fld.name), []byte("vlan")) {
						t.Errorf("%s #%d: tshark has %s=%s, we have no such field", in.path, i+1, fld.name, row[j])
					}
					continue
				}
				compared++
				if ours != theirs {
					t.Errorf("%s #%d: %s = %d, tshark %d", in.path, i+1, fld.name, ours, theirs)
				}
			}
		}
	}
	t.Logf("%d field values compared", compared)
}

func captureDirOrEmpty() string {
	for _, d := range []string{"../../shared/testdata/captures"} {
		if m, _ := filepath.Glob(filepath.Join(d, "*.pcap")); len(m) > 0 {
			return d
		}
	}
	return ""
}
