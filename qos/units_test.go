package qos

import (
	"strconv"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want uint64
	}{
		{"150KB", 150_000},
		{"1.5MB", 1_500_000},
		{"4MiB", 4 << 20},
		{"64KB", 64_000},
		{"1024B", 1024},
		{"1024", 1024},
		{"0", 0},
		{"1.5KiB", 1536},
		{"2K", 2000},
		{"2k", 2000},
		{"3M", 3_000_000},
		{"1G", 1_000_000_000},
		{"1GiB", 1 << 30},
		{"2TB", 2e12},
		{"1TiB", 1 << 40},
		{" 150 KB ", 150_000},
		{"0.25MiB", 256 << 10},
		{"1.500000000000000000000000MB", 1_500_000},
		{"16Ki", 16 << 10},
		{"18446744073709551615", 1<<64 - 1},
	}
	for _, c := range good {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []string{"", "KB", "-1KB", "1.5", "0.5B", "1.2.3MB", "150kb", "150Kb", "10 bytes", "1.KB", "1e6", "1XB", "1KiBB", "20000000TB", "18446744073709551616", "1MiB extra", "iB"}
	for _, in := range bad {
		got, err := ParseSize(in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseSize(%q) error %q does not name the input", in, err)
		}
	}
	if _, err := ParseSize("150kb"); err == nil || !strings.Contains(err.Error(), "bits") {
		t.Errorf("150kb: want a bits-vs-bytes error, got %v", err)
	}
}

func TestParseRate(t *testing.T) {
	good := []struct {
		in   string
		want uint64
	}{
		{"25Gbps", 25e9},
		{"100Mbps", 100e6},
		{"400Gbps", 400e9},
		{"1.5Gbps", 1.5e9},
		{"10bps", 10},
		{"1Tbps", 1e12},
		{"56Kbps", 56_000},
		{"56kbps", 56_000},
		{"25G", 25e9},
		{"25gbps", 25e9},
		{"1000", 1000},
		{"0", 0},
		{"2.5 Gbps", 2.5e9},
	}
	for _, c := range good {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	bad := []string{"", "Gbps", "25GBps", "25Bps", "25Gb", "25 Gibps", "1.5bps", "fast", "25Gbps!", "-1Gbps", "25Xbps"}
	for _, in := range bad {
		got, err := ParseRate(in)
		if err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseRate(%q) error %q does not name the input", in, err)
		}
	}
	if _, err := ParseRate("25GBps"); err == nil || !strings.Contains(err.Error(), "bytes per second") {
		t.Errorf("25GBps: want a bytes-per-second error, got %v", err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, n := range []uint64{0, 1, 1000, 1024, 1500, 150_000, 1_500_000, 4 << 20, 1 << 40, 3e12, 1<<64 - 1} {
		s := FormatSize(n)
		if got, err := ParseSize(s); err != nil || got != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, s, got, err)
		}
	}
	if s := FormatSize(4 << 20); s != "4MiB" {
		t.Errorf("FormatSize(4MiB) = %q", s)
	}
	for _, r := range []uint64{0, 10, 1500, 25e9, 1.5e9, 400e9, 1e12} {
		s := FormatRate(r)
		if got, err := ParseRate(s); err != nil || got != r {
			t.Errorf("ParseRate(FormatRate(%d) = %q) = %d, %v", r, s, got, err)
		}
	}
	if s := FormatRate(25e9); s != "25Gbps" {
		t.Errorf("FormatRate(25e9) = %q", s)
	}
}

// FuzzParseSize: never panics; an accepted size reads back the same from
// its canonical forms.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"150KB", "1.5MB", "4MiB", "64KB", "1024B", "1.5KiB", "", ".", "1..", "99999999999999999999B", "0.0000000000000000000001TB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if m, err := ParseSize(strconv.FormatUint(n, 10) + "B"); err != nil || m != n {
			t.Fatalf("%q = %d, but %dB reads back as %d, %v", s, n, n, m, err)
		}
		if m, err := ParseSize(FormatSize(n)); err != nil || m != n {
			t.Fatalf("%q = %d, but FormatSize %q reads back as %d, %v", s, n, FormatSize(n), m, err)
		}
	})
}

// FuzzParseRate: never panics; an accepted rate reads back the same.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"25Gbps", "100Mbps", "400Gbps", "1.5Gbps", "10bps", "25G", "", "Bps", "1.bps"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseRate(s)
		if err != nil {
			return
		}
		if m, err := ParseRate(FormatRate(n)); err != nil || m != n {
			t.Fatalf("%q = %d, but FormatRate %q reads back as %d, %v", s, n, FormatRate(n), m, err)
		}
	})
}
