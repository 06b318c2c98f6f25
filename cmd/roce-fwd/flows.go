package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"

	"roce-fwd/config"
	"roce-fwd/flowrule"
	"roce-fwd/offload"
)

const flowsArgs = "--config FILE [--print testpmd|console] [--port NAME]"

// cmdFlows prints the [offload] rules of a config, for dpdk-testpmd (to try
// them on a NIC without roce-fwd) or for roce-fwd's own console.
func cmdFlows(args []string, _ *slog.Logger) int {
	fs := newFlagSet("flows", flowsArgs)
	cfgPath := fs.String("config", "", "TOML config file")
	format := fs.String("print", "testpmd", `"testpmd": dpdk-testpmd commands (meters as profile, policy and meter objects); "console": roce-fwd console commands`)
	port := fs.String("port", "", "print this port's rules only")
	if rc := parseFlags(fs, args); rc >= 0 {
		return rc
	}
	if *cfgPath == "" {
		fmt.Fprintln(os.Stderr, "roce-fwd flows: --config FILE is required")
		return exitUsage
	}
	if *format != "testpmd" && *format != "console" {
		fmt.Fprintf(os.Stderr, "roce-fwd flows: --print %q: want testpmd or console\n", *format)
		return exitUsage
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return exitUsage
	}
	if _, ok := cfg.PortByName(*port); *port != "" && !ok {
		fmt.Fprintf(os.Stderr, "roce-fwd flows: --port %q: %s has no such [[port]]\n", *port, cfg.File)
		return exitUsage
	}
	prs, err := offload.ConfigRules(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd flows:", err)
		return 1
	}
	w := bufio.NewWriter(os.Stdout)
	n := writeFlows(w, cfg, prs, *format == "console", *port)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "roce-fwd flows:", err)
		return 1
	}
	if n == 0 {
		what := ""
		if *port != "" {
			what = " for port " + *port
		}
		fmt.Fprintf(os.Stderr, "roce-fwd flows: %s has no [[offload.rule]]%s\n", cfg.File, what)
	}
	return 0
}

// writeFlows prints the rules of every port (or of port only) and returns
// how many it printed. testpmd knows ports by id only, which is the
// config's order when the ports are probed in that order.
func writeFlows(w io.Writer, cfg *config.Config, prs []offload.PortRules, console bool, port string) int {
	n := 0
	for _, pr := range prs {
		if port != "" && pr.Port != port {
			continue
		}
		if console {
			for _, r := range pr.Rules {
				fmt.Fprintln(w, flowrule.Command{Kind: flowrule.CmdCreate, Port: pr.Port, Rule: r})
			}
			n += len(pr.Rules)
			continue
		}
		id, _ := cfg.PortByName(pr.Port)
		fmt.Fprintf(w, "# port %s (port id %d in config order; check with \"show port summary all\")\n", pr.Port, id)
		for _, r := range pr.Rules {
			for _, l := range r.Testpmd(fmt.Sprint(id)) {
				fmt.Fprintln(w, l)
			}
		}
		n += len(pr.Rules)
	}
	return n
}
