package qos

import (
	"strings"
	"testing"
	"time"

	"roce-fwd/roce"
)

func TestPresetsValid(t *testing.T) {
	for _, name := range PresetNames() {
		c, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != name {
			t.Errorf("%s: Name %q", name, c.Name)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		rx, _ := NewPFCRx(100e9, &c.PrioToTC)
		if _, err := NewScheduler(&c, MakeRings(64), rx, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := NewPFCTx(c.PFCTxConfig(100e9)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Preset("cisco"); err == nil || !strings.Contains(err.Error(), "nvidia-roce") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestNVIDIARoCE(t *testing.T) {
	c := NVIDIARoCE()
	if c.TCMap.Trust != roce.TrustDSCP {
		t.Error("trust")
	}
	for d, tc := range c.TCMap.DSCP {
		want := uint8(0)
		switch d {
		case 26:
			want = 3
		case 48:
			want = 6
		}
		if tc != want {
			t.Errorf("DSCP %d → TC%d, want %d", d, tc, want)
		}
	}
	if c.LosslessTCs() != 1<<3 || c.PFCPriorities() != 1<<3 {
		t.Errorf("lossless %08b PFC %08b", c.LosslessTCs(), c.PFCPriorities())
	}
	tc3 := c.TC[3]
	if tc3.Mode != DWRR || tc3.Weight != 50 || tc3.ECN != (ECN{Min: 150_000, Max: 1_500_000, Probability: 0.1}) {
		t.Errorf("TC3 %+v", tc3)
	}
	if c.TC[0].Mode != DWRR || c.TC[0].Weight != 50 || c.TC[0].Lossless {
		t.Errorf("TC0 %+v", c.TC[0])
	}
	if c.TC[6].Mode != Strict {
		t.Errorf("TC6 %+v", c.TC[6])
	}
	if c.PFC.Xoff <= tc3.ECN.Max || c.PFC.Xon >= c.PFC.Xoff || c.PFC.Xoff >= tc3.Limit {
		t.Errorf("PFC thresholds %+v against ECN %+v and limit %d", c.PFC, tc3.ECN, tc3.Limit)
	}
	// The preset's map classifies a CNP (DSCP 48) to TC6.
	f, _ := frame(t, false, 0, 48, roce.ECNECT0)
	var r roce.Result
	roce.Classify(f, &c.TCMap, false, &r)
	if r.TC != 6 {
		t.Errorf("DSCP 48 classified to TC%d", r.TC)
	}
}

func TestSONiCAzure(t *testing.T) {
	c := SONiCAzure()
	for d, tc := range c.TCMap.DSCP {
		want := uint8(1)
		switch d {
		case 3, 4:
			want = uint8(d)
		case 46:
			want = 5
		case 48:
			want = 6
		}
		if tc != want {
			t.Errorf("DSCP %d → TC%d, want %d", d, tc, want)
		}
	}
	if c.LosslessTCs() != 0x18 || c.PFCPriorities() != 0x18 {
		t.Errorf("lossless %08b PFC %08b", c.LosslessTCs(), c.PFCPriorities())
	}
	for i, tc := range c.TC {
		want := uint32(14)
		if i == 3 || i == 4 {
			want = 15
			if tc.ECN != (ECN{Min: 1 << 20, Max: 2 << 20, Probability: 0.05}) || !tc.Lossless {
				t.Errorf("TC%d %+v", i, tc)
			}
		}
		if tc.Mode != DWRR || tc.Weight != want {
			t.Errorf("TC%d %v weight %d, want DWRR %d", i, tc.Mode, tc.Weight, want)
		}
	}
	w := c.Watchdog
	if !w.Enabled || w.Action != ActionDrop || w.DetectionTime != 200*time.Millisecond || w.RestorationTime != 200*time.Millisecond {
		t.Errorf("watchdog %+v", w)
	}
}

func TestConfigValidate(t *testing.T) {
	c := NVIDIARoCE()
	c.TCMap.DSCP[5] = 9
	c.TC[1].Weight = 0
	c.TC[2].ECN = ECN{Min: 2 << 20, Max: 3 << 20}
	c.PFC.Xon = c.PFC.Xoff
	c.PrioToTC[0] = 8
	c.Watchdog.Action = 7
	err := c.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{"DSCP 5 maps to TC 9", "TC1: DWRR weight 0", "TC2: ECN min 2MiB is not below the queue limit 1MiB", "xon 2MB must be below xoff 2MB", "PFC priority 0 maps to TC 8", "watchdog action"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if _, err := NewScheduler(&c, MakeRings(8), nil, 1); err == nil {
		t.Error("NewScheduler accepted a bad config")
	}
	good := NVIDIARoCE()
	var rings [NumTC][]Slot
	if _, err := NewScheduler(&good, &rings, nil, 1); err == nil {
		t.Error("NewScheduler accepted empty rings")
	}
	if p := good.TCToPrio(); p != IdentityPrioToTC {
		t.Errorf("TCToPrio %v", p)
	}
}
