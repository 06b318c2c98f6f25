package impair

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Storm is a PFC XOFF (or 802.3x PAUSE) storm a port sends for a while:
// the drill for the next hop's PFC watchdog, or for a NIC's reaction to
// a paused priority.
type Storm struct {
	Port   int           `json:"port"`
	Pause  bool          `json:"pause"`            // 802.3x PAUSE, not PFC
	Prios  uint8         `json:"priorities"`       // PFC: the priorities paused, as bits
	Quanta uint16        `json:"quanta"`           // pause time of each frame, in 512 bit times
	Every  time.Duration `json:"every_ns"`         // one frame this often
	For    time.Duration `json:"for_ns,omitempty"` // how long the storm lasts
}

// StormSyntax is the storm grammar, for help texts.
const StormSyntax = "port <port> pfc <prio>[,<prio>...]|pause [quanta <q>] [every <d>] for <d>"

// DefaultStormEvery is how often a storm sends a frame unless told: well
// within a full quanta's pause at 100 Gbit/s (335 µs), so that the
// partner stays paused from one frame to the next.
const DefaultStormEvery = 100 * time.Microsecond

// MaxStorm bounds a storm: a drill, not a way to stop a fabric for good.
const MaxStorm = time.Hour

// ParseStorm reads a storm from its words (StormSyntax).
func ParseStorm(words []string, port func(string) (uint16, error)) (Storm, error) {
	s := Storm{Port: -1, Quanta: 0xffff, Every: DefaultStormEvery}
	kind := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if w == "pause" {
			s.Pause, kind = true, true
			continue
		}
		if i+1 >= len(words) {
			return s, fmt.Errorf("%s needs a value", w)
		}
		v := words[i+1]
		i++
		switch w {
		case "port":
			id, err := port(v)
			if err != nil {
				return s, err
			}
			s.Port = int(id)
		case "pfc":
			for _, p := range strings.Split(v, ",") {
				n, err := strconv.ParseUint(p, 10, 8)
				if err != nil || n > 7 {
					return s, fmt.Errorf("pfc %q: want priorities 0-7, e.g. pfc 3 or pfc 3,4", v)
				}
				s.Prios |= 1 << n
			}
			kind = true
		case "quanta":
			n, err := strconv.ParseUint(v, 0, 16)
			if err != nil {
				return s, fmt.Errorf("quanta %q: want 0-65535 (0 is XON: resume)", v)
			}
			s.Quanta = uint16(n)
		case "every", "for":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > MaxStorm {
				return s, fmt.Errorf("%s %q: want a duration above 0 and up to %s", w, v, MaxStorm)
			}
			if w == "every" {
				s.Every = max(d, time.Microsecond)
			} else {
				s.For = d
			}
		default:
			return s, fmt.Errorf("unknown word %q (%s)", w, StormSyntax)
		}
	}
	switch {
	case s.Port < 0:
		return s, fmt.Errorf("which port sends the storm? %s", StormSyntax)
	case !kind:
		return s, fmt.Errorf("pfc <priorities> or pause? %s", StormSyntax)
	case s.Pause && s.Prios != 0:
		return s, fmt.Errorf("pfc or pause, not both")
	case s.For == 0:
		return s, fmt.Errorf("for how long? %s", StormSyntax)
	}
	return s, nil
}

// String is the storm as a line ParseStorm reads back (port as a number).
func (s Storm) String() string {
	b := fmt.Sprintf("port %d ", s.Port)
	if s.Pause {
		b += "pause"
	} else {
		var ps []string
		for p := 0; p < 8; p++ {
			if s.Prios&(1<<p) != 0 {
				ps = append(ps, strconv.Itoa(p))
			}
		}
		b += "pfc " + strings.Join(ps, ",")
	}
	return b + fmt.Sprintf(" quanta %d every %s for %s", s.Quanta, s.Every, s.For)
}
