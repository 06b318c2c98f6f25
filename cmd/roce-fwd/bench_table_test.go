package main

// make bench's table (scripts/bench.py table) on results written here:
// the ratios and the line that shows how far the host drifted.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBenchTableShowsPeerDrift(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed (make test installs it)")
	}
	dir := t.TempDir()
	// ROUND GROUP KEY MPPS CYCLES SHARE: testpmd ran 90, 60 and 80 Mpps
	// in three rounds (its fastest 50% above its slowest), l3fwd 50 and
	// 55 (10%); roce-fwd's rows are not peers and do not count.
	results := `1 demo tp:io 90 0 1
1 demo rf:io 85.5 30 1
2 demo tp:io 60 0 1
2 demo rf:io 30 45 1
3 demo tp:io 80 0 1
3 demo rf:io 76 33 1
1 route l3:lpm@1k 50 0 1
2 route l3:lpm@1k 55 0 1
1 route rf:io:route=1k 40 57 1
2 route rf:io:route=1k 44 57 1
`
	rows := "demo | demo capture | io | rf:io | testpmd io | tp:io | >= 0.95 | 79\n" +
		"route | route 1k | io routed | rf:io:route=1k | l3fwd LPM | l3:lpm@1k | >= 1.00 | 79\n"
	for name, text := range map[string]string{"results": results, "rows": rows} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("python3", "../../scripts/bench.py", "table",
		filepath.Join(dir, "results"), filepath.Join(dir, "rows"), "2600000000").CombinedOutput()
	if err != nil {
		t.Fatalf("bench.py table: %v\n%s", err, out)
	}
	text := string(out)
	// The rounds' ratios: 0.95, 0.5, 0.95 and 0.8, 0.8.
	for _, want := range []string{
		"0.950 [0.500-0.950]",
		"0.800 [0.800-0.800]",
		"peers' rates across rounds (the host's drift: their code does not change): the fastest round up to 50% above the slowest (demo tp:io), the median 30% over 2 peer runs",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}
