package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"

	"roce-fwd/inspect"
	"roce-fwd/roce"
)

func cmdInspect(args []string, _ *slog.Logger) int {
	fs := newFlagSet("inspect", "[--json] [--verify-icrc=true] [--top N] FILE...")
	asJSON := fs.Bool("json", false, "one JSON object per frame (JSON Lines) instead of the summary")
	verify := fs.Bool("verify-icrc", true, "check every RoCEv2 frame's ICRC")
	top := fs.Int("top", 10, "QP flows to list in the summary")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "roce-fwd inspect: give at least one pcap or pcapng file")
		fs.Usage()
		return exitUsage
	}
	opt := inspect.Options{VerifyICRC: *verify, TCMap: roce.DefaultTCMap()}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	rc := 0
	for _, path := range fs.Args() {
		if *asJSON {
			if err := inspect.WriteJSON(out, path, opt); err != nil {
				out.Flush()
				fmt.Fprintln(os.Stderr, "roce-fwd inspect:", err)
				rc = 1
			}
			continue
		}
		s, err := inspect.Summarize(path, opt)
		if err != nil {
			out.Flush()
			fmt.Fprintln(os.Stderr, "roce-fwd inspect:", err)
			rc = 1
			continue
		}
		s.WriteText(out, *top)
	}
	return rc
}
