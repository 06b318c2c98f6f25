package qos

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"roce-fwd/roce"
)

// SchedMode is how a TC competes for its port.
type SchedMode uint8

const (
	DWRR   SchedMode = iota // deficit-weighted round robin by bytes (ETS)
	Strict                  // strict priority, higher TC first, before any DWRR TC
)

func (m SchedMode) String() string {
	switch m {
	case DWRR:
		return "dwrr"
	case Strict:
		return "strict"
	}
	return "sched-" + strconv.Itoa(int(m))
}

// DefaultQuantum is the DWRR quantum per unit of weight, in bytes. ETS
// weights are percentages, so a TC at 50 gets 12.8 KB a round (three 4 KB
// RoCE frames): rounds stay short, which interleaves the DWRR TCs finely,
// and the scheduler skips empty rounds in one step, so small quanta (a
// SONiC weight of 14 is 3.5 KB, under one frame) cost nothing per packet.
const DefaultQuantum = 256

// TCConfig configures one traffic class of a port.
type TCConfig struct {
	Mode     SchedMode
	Weight   uint32 // DWRR weight, 1..255 (Onyx ETS percent, SONiC DWRR weight)
	Lossless bool   // PFC-protected: WRED never drops it, PFC and the watchdog apply
	Limit    uint64 // queue limit in bytes; 0 = bounded by its slots only
	ECN      ECN    // WRED-ECN profile; zero = off
	MaxRate  uint64 // per-TC shaper in bits/s; 0 = none
	MaxBurst uint64 // per-TC shaper burst in bytes; 0 = DefaultBurst(MaxRate)
}

// PFCConfig sets the PFC generation thresholds every ingress port uses
// for its lossless priorities (bytes it holds in egress queues).
type PFCConfig struct {
	Xoff   uint64
	Xon    uint64
	Quanta uint16 // 0 = DefaultQuanta
}

// Config is the QoS of one egress port: classification, per-TC queues,
// WRED-ECN, scheduling and shaping, PFC and the PFC watchdog. Presets are
// Configs; a config file starts from one and overrides fields.
type Config struct {
	Name     string
	TCMap    roce.TCMap      // trust mode and DSCP/PCP → TC
	TC       [NumTC]TCConfig // per TC
	PrioToTC [NumTC]uint8    // PFC priority → TC; presets use IdentityPrioToTC (the zero value sends all to TC0)
	Quantum  uint32          // DWRR bytes per unit of weight; 0 = DefaultQuantum
	Rate     uint64          // port shaper in bits/s; 0 = unlimited
	Burst    uint64          // port shaper burst in bytes; 0 = DefaultBurst(Rate)
	PFC      PFCConfig       // thresholds for the lossless priorities
	Watchdog WatchdogConfig  // PFC watchdog on the lossless TCs
}

// LosslessTCs has bit n set when TC n is lossless.
func (c *Config) LosslessTCs() uint8 {
	var m uint8
	for i := range c.TC {
		if c.TC[i].Lossless {
			m |= 1 << i
		}
	}
	return m
}

// PFCPriorities has bit p set when priority p maps to a lossless TC: the
// priorities PFC is enabled for, in both directions.
func (c *Config) PFCPriorities() uint8 {
	var m uint8
	for p, tc := range c.PrioToTC {
		if tc < NumTC && c.TC[tc].Lossless {
			m |= 1 << p
		}
	}
	return m
}

// TCToPrio gives, per TC, the priority whose PFC frames pause it and
// under which its packets are counted in PFCTx: the lowest priority
// mapped to it (the identity map gives TC n → priority n).
func (c *Config) TCToPrio() [NumTC]uint8 {
	var t [NumTC]uint8
	var set uint8
	for p, tc := range c.PrioToTC {
		if tc < NumTC && set&(1<<tc) == 0 {
			t[tc], set = uint8(p), set|1<<tc
		}
	}
	for tc := range t {
		if set&(1<<tc) == 0 {
			t[tc] = uint8(tc)
		}
	}
	return t
}

