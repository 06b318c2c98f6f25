package main

// The Debian package (scripts/mkdeb.sh, `make deb`) installed on this
// machine and purged again: root only, and never the service started.

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// debFiles are what the package must install.
var debFiles = []string{
	"/usr/bin/roce-fwd",
	"/etc/roce-fwd/roce-fwd.toml",
	"/lib/systemd/system/roce-fwd.service",
	"/usr/share/doc/roce-fwd/README.md",
	"/usr/share/doc/roce-fwd/docs/performance.md",
	"/usr/share/doc/roce-fwd/copyright",
	"/usr/share/roce-fwd/grafana/roce-fwd.json",
	"/usr/share/roce-fwd/prometheus/roce-fwd-rules.yml",
}

// dpkg runs dpkg (or dpkg-deb, dpkg-query), waiting out another
// process's hold of the dpkg lock for up to a minute.
func dpkg(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "lock") || time.Now().After(deadline) {
			return string(out), err
		}
		time.Sleep(time.Second)
	}
}

func TestDebPackage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installs the package with dpkg -i: run as root")
	}
	for _, tool := range []string{"dpkg-deb", "dpkg-shlibdeps", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: apt-get install dpkg-dev (scripts/deps.sh test installs it)", tool)
		}
	}
	// One test process at a time installs it (go test runs packages, and
	// developers run the suite, side by side): a lock on the temporary
	// directory itself, which leaves no lock file behind.
	lock, err := os.Open(os.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // after the purge below
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", "roce-fwd").Output(); err == nil && string(out) != "not-installed" {
		t.Skipf("a roce-fwd package is on this machine (%s): not replacing it", out)
	}
	for _, f := range append(debFiles, "/etc/roce-fwd") {
		if _, err := os.Lstat(f); err == nil {
			t.Skipf("%s exists outside any package: not overwriting it", f)
		}
	}

	out, err := exec.Command("sh", "../../scripts/mkdeb.sh", binary, t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("mkdeb.sh: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	deb := lines[len(lines)-1]
	field := func(name string) string {
		t.Helper()
		v, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(v))
	}
	version, arch := field("Version"), field("Architecture")
	if filepath.Base(deb) != "roce-fwd_"+version+"_"+arch+".deb" || !regexp.MustCompile(`^[0-9]`).MatchString(version) {
		t.Errorf("package %s: version %q, architecture %q", deb, version, arch)
	}
	// Every library the binary links comes from a package it depends on.
	depends := map[string]bool{}
	for _, d := range strings.Split(field("Depends"), ",") {
		depends[strings.Fields(d)[0]] = true
	}
	ef, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	libs, err := ef.ImportedLibraries()
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range libs {
		o, err := exec.Command("dpkg", "-S", "*/"+lib).Output()
		if err != nil {
			t.Errorf("%s: no package has it: %v", lib, err)
			continue
		}
		// Several packages may have a file of that name (libc6-i386).
		var pkgs []string
		for _, line := range strings.Split(strings.TrimSpace(string(o)), "\n") {
			pkg, _, _ := strings.Cut(line, ":")
			pkgs = append(pkgs, pkg)
		}
		if !slices.ContainsFunc(pkgs, func(p string) bool { return depends[p] }) {
			t.Errorf("the binary links %s (from %v), which Depends %v leaves out", lib, pkgs, depends)
		}
	}
	for _, p := range []string{"libc6", "libpcap0.8", "librte-eal23", "librte-mempool-ring23"} {
		if !depends[p] {
			t.Errorf("Depends lacks %s: %v", p, depends)
		}
	}
	if c, err := exec.Command("dpkg-deb", "-I", deb, "conffiles").Output(); err != nil || strings.TrimSpace(string(c)) != "/etc/roce-fwd/roce-fwd.toml" {
		t.Errorf("conffiles: %q %v", c, err)
	}

	// Whatever happens from here on, the package goes.
	t.Cleanup(func() {
		if out, err := dpkg(t, "dpkg", "--purge", "roce-fwd"); err != nil {
			t.Errorf("dpkg --purge roce-fwd: %v\n%s", err, out)
		}
	})
	if out, err := dpkg(t, "dpkg", "-i", deb); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	res := runPath(t, "/usr/bin/roce-fwd", "version")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "roce-fwd ") || !strings.Contains(res.stdout, "DPDK") {
		t.Errorf("roce-fwd version: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runPath(t, "/usr/bin/roce-fwd", "validate", "--config", "/etc/roce-fwd/roce-fwd.toml")
	if res.code != 0 || !strings.Contains(res.stdout, ": ok:") {
		t.Errorf("roce-fwd validate: %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	listed, err := dpkg(t, "dpkg", "-L", "roce-fwd")
	if err != nil {
		t.Fatalf("dpkg -L: %v\n%s", err, listed)
	}
	for _, f := range debFiles {
		if !slices.Contains(strings.Split(listed, "\n"), f) {
			t.Errorf("dpkg -L roce-fwd lacks %s:\n%s", f, listed)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("installed: %v", err)
		}
	}
	if c, _ := exec.Command("dpkg-query", "-W", "-f=${Conffiles}", "roce-fwd").Output(); !strings.Contains(string(c), "/etc/roce-fwd/roce-fwd.toml ") {
		t.Errorf("dpkg does not hold the config as a conffile: %q", c)
	}
	if en, _ := filepath.Glob("/etc/systemd/system/*.wants/roce-fwd.service"); len(en) > 0 {
		t.Errorf("installing enabled the unit: %v", en)
	}

	// Remove keeps the edited config; purge takes everything.
	if err := os.WriteFile("/etc/roce-fwd/roce-fwd.toml", append(mustRead(t, "/etc/roce-fwd/roce-fwd.toml"), "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := dpkg(t, "dpkg", "--remove", "roce-fwd"); err != nil {
		t.Fatalf("dpkg --remove: %v\n%s", err, out)
	}
	if _, err := os.Stat("/usr/bin/roce-fwd"); err == nil {
		t.Error("dpkg --remove left /usr/bin/roce-fwd")
	}
	if _, err := os.Stat("/etc/roce-fwd/roce-fwd.toml"); err != nil {
		t.Errorf("dpkg --remove took the conffile: %v", err)
	}
	if out, err := dpkg(t, "dpkg", "--purge", "roce-fwd"); err != nil {
		t.Fatalf("dpkg --purge: %v\n%s", err, out)
	}
	for _, f := range append(debFiles, "/etc/roce-fwd", "/usr/share/doc/roce-fwd", "/usr/share/roce-fwd") {
		if _, err := os.Lstat(f); err == nil {
			t.Errorf("dpkg --purge left %s", f)
		}
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", "roce-fwd").Output(); err == nil && string(out) != "not-installed" {
		t.Errorf("after purge, dpkg says roce-fwd is %q", out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
