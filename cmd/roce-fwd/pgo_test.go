package main

import (
	"os/exec"
	"strings"
	"testing"
)

// default.pgo still guides the build: with it, the compiler inlines the
// classifier and the QP table's Add into the worker's classify pass, and
// the count of a staged packet (CountStaged) into the QP pass. A
// profile taken before the pass last changed no longer matches its call
// sites, and the forwarding path silently loses those inlines (about 10%
// in roce mode on few QPs); `make pgo` takes the profile again.
func TestPGOProfileMatchesTheDataPath(t *testing.T) {
	if testing.Short() {
		t.Skip("builds roce-fwd again with the compiler's inlining report")
	}
	out, err := exec.Command("go", "build", "-o", "/dev/null", "-pgo=default.pgo", "-gcflags=roce-fwd/pipeline=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, call := range []string{"inlining call to roce.Classify", "inlining call to qpstats.(*Table).Add", "inlining call to qpstats.(*Table).CountStaged"} {
		found := false
		for _, l := range strings.Split(string(out), "\n") {
			// The path is relative to where the package was compiled
			// from: "../../pipeline/..." here, as replayed from the build
			// cache when a build from the module's root made it.
			if strings.Contains(l, "pipeline/rocestage.go:") && strings.HasSuffix(l, call) {
				found = true
			}
		}
		if !found {
			t.Errorf("the build with default.pgo no longer has %q in pipeline/rocestage.go: run make pgo", call)
		}
	}
}