// PFCTxConfig is the PFCTx configuration of an ingress port of speed
// bits/s under c.
func (c *Config) PFCTxConfig(speed uint64) PFCTxConfig {
	return PFCTxConfig{Enable: c.PFCPriorities(), Xoff: c.PFC.Xoff, Xon: c.PFC.Xon, Quanta: c.PFC.Quanta, Speed: speed}
}

// Validate reports every inconsistency in c, one per line.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf("qos: "+format, a...)) }
	if c.TCMap.Trust > roce.TrustNone {
		bad("unknown trust mode %d", c.TCMap.Trust)
	}
	for d, tc := range c.TCMap.DSCP {
		if tc >= NumTC {
			bad("DSCP %d maps to TC %d; TCs are 0-7", d, tc)
		}
	}
	for p, tc := range c.TCMap.PCP {
		if tc >= NumTC {
			bad("PCP %d maps to TC %d; TCs are 0-7", p, tc)
		}
	}
	for p, tc := range c.PrioToTC {
		if tc >= NumTC {
			bad("PFC priority %d maps to TC %d; TCs are 0-7", p, tc)
		}
	}
	if c.Rate > MaxRate {
		bad("port rate %s is above 1 Pbit/s", FormatRate(c.Rate))
	}
	if c.Burst > MaxBurst {
		bad("port burst %s is above %s", FormatSize(c.Burst), FormatSize(MaxBurst))
	}
	for i := range c.TC {
		t := &c.TC[i]
		switch t.Mode {
		case DWRR:
			if t.Weight < 1 || t.Weight > 255 {
				bad("TC%d: DWRR weight %d is outside 1..255", i, t.Weight)
			}
		case Strict:
		default:
			bad("TC%d: unknown scheduling mode %d", i, t.Mode)
		}
		if err := t.ECN.Validate(); err != nil {
			bad("TC%d: %v", i, err)
		}
		if t.ECN.Enabled() && t.Limit != 0 && t.ECN.Min >= t.Limit {
			bad("TC%d: ECN min %s is not below the queue limit %s: nothing would be marked", i, FormatSize(t.ECN.Min), FormatSize(t.Limit))
		}
		if t.MaxRate > MaxRate {
			bad("TC%d: max rate %s is above 1 Pbit/s", i, FormatRate(t.MaxRate))
		}
		if t.MaxBurst > MaxBurst {
			bad("TC%d: max burst %s is above %s", i, FormatSize(t.MaxBurst), FormatSize(MaxBurst))
		}
		if t.Lossless && t.Limit != 0 && c.PFC.Xoff >= t.Limit {
			bad("TC%d: PFC xoff %s is not below the queue limit %s: the queue would drop before pausing", i, FormatSize(c.PFC.Xoff), FormatSize(t.Limit))
		}
	}
	if c.LosslessTCs() != 0 {
		if c.PFCPriorities() == 0 {
			bad("lossless TCs %s have no PFC priority mapped to them", MaskList(c.LosslessTCs()))
		}
		if c.PFC.Xoff == 0 {
			bad("PFC xoff must be set when a TC is lossless")
		} else if c.PFC.Xon >= c.PFC.Xoff {
			bad("PFC xon %s must be below xoff %s", FormatSize(c.PFC.Xon), FormatSize(c.PFC.Xoff))
		}
	}
	if err := c.Watchdog.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// MaskList writes a bit mask of TCs or priorities as "3,4", or "none".
func MaskList(m uint8) string {
	if m == 0 {
		return "none"
	}
	var b []byte
	for i := range 8 {
		if m&(1<<i) != 0 {
			if len(b) > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(i), 10)
		}
	}
	return string(b)
}

// durationNs converts a config duration, using def for 0.
func durationNs(d, def time.Duration) int64 {
	if d == 0 {
		d = def
	}
	return int64(d)
}
