package inspect

import (
	"testing"

	"roce-fwd/demotraffic"
	"roce-fwd/roce"
)

// A RoCEv2 frame with a wrong ICRC is described as RoCEv2, with its ICRC
// bad and the error saying so; with the right ICRC, no error.
func TestDescribeBadICRC(t *testing.T) {
	f := append([]byte(nil), demotraffic.Frames()[0]...)
	var r roce.Result
	roce.Classify(f, &roce.TCMap{}, true, &r)
	if d := Describe(0, f, &r); !d.RoCE || d.ICRC == nil || *d.ICRC != roce.ICRCOK.String() || d.Error != nil {
		t.Fatalf("good frame: %+v", d)
	}
	f[len(f)-1] ^= 0xff
	roce.Classify(f, &roce.TCMap{}, true, &r)
	d := Describe(0, f, &r)
	if !d.RoCE || d.ICRC == nil || *d.ICRC != roce.ICRCBad.String() || d.Error == nil || *d.Error != roce.ErrBadICRC.String() || d.Opcode == nil {
		t.Errorf("bad ICRC: roce %v icrc %v error %v opcode %v", d.RoCE, deref(d.ICRC), deref(d.Error), d.Opcode)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
