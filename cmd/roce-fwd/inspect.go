package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"roce-fwd/inspect"
	"roce-fwd/report"
	"roce-fwd/roce"
)

func cmdInspect(args []string, _ *slog.Logger) int {
	fs := newFlagSet("inspect", "[--json] [--verify-icrc=true] [--top N] [--html FILE] FILE...")
	asJSON := fs.Bool("json", false, "one JSON object per frame (JSON Lines) instead of the summary")
	verify := fs.Bool("verify-icrc", true, "check every RoCEv2 frame's ICRC")
	top := fs.Int("top", 10, "QP flows to list in the summary and the HTML report's table")
	htmlPath := fs.String("html", "", "also write a self-contained HTML report to `FILE`: charts over time of per-QP throughput,\n"+
		"CE marks and CNPs, PSN gaps and NAKs, ECN codepoints and PFC quanta, the opcode and\n"+
		"traffic-class mix, and the top QP flows (reads each capture twice)")
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
	fail := func(err error) {
		out.Flush()
		fmt.Fprintln(os.Stderr, "roce-fwd inspect:", err)
	}
	page := report.Page{Title: "roce-fwd inspect report", Subtitle: "roce-fwd " + version}
	rc := 0
	for _, path := range fs.Args() {
		var s *inspect.Summary
		if *asJSON {
			if err := inspect.WriteJSON(out, path, opt); err != nil {
				fail(err)
				rc = 1
				continue
			}
		}
		if !*asJSON || *htmlPath != "" {
			var err error
			if s, err = inspect.Summarize(path, opt); err != nil {
				fail(err)
				rc = 1
				continue
			}
		}
		if !*asJSON {
			s.WriteText(out, *top)
		}
		if *htmlPath != "" {
			tl, err := inspect.BuildTimeline(path, opt, s, inspect.ReportQPs, inspect.ReportBins)
			if err != nil {
				fail(err)
				rc = 1
				continue
			}
			page.Sections = append(page.Sections, inspect.ReportSection(s, tl, *top, len(page.Sections)))
		}
	}
	if *htmlPath != "" && len(page.Sections) > 0 {
		if len(page.Sections) == 1 {
			page.Title += ": " + filepath.Base(page.Sections[0].Title)
		}
		if err := writeReport(*htmlPath, &page); err != nil {
			fail(err)
			rc = 1
		}
	}
	return rc
}

// writeReport writes the page whole or not at all: a reader never finds
// half a report where an earlier one was.
func writeReport(path string, p *report.Page) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".roce-fwd-report-*")
	if err != nil {
		return fmt.Errorf("writing %s: %v", path, err)
	}
	w := bufio.NewWriter(tmp)
	err = p.WriteHTML(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %v", path, err)
	}
	return nil
}
