package console

import (
	"fmt"
	"strings"

	"roce-fwd/capture"
)

// Packet capture and trace, in VPP's words (testpmd has none):
//
//	capture start port <port> [rx|tx|drop|all] [reason ...] [qp ...] [class ...] file <F> [count <n>] [snaplen <s>] [filter <expr>]
//	capture stop                         show capture
//	trace start [port <port>] [...] [count <n>] [filter <expr>]
//	trace stop | trace clear             show trace
func captureCommands() []*Command {
	return []*Command{
		{Syntax: "capture start <rest>", Section: "debug", Help: capture.CaptureSyntax + ": pcapng with a verdict comment per packet (drop reason, RoCE opcode/QP/PSN, TC, ECN)",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.StartCapture(w[2:]); err != nil {
					return "", err
				}
				return ok(j, "capture started")
			}},
		{Syntax: "capture stop", Section: "debug", Help: "end the capture, close its file and say what it holds",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				st, err := s.d.StopCapture()
				if err != nil {
					return "", err
				}
				return captureText(st, j)
			}},
		{Syntax: "show capture", Section: "debug", Help: "the capture: file, filter, packets written and lost",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				st, any := s.d.CaptureStatus()
				if !any {
					if j {
						return "null\n", nil
					}
					return "no capture\n", nil
				}
				return captureText(st, j)
			}},
		{Syntax: "trace start [<rest>]", Section: "debug", Help: capture.TraceSyntax + ": keep the next packets (50) with their verdicts",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.StartTrace(w[2:]); err != nil {
					return "", err
				}
				return ok(j, "trace started")
			}},
		{Syntax: "trace stop|clear", Section: "debug", Help: "stop tracing (what was traced stays for show trace), or forget the trace",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if w[1] == "clear" {
					s.d.ClearTrace()
					return ok(j, "trace cleared")
				}
				if err := s.d.StopTrace(); err != nil {
					return "", err
				}
				return ok(j, "trace stopped")
			}},
		{Syntax: "show trace", Section: "debug", Help: "each traced packet: where it was seen, what it is, what became of it, its first bytes",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				t := s.d.Trace()
				if t == nil {
					if j {
						return "[]\n", nil
					}
					return "no trace: trace start [port <port>] [count <n>] ...\n", nil
				}
				if j {
					return asJSON(t.Records())
				}
				return t.Text(), nil
			}},
	}
}

func captureText(st capture.Status, j bool) (string, error) {
	if j {
		return asJSON(st)
	}
	state := "stopped"
	if st.Running {
		state = "running"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "capture (%s) to %s: %s\n  %d packets written, %d lost (the capture's ring was full)\n", state, st.File, st.Filter, st.Written, st.Lost)
	if st.Err != "" {
		fmt.Fprintf(&b, "  error: %s\n", st.Err)
	}
	return b.String(), nil
}
