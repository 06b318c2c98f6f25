package main

// deploy/systemd/roce-fwd.service: what the unit asks of the daemon is
// what the daemon does, its commands run with the packaged config, and
// systemd-analyze (Debian's systemd package) accepts it.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"roce-fwd/config"
)

const (
	unitPath      = "../../deploy/systemd/roce-fwd.service"
	boxConfigPath = "../../deploy/roce-fwd.toml"
)

// readUnit returns the unit's "Section.Key" settings, each with every
// value given, in order.
func readUnit(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: not a setting: %q", path, line)
			}
			out[section+"."+k] = append(out[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSystemdUnit(t *testing.T) {
	u := readUnit(t, unitPath)
	want := map[string]string{
		// The daemon sends READY=1 and the rest (sdnotify_test.go);
		// notify-reload needs systemd 253, Debian 12 has 252.
		"Service.Type":                 "notify",
		"Service.ExecStart":            "/usr/bin/roce-fwd run --config /etc/roce-fwd/roce-fwd.toml",
		"Service.ExecStartPre":         "+/usr/bin/roce-fwd hugepages --config /etc/roce-fwd/roce-fwd.toml --reserve",
		"Service.ExecReload":           "/bin/kill -HUP $MAINPID",
		"Service.Restart":              "on-failure",
		"Service.LimitMEMLOCK":         "infinity",
		"Service.RuntimeDirectory":     "roce-fwd",
		"Service.NoNewPrivileges":      "true",
		"Service.ProtectSystem":        "full",
		"Service.ProtectHome":          "true",
		"Service.PrivateTmp":           "true",
		"Install.WantedBy":             "multi-user.target",
		"Service.WatchdogSec":          "30s",
		"Service.RuntimeDirectoryMode": "0700",
	}
	for k, v := range want {
		if got := u[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	// What breaks DPDK: hidden /dev/hugepages and /dev/vfio, W^X under
	// cgo and the PMDs, a quota on lcores that poll at 100%, an affinity
	// EAL's -l does not fit in.
	for _, k := range []string{"Service.PrivateDevices", "Service.MemoryDenyWriteExecute", "Service.CPUQuota",
		"Service.CPUAffinity", "Service.PrivateNetwork", "Service.ProtectKernelTunables", "Service.User"} {
		if v, ok := u[k]; ok {
			t.Errorf("%s = %q: DPDK does not run under it", k, v)
		}
	}
	caps := strings.Fields(strings.Join(u["Service.CapabilityBoundingSet"], " "))
	for _, c := range []string{"CAP_SYS_ADMIN", "CAP_IPC_LOCK", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_RAWIO"} {
		if !strings.Contains(" "+strings.Join(caps, " ")+" ", " "+c+" ") {
			t.Errorf("CapabilityBoundingSet %v lacks %s", caps, c)
		}
	}

	// The commands, with the config the package installs.
	if res := run(t, "validate", "--config", boxConfigPath); res.code != 0 {
		t.Errorf("validate %s: %d\n%s%s", boxConfigPath, res.code, res.stdout, res.stderr)
	}
	if res := run(t, "hugepages", "--config", boxConfigPath); res.code != 0 || !strings.Contains(res.stdout, "EAL args:") {
		t.Errorf("hugepages --config %s: %d\n%s%s", boxConfigPath, res.code, res.stdout, res.stderr)
	}
	if res := run(t, "hugepages", "--help"); !strings.Contains(res.stdout+res.stderr, "-reserve") {
		t.Errorf("hugepages has no --reserve:\n%s%s", res.stdout, res.stderr)
	}
	cfg, err := config.Load(boxConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if dir := "/run/" + u["Service.RuntimeDirectory"][0]; filepath.Dir(cfg.Console.Socket) != dir {
		t.Errorf("%s: console socket %s is not in the unit's RuntimeDirectory %s", boxConfigPath, cfg.Console.Socket, dir)
	}
}

// systemd-analyze verify, with the unit's binary the one under test: it
// checks every key and that the commands exist. Unknown keys and bad
// values are warnings on stderr with exit status 0, so any line about
// the unit fails the test.
func TestSystemdUnitVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skipf("systemd-analyze not installed: apt-get install systemd (scripts/deps.sh test installs it): %v", err)
	}
	text, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(t.TempDir(), "roce-fwd.service")
	if err := os.WriteFile(unit, []byte(strings.ReplaceAll(string(text), "/usr/bin/roce-fwd", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", "--man=no", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "roce-fwd") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
}
