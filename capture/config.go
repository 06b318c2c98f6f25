package capture

import (
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
	_, err := ParseArgs(strings.Fields(cfg.Capture.Start), false, cfg.PortID)
	if err != nil {
		return config.Errors{{File: cfg.File, Line: cfg.Capture.Line, Key: "capture.start", Msg: err.Error()}}
	}
	return nil
}
