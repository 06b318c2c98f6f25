package roce_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"

	"roce-fwd/roce"
	"roce-fwd/roce/internal/rocetest"
)

// TestScapyCorpus checks frames written by testdata/gen_scapy_corpus.py:
// scapy's ICRCs (and the script's own for IPv6) verify, deliberately bad
// ones do not, and every field matches what the script put in.
func TestScapyCorpus(t *testing.T) {
	frames := rocetest.ReadPcap(t, "testdata/scapy_corpus.pcap")
	raw, err := os.ReadFile("testdata/scapy_corpus.tsv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	cols := strings.Split(lines[0], "\t")
	if len(lines)-1 != len(frames) {
		t.Fatalf("%d rows for %d frames", len(lines)-1, len(frames))
	}
	m := roce.DefaultTCMap()
	okICRC := 0
	for i, line := range lines[1:] {
		want := map[string]string{}
		for j, v := range strings.Split(line, "\t") {
			want[cols[j]] = v
		}
		f := frames[i]
		var r roce.Result
		roce.Classify(f, &m, true, &r)
		got := map[string]string{"roce": b01(r.RoCE)}
		if r.RoCE {
			syn, msn := "-1", ""
			if r.HasAETH {
				syn = fmt.Sprint(uint8(r.AETH))
				msn = fmt.Sprint(roce.AETH(roce.BTH(f[r.BTH:]).Ext(roce.ExtAETH)).MSN())
			}
			pcp, vid := "", ""
			if r.Tagged {
				pcp, vid = fmt.Sprint(r.PCP), fmt.Sprint(r.VID)
			}
			icrcOK := "0"
			if r.ICRC == roce.ICRCOK {
				icrcOK = "1"
				okICRC++
			}
			for k, v := range map[string]any{
				"ipver": r.IPVersion, "opcode": uint8(r.Opcode), "dqpn": r.DestQP, "psn": r.PSN,
				"ackreq": b01(r.AckReq), "se": b01(r.SE), "migreq": b01(r.MigReq), "pad": r.PadCount,
				"pkey": r.PKey, "fecn": b01(r.FECN), "becn": b01(r.BECN), "dscp": r.DSCP, "ecn": r.ECN,
				"tags": r.Tags, "pcp": pcp, "vid": vid, "payload_len": r.PayloadLen, "syndrome": syn,
				"msn": msn, "icrc": fmt.Sprintf("%08x", binary.LittleEndian.Uint32(f[r.ICRCOff:])),
				"icrc_ok": icrcOK,
			} {
				got[k] = fmt.Sprint(v)
			}
			wantErr := roce.ReasonNone
			if want["icrc_ok"] == "0" {
				wantErr = roce.ErrBadICRC
			}
			if r.Err != wantErr {
				t.Errorf("frame %d: error %v, want %v", i, r.Err, wantErr)
			}
		} else if r.Err != roce.ReasonNone {
			t.Errorf("frame %d: error %v", i, r.Err)
		}
		for k, v := range got {
			if want[k] != v {
				t.Errorf("frame %d: %s = %s, want %s", i, k, v, want[k])
			}
		}
	}
	if okICRC < 40 {
		t.Errorf("only %d ICRCs verified", okICRC)
	}
}

func b01(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
