package config

import (
	"strings"

	"roce-fwd/impair"
)

// validateImpair checks [impair]: each rule in the console's "impair add"
// grammar, at its own line; rules need the roce mode's classifier.
func validateImpair(c *checker, cfg *Config) {
	im := cfg.Impair
	if im == nil {
		return
	}
	p := root.key("impair")
	c.intRange(p.key("hold"), im.Hold, 0, 1<<20)
	if len(im.Rules) > impair.MaxRules {
		c.errorf(p.key("rules"), "%d rules: at most %d", len(im.Rules), impair.MaxRules)
	}
	if len(im.Rules) > 0 && cfg.Pipeline.Mode != "roce" {
		c.errorf(p.key("rules"), "impairment rules need [pipeline] mode = \"roce\" (they match on the RoCE classifier's fields), not %q", cfg.Pipeline.Mode)
	}
	for i, line := range im.Rules {
		if _, err := impair.Parse(strings.Fields(line), cfg.PortID); err != nil {
			c.errorf(p.key("rules").index(i), "%v", err)
		}
	}
}
