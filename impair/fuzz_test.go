package impair

import (
	"reflect"
	"strings"
	"testing"

	"roce-fwd/roce"
)

// FuzzParse: any line is a rule or an error, never a panic, and a rule
// prints as a line that parses back to itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"port 0 rx qp 0x11 action drop count 1",
		"port 1 tx src 10.0.0.0/8 dst 2001:db8::/32 tc 3 qp 0x100-0x1ff class data,cnp psn 100-200 every 7 probability 0.25 action drop burst 3 count 9 for 5s seed 42",
		"class ack,nak action delay 200us jitter 50us", "action reorder 3", "action rate_limit 1000",
		"qp 5-4 action drop", "probability 1e-9 action set_ce", "action delay 1s jitter 0s",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, err := Parse(strings.Fields(line), ports)
		if err != nil {
			return
		}
		again, err := Parse(strings.Fields(r.String()), ports)
		if err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("%q printed as %q, read back as %+v (%v), want %+v", line, r.String(), again, err, r)
		}
	})
}

// FuzzApply: a rule applied to any frame the classifier takes changes at
// most the bytes it names and never panics.
func FuzzApply(f *testing.F) {
	for _, p := range []pkt{{qp: 1, op: sendOnly, ecn: roce.ECNECT0, payload: 8}, {qp: 2, op: ack}, {qp: 3, op: cnp, src: "2001:db8::1", dst: "2001:db8::2"}} {
		fr, _ := frame(f, p)
		for _, l := range []string{"action set_ce", "action corrupt_payload", "action corrupt_icrc", "src 10.0.0.0/8 action clear_ecn", "action delay 1ms jitter 1ms"} {
			f.Add(l, fr)
		}
	}
	m := roce.DefaultTCMap()
	f.Fuzz(func(t *testing.T, line string, fr []byte) {
		r, err := Parse(strings.Fields(line), ports)
		if err != nil {
			return
		}
		r.ID = 1
		s, err := Compile([]Rule{r}, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		w := NewWorker(s, 0)
		var res roce.Result
		roce.Classify(fr, &m, true, &res)
		before := append([]byte(nil), fr...)
		v := w.Apply(0, 1, fr, &res, 1)
		if v.Rule == 0 && string(before) != string(fr) {
			t.Fatalf("no rule acted, yet the frame changed")
		}
	})
}
