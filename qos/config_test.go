package qos

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Validate's problems come back typed, one per field, in order, with the
// same text as the joined error.
func TestConfigValidateFieldErrors(t *testing.T) {
	c := NVIDIARoCE()
	c.TCMap.Trust = 9
	c.TCMap.DSCP[5] = 9
	c.TCMap.PCP[2] = 8
	c.PrioToTC[0] = 8
	c.Rate = MaxRate + 1
	c.Burst = MaxBurst + 1
	c.TC[1].Weight = 0
	c.TC[2].ECN = ECN{Min: 2 << 20, Max: 3 << 20}
	c.TC[4].Mode = 7
	c.TC[5].ECN = ECN{Min: 2 << 10, Max: 1 << 10, Probability: 0.5}
	c.TC[6].MaxRate = MaxRate + 1
	c.TC[6].MaxBurst = MaxBurst + 1
	c.TC[3].Limit = c.PFC.Xoff
	c.PFC.Xon = c.PFC.Xoff
	c.Watchdog.Action = 7

	err := c.Validate()
	got := FieldErrors(err)
	want := []struct {
		path, msg string
	}{
		{"trust", "unknown trust mode 9"},
		{"dscp_to_tc[5]", "DSCP 5 maps to TC 9; TCs are 0-7"},
		{"pcp_to_tc[2]", "PCP 2 maps to TC 8; TCs are 0-7"},
		{"prio_to_tc[0]", "PFC priority 0 maps to TC 8; TCs are 0-7"},
		{"rate", "port rate "},
		{"burst", "port burst "},
		{"tc[1].weight", "TC1: DWRR weight 0 is outside 1..255"},
		{"tc[2].ecn", "TC2: ECN min 2MiB is not below the queue limit 1MiB: nothing would be marked"},
		{"tc[3].limit", "TC3: PFC xoff 2MB is not below the queue limit 2MB: the queue would drop before pausing"},
		{"tc[4].mode", "TC4: unknown scheduling mode 7"},
		{"tc[5].ecn", "TC5: ECN min 2KiB is above max 1KiB"},
		{"tc[6].max_rate", "TC6: max rate "},
		{"tc[6].max_burst", "TC6: max burst "},
		{"pfc.xon", "PFC xon 2MB must be below xoff 2MB"},
		{"watchdog", "unknown PFC watchdog action"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d field errors, want %d:\n%v", len(got), len(want), err)
	}
	var lines []string
	for i, w := range want {
		fe := got[i]
		if fe.Path() != w.path || !strings.HasPrefix(fe.Message(), w.msg) {
			t.Errorf("problem %d: %s %q, want %s %q...", i, fe.Path(), fe.Message(), w.path, w.msg)
		}
		if fe.Error() != "qos: "+fe.Message() || strings.Count(fe.Error(), "qos: ") != 1 {
			t.Errorf("problem %d: Error %q, want one package prefix before %q", i, fe.Error(), fe.Message())
		}
		if !errors.Is(err, fe.Err) || errors.Unwrap(fe) != fe.Err {
			t.Errorf("problem %d: %v does not unwrap to its cause", i, fe)
		}
		lines = append(lines, fe.Error())
	}
	if err.Error() != strings.Join(lines, "\n") {
		t.Errorf("joined error\n%v\nwant the problems one per line\n%s", err, strings.Join(lines, "\n"))
	}
	// Per-TC fields carry the TC, map fields the key, others -1.
	if got[6].Field != FieldWeight || got[6].Index != 1 || !got[6].Field.PerTC() {
		t.Errorf("weight problem %+v", got[6])
	}
	if got[1].Field != FieldDSCPToTC || got[1].Index != 5 || got[1].Field.PerTC() {
		t.Errorf("dscp problem %+v", got[1])
	}
	if got[13].Field != FieldXon || got[13].Index != -1 {
		t.Errorf("xon problem %+v", got[13])
	}

	// Wrapped, as the pipeline reports a port's configuration.
	wrapped := fmt.Errorf("port out: %w", err)
	if again := FieldErrors(wrapped); len(again) != len(got) || again[0] != got[0] {
		t.Errorf("FieldErrors through a wrap: %d problems", len(again))
	}
	var fe *FieldError
	if !errors.As(wrapped, &fe) || fe != got[0] {
		t.Errorf("errors.As found %v, want the first problem", fe)
	}
	if FieldErrors(nil) != nil || FieldErrors(errors.New("other")) != nil {
		t.Error("FieldErrors found problems in errors without any")
	}
}

func TestConfigValidateLosslessFields(t *testing.T) {
	c := NVIDIARoCE()
	c.PrioToTC[3] = 0 // nothing maps to lossless TC3
	c.PFC.Xoff = 0
	c.Watchdog.DetectionTime = -time.Second
	got := FieldErrors(c.Validate())
	want := []Field{FieldLossless, FieldXoff, FieldWatchdog}
	if len(got) != len(want) {
		t.Fatalf("problems %v, want fields %v", got, want)
	}
	for i, f := range want {
		if got[i].Field != f || got[i].Index != -1 || got[i].Path() != f.String() {
			t.Errorf("problem %d: %+v (%s), want field %v", i, got[i], got[i].Path(), f)
		}
	}
	if m := got[0].Message(); m != "lossless TCs 3 have no PFC priority mapped to them; map one in pfc_priority_to_tc" {
		t.Errorf("lossless problem %q", m)
	}
	if m := got[1].Message(); m != "PFC xoff must be above 0 when a TC is lossless" {
		t.Errorf("xoff problem %q", m)
	}
	if m := got[2].Message(); m != "PFC watchdog times must not be negative" {
		t.Errorf("watchdog problem %q", m)
	}
	// The same problem found twice (a port's configuration and the global
	// one) is Same; another value of the same field is not.
	other := NVIDIARoCE()
	other.PrioToTC[3] = 0
	other.PFC.Xoff = 0
	other.Watchdog.DetectionTime = -time.Second
	if o := FieldErrors(other.Validate()); !o[0].Same(got[0]) || !o[1].Same(got[1]) {
		t.Errorf("identical problems are not Same: %v / %v", o, got)
	}
	a, b := NVIDIARoCE(), NVIDIARoCE()
	a.TC[1].Weight, b.TC[1].Weight = 0, 300
	if fa, fb := FieldErrors(a.Validate()), FieldErrors(b.Validate()); fa[0].Same(fb[0]) {
		t.Errorf("%v and %v are Same", fa[0], fb[0])
	}
	if good := NVIDIARoCE(); good.Validate() != nil {
		t.Error("a preset has problems")
	}
	// ECN.Validate and WatchdogConfig.Validate keep their package prefix.
	if err := (ECN{Min: 2, Max: 1}).Validate(); err == nil || err.Error() != "qos: ECN min 2B is above max 1B; lower min or raise max" {
		t.Errorf("ECN.Validate: %v", err)
	}
	if err := (WatchdogConfig{DetectionTime: -1}).Validate(); err == nil || err.Error() != "qos: PFC watchdog times must not be negative" {
		t.Errorf("WatchdogConfig.Validate: %v", err)
	}
}
