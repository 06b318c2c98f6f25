package capture

import (
	"strconv"
	"strings"

	"roce-fwd/config"
)

// CheckConfig checks [capture] start as "capture start" would read it,
// before EAL starts, and reports a problem at its line.
func CheckConfig(cfg *config.Config) error {
	if cfg.Capture == nil {
		return nil
	}
	if strings.TrimSpace(cfg.Capture.Start) == "" {
		return config.Errors{{File: cfg.File, Line: cfg.Capture.Line, Key: "capture.start", Msg: "empty; say what to capture: " + CaptureSyntax[len("capture start "):]}}
	}
	_, err := ParseArgs(strings.Fields(cfg.Capture.Start), false, func(s string) (uint16, error) {
		if i, ok := cfg.PortByName(s); ok {
			return uint16(i), nil
		}
		if n, err := strconv.Atoi(s); err == nil && n >= 0 && n < len(cfg.Ports) {
			return uint16(n), nil
		}
		var names []string
		for _, p := range cfg.Ports {
			names = append(names, strconv.Quote(p.Name))
		}
		return 0, &portError{s, strings.Join(names, ", ")}
	})
	if err != nil {
		return config.Errors{{File: cfg.File, Line: cfg.Capture.Line, Key: "capture.start", Msg: err.Error()}}
	}
	return nil
}

type portError struct{ port, valid string }

func (e *portError) Error() string {
	return "port " + strconv.Quote(e.port) + ": not a port (" + e.valid + ")"
}
