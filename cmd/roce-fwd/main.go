// Command roce-fwd is a DPDK forwarding appliance for RoCEv2 fabrics.
//
//	roce-fwd run [--config FILE] [-i] [--duration 10s] [--stats-json FILE] [--stats-period 1s]
//	roce-fwd console [--socket PATH] [--json] [COMMAND...]
//	roce-fwd validate --config FILE
//	roce-fwd flows --config FILE [--print testpmd|console] [--port NAME]
//	roce-fwd inspect [--json] [--html FILE] FILE...
//	roce-fwd hugepages [--config FILE] [--page-size 2M|1G] [--reserve]
//	roce-fwd ports
//	roce-fwd gen-pcap [--qps N] [--mix demo|control|mtu1024|mtu4096] [--ipv6] [--frames N] [--seed S] [--flows FILE] FILE
//	roce-fwd version
//
// Global flags (before or after the subcommand): --log-format text|json,
// --log-level debug|info|warn|error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitUsage is the exit status for bad flags and invalid configs; runtime
// failures exit with 1.
const exitUsage = 2

type command struct {
	name, args, help string
	run              func(args []string, log *slog.Logger) int
}

var commands = []command{
	{"run", "[--config FILE] [-i] [--duration D] [--stats-json FILE] [--stats-period D]", "run the dataplane (the built-in default config when no --config); -i opens the console here", cmdRun},
	{"console", "[--socket PATH] [--json] [COMMAND...]", "attach to a running daemon's console, or run one command and exit with its status", cmdConsole},
	{"validate", "--config FILE", "check a config file; errors as FILE:LINE: key: problem", cmdValidate},
	{"flows", flowsArgs, "print the config's [offload] flow rules as dpdk-testpmd or console commands", cmdFlows},
	{"inspect", "[--json] [--verify-icrc=true] [--top N] [--html FILE] FILE...", "decode pcap/pcapng files offline: RoCEv2 summary, or one JSON object per frame; --html adds a report with charts", cmdInspect},
	{"hugepages", "[--config FILE] [--page-size SIZE] [--reserve]", "show (or reserve) the hugepage memory the config needs", cmdHugepages},
	{"ports", "", "list the network PCI devices and whether DPDK can drive them", cmdPorts},
	{"gen-pcap", genPcapArgs, "write the built-in RoCEv2 demo capture (the default config's traffic), or with --qps a many-QP benchmark workload", cmdGenPcap},
	{"version", "", "print the roce-fwd and DPDK versions", cmdVersion},
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: roce-fwd COMMAND [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n  %-10s   %s\n", c.name, c.args, "", c.help)
	}
	fmt.Fprintf(w, "\nglobal flags: --log-format text|json  --log-level debug|info|warn|error\n")
}

func main() {
	os.Exit(mainArgs(os.Args[1:]))
}

func mainArgs(args []string) int {
	args, logFormat, logLevel, err := globalFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd:", err)
		return exitUsage
	}
	log, err := newLogger(os.Stderr, logFormat, logLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd:", err)
		return exitUsage
	}
	slog.SetDefault(log)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(os.Stdout)
		if len(args) == 0 {
			return exitUsage
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], log)
		}
	}
	fmt.Fprintf(os.Stderr, "roce-fwd: unknown command %q\n\n", args[0])
	usage(os.Stderr)
	return exitUsage
}

// globalFlags takes --log-format and --log-level out of args wherever
// they stand.
func globalFlags(args []string) (rest []string, format, level string, err error) {
	format, level = "text", "info"
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || (name != "log-format" && name != "log-level") {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, "", "", fmt.Errorf("flag %s needs a value", a)
			}
			i++
			val = args[i]
		}
		if name == "log-format" {
			format = val
		} else {
			level = val
		}
	}
	return rest, format, level, nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// newFlagSet makes a subcommand's flag set that reports errors itself.
func newFlagSet(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: roce-fwd %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a subcommand's flags; the int is the exit status to
// return when it should stop (help or error), -1 otherwise.
func parseFlags(fs *flag.FlagSet, args []string) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "roce-fwd %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		fs.Usage()
		return exitUsage
	}
	return -1
}

// buildTarget is the compiler and the settings the data path's speed
// depends on: the Go release, with any experiment ("go1.27.3 X:simd"),
// and the amd64 level.
func buildTarget() string {
	t := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "GOAMD64" {
				t += " GOAMD64=" + s.Value
			}
		}
	}
	return t
}

func buildVersion() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += " (" + s.Value[:12] + ")"
			}
		}
	}
	return v
}
