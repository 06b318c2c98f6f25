package qos

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ParseSize parses a byte count such as "150KB", "1.5MB", "4MiB", "64KB",
// "1024B" or "1024". KB, MB, GB and TB (and the shorthands K, M, G, T)
// are decimal (1000); KiB, MiB, GiB and TiB are binary (1024). Unit
// letters are case-insensitive except the final B: a lower-case b means
// bits and is refused rather than guessed. Fractions are allowed when the
// result is a whole number of bytes ("1.5KiB" = 1536, "0.5B" is an error).
func ParseSize(s string) (uint64, error) {
	num, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("qos: size %q: %v", s, err)
	}
	var mult uint64
	u := unit
	switch {
	case u == "" || u == "B":
		mult = 1
	case strings.HasSuffix(u, "b"):
		return 0, fmt.Errorf("qos: size %q: unit %q is in bits; sizes are bytes (B, KB, KiB, MB, MiB, GB, GiB)", s, unit)
	default:
		u = strings.TrimSuffix(u, "B")
		binary := false
		if len(u) == 2 && (u[1] == 'i' || u[1] == 'I') {
			binary, u = true, u[:1]
		}
		if len(u) != 1 {
			return 0, fmt.Errorf("qos: size %q: unknown unit %q (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)", s, unit)
		}
		exp := strings.IndexByte("KMGT", u[0]&^0x20) + 1
		if exp == 0 {
			return 0, fmt.Errorf("qos: size %q: unknown unit %q (want B, KB, KiB, MB, MiB, GB, GiB, TB or TiB)", s, unit)
		}
		mult = 1
		base := uint64(1000)
		if binary {
			base = 1024
		}
		for range exp {
			mult *= base
		}
	}
	v, err := scale(num, mult)
	if err != nil {
		return 0, fmt.Errorf("qos: size %q: %v", s, err)
	}
	return v, nil
}

// ParseRate parses a rate in bits per second such as "25Gbps", "100Mbps",
// "400Gbps", "1.5Gbps", "10bps", "25G" or "1000". Prefixes are decimal
// and case-insensitive; "Bps" (bytes per second) is refused, not
// converted, because the two are easy to confuse in a config file.
func ParseRate(s string) (uint64, error) {
	num, unit, err := splitQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("qos: rate %q: %v", s, err)
	}
	u := unit
	if strings.HasSuffix(u, "Bps") || strings.HasSuffix(u, "BPS") {
		return 0, fmt.Errorf("qos: rate %q: unit %q is bytes per second; rates are bits per second (bps, Kbps, Mbps, Gbps, Tbps)", s, unit)
	}
	if len(u) >= 3 && strings.EqualFold(u[len(u)-3:], "bps") {
		u = u[:len(u)-3]
	}
	exp := 0
	switch len(u) {
	case 0:
	case 1:
		exp = strings.IndexByte("KMGT", u[0]&^0x20) + 1
		if exp == 0 {
			return 0, fmt.Errorf("qos: rate %q: unknown unit %q (want bps, Kbps, Mbps, Gbps or Tbps)", s, unit)
		}
	default:
		return 0, fmt.Errorf("qos: rate %q: unknown unit %q (want bps, Kbps, Mbps, Gbps or Tbps)", s, unit)
	}
	mult := uint64(1)
	for range exp {
		mult *= 1000
	}
	v, err := scale(num, mult)
	if err != nil {
		return 0, fmt.Errorf("qos: rate %q: %v", s, err)
	}
	return v, nil
}

// FormatSize writes n bytes the shortest exact way ParseSize reads back,
// preferring binary units for powers of two ("4MiB", "150KB", "1000B" ->
// "1KB", "1500B").
func FormatSize(n uint64) string {
	if n == 0 {
		return "0B"
	}
	units := [...]struct {
		div  uint64
		name string
	}{
		{1 << 40, "TiB"}, {1e12, "TB"}, {1 << 30, "GiB"}, {1e9, "GB"},
		{1 << 20, "MiB"}, {1e6, "MB"}, {1 << 10, "KiB"}, {1e3, "KB"},
	}
	for _, u := range units {
		if n%u.div == 0 {
			return strconv.FormatUint(n/u.div, 10) + u.name
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}

// FormatRate writes a rate in bits per second the way ParseRate reads it.
func FormatRate(bps uint64) string {
	units := [...]struct {
		div  uint64
		name string
	}{{1e12, "Tbps"}, {1e9, "Gbps"}, {1e6, "Mbps"}, {1e3, "Kbps"}}
	for _, u := range units {
		if bps >= u.div && bps%u.div == 0 {
			return strconv.FormatUint(bps/u.div, 10) + u.name
		}
	}
	return strconv.FormatUint(bps, 10) + "bps"
}

// decimal is a parsed non-negative number: mant / 10^frac.
type decimal struct {
	mant uint64
	frac int
}

// splitQuantity splits "1.5 MB" into its number and unit.
func splitQuantity(s string) (decimal, string, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	numText, unit := t[:i], strings.TrimSpace(t[i:])
	if numText == "" {
		if t == "" {
			return decimal{}, "", errors.New("empty")
		}
		return decimal{}, "", errors.New("does not start with a number")
	}
	intPart, fracPart, hasDot := strings.Cut(numText, ".")
	if strings.Contains(fracPart, ".") {
		return decimal{}, "", errors.New("more than one decimal point")
	}
	if intPart == "" && fracPart == "" || hasDot && fracPart == "" {
		return decimal{}, "", fmt.Errorf("malformed number %q", numText)
	}
	fracPart = strings.TrimRight(fracPart, "0")
	digits := strings.TrimLeft(intPart+fracPart, "0")
	var d decimal
	for i := 0; i < len(digits); i++ {
		hi, lo := bits.Mul64(d.mant, 10)
		lo, carry := bits.Add64(lo, uint64(digits[i]-'0'), 0)
		if hi != 0 || carry != 0 {
			return decimal{}, "", fmt.Errorf("number %q is too large", numText)
		}
		d.mant = lo
	}
	d.frac = len(fracPart)
	for i := 0; i < len(unit); i++ {
		c := unit[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return decimal{}, "", fmt.Errorf("unexpected %q after the number", unit)
		}
	}
	return d, unit, nil
}

// scale returns d × mult exactly, or an error when that is not a whole
// number or does not fit in 64 bits.
func scale(d decimal, mult uint64) (uint64, error) {
	if d.mant == 0 {
		return 0, nil
	}
	if d.frac > 19 {
		return 0, errors.New("too many fractional digits")
	}
	pow := uint64(1)
	for range d.frac {
		pow *= 10
	}
	hi, lo := bits.Mul64(d.mant, mult)
	if hi >= pow {
		return 0, errors.New("too large")
	}
	q, rem := bits.Div64(hi, lo, pow)
	if rem != 0 {
		return 0, errors.New("not a whole number of units")
	}
	return q, nil
}
