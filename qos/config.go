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

// Field names what part of a Config a FieldError is about. Per-TC fields
// carry the TC in FieldError.Index, map fields the entry's key.
type Field uint8

const (
	FieldTrust    Field = iota + 1 // TCMap.Trust
	FieldDSCPToTC                  // TCMap.DSCP[Index]
	FieldPCPToTC                   // TCMap.PCP[Index]
	FieldPrioToTC                  // PrioToTC[Index]
	FieldRate                      // Rate
	FieldBurst                     // Burst
	FieldMode                      // TC[Index].Mode
	FieldWeight                    // TC[Index].Weight
	FieldECN                       // TC[Index].ECN, alone or its Min against TC[Index].Limit
	FieldMaxRate                   // TC[Index].MaxRate
	FieldMaxBurst                  // TC[Index].MaxBurst
	FieldLimit                     // TC[Index].Limit of a lossless TC against PFC.Xoff
	FieldLossless                  // the lossless TCs against PrioToTC
	FieldXoff                      // PFC.Xoff
	FieldXon                       // PFC.Xon against PFC.Xoff
	FieldWatchdog                  // Watchdog
	numFields
)

var fieldNames = [numFields]string{"", "trust", "dscp_to_tc", "pcp_to_tc", "prio_to_tc", "rate", "burst",
	"mode", "weight", "ecn", "max_rate", "max_burst", "limit", "lossless", "pfc.xoff", "pfc.xon", "watchdog"}

// String is the field's name in FieldError.Path.
func (f Field) String() string {
	if f > 0 && f < numFields {
		return fieldNames[f]
	}
	return "field-" + strconv.Itoa(int(f))
}

// PerTC reports whether the field belongs to one TC (TC[Index]).
func (f Field) PerTC() bool { return f >= FieldMode && f <= FieldLimit }

// perKey reports whether the field is a map entry (its key in Index).
func (f Field) perKey() bool { return f >= FieldDSCPToTC && f <= FieldPrioToTC }

// FieldError is one problem Validate found: the field it is about and
// what is wrong with it.
type FieldError struct {
	Field Field
	Index int   // the TC of a per-TC field, the key of a map field; -1 otherwise
	Err   error // the problem, in the field's terms
}

// Message is the problem as Error says it, without the package's prefix:
// "TC1: DWRR weight 0 is outside 1..255".
func (e *FieldError) Message() string {
	if e.Field.PerTC() {
		return "TC" + strconv.Itoa(e.Index) + ": " + e.Err.Error()
	}
	return e.Err.Error()
}

func (e *FieldError) Error() string { return "qos: " + e.Message() }

// Same reports whether o is the same problem: the same field and index,
// said the same way (values included).
func (e *FieldError) Same(o *FieldError) bool {
	return e.Field == o.Field && e.Index == o.Index && e.Message() == o.Message()
}

func (e *FieldError) Unwrap() error { return e.Err }

// Path names the field with its index: "tc[3].weight", "dscp_to_tc[46]",
// "pfc.xoff".
func (e *FieldError) Path() string {
	switch {
	case e.Field.PerTC():
		return "tc[" + strconv.Itoa(e.Index) + "]." + e.Field.String()
	case e.Field.perKey():
		return e.Field.String() + "[" + strconv.Itoa(e.Index) + "]"
	}
	return e.Field.String()
}

// FieldErrors lists the *FieldErrors in err, in order: Validate's joined
// error, or one that wraps it.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *FieldError:
			out = append(out, e)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}

// Validate reports every inconsistency in c: a *FieldError each, joined
// (errors.Join), so that the text has one per line; FieldErrors gives
// them back.
func (c *Config) Validate() error {
	var errs []error
	bad := func(f Field, index int, format string, a ...any) {
		errs = append(errs, &FieldError{Field: f, Index: index, Err: fmt.Errorf(format, a...)})
	}
	if c.TCMap.Trust > roce.TrustNone {
		bad(FieldTrust, -1, "unknown trust mode %d", c.TCMap.Trust)
	}
	for d, tc := range c.TCMap.DSCP {
		if tc >= NumTC {
			bad(FieldDSCPToTC, d, "DSCP %d maps to TC %d; TCs are 0-7", d, tc)
		}
	}
	for p, tc := range c.TCMap.PCP {
		if tc >= NumTC {
			bad(FieldPCPToTC, p, "PCP %d maps to TC %d; TCs are 0-7", p, tc)
		}
	}
	for p, tc := range c.PrioToTC {
		if tc >= NumTC {
			bad(FieldPrioToTC, p, "PFC priority %d maps to TC %d; TCs are 0-7", p, tc)
		}
	}
	if c.Rate > MaxRate {
		bad(FieldRate, -1, "port rate %s is above 1 Pbit/s", FormatRate(c.Rate))
	}
	if c.Burst > MaxBurst {
		bad(FieldBurst, -1, "port burst %s is above %s", FormatSize(c.Burst), FormatSize(MaxBurst))
	}
	for i := range c.TC {
		t := &c.TC[i]
		switch t.Mode {
		case DWRR:
			if t.Weight < 1 || t.Weight > 255 {
				bad(FieldWeight, i, "DWRR weight %d is outside 1..255", t.Weight)
			}
		case Strict:
		default:
			bad(FieldMode, i, "unknown scheduling mode %d", t.Mode)
		}
		if err := t.ECN.check(); err != nil {
			errs = append(errs, &FieldError{Field: FieldECN, Index: i, Err: err})
		}
		if t.ECN.Enabled() && t.Limit != 0 && t.ECN.Min >= t.Limit {
			bad(FieldECN, i, "ECN min %s is not below the queue limit %s: nothing would be marked; lower ecn min or raise limit", FormatSize(t.ECN.Min), FormatSize(t.Limit))
		}
		if t.MaxRate > MaxRate {
			bad(FieldMaxRate, i, "max rate %s is above 1 Pbit/s", FormatRate(t.MaxRate))
		}
		if t.MaxBurst > MaxBurst {
			bad(FieldMaxBurst, i, "max burst %s is above %s", FormatSize(t.MaxBurst), FormatSize(MaxBurst))
		}
		if t.Lossless && t.Limit != 0 && c.PFC.Xoff >= t.Limit {
			bad(FieldLimit, i, "PFC xoff %s is not below the queue limit %s: the queue would drop before pausing; lower pfc xoff or raise limit", FormatSize(c.PFC.Xoff), FormatSize(t.Limit))
		}
	}
	if c.LosslessTCs() != 0 {
		if c.PFCPriorities() == 0 {
			bad(FieldLossless, -1, "lossless TCs %s have no PFC priority mapped to them; map one in pfc_priority_to_tc", MaskList(c.LosslessTCs()))
		}
		if c.PFC.Xoff == 0 {
			bad(FieldXoff, -1, "PFC xoff must be above 0 when a TC is lossless")
		} else if c.PFC.Xon >= c.PFC.Xoff {
			bad(FieldXon, -1, "PFC xon %s must be below xoff %s; lower xon or raise xoff", FormatSize(c.PFC.Xon), FormatSize(c.PFC.Xoff))
		}
	}
	if err := c.Watchdog.check(); err != nil {
		errs = append(errs, &FieldError{Field: FieldWatchdog, Index: -1, Err: err})
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
