package config

import (
	"net"
	"path/filepath"
	"strconv"
)

// Console is the [console] section: where a running daemon accepts
// console clients (`roce-fwd console`).
type Console struct {
	// Socket is the UNIX socket path; "" turns the listener off.
	Socket string `toml:"socket"`
	// History is the interactive console's history file; "" keeps none.
	// A leading "~/" is the user's home directory.
	History string `toml:"history"`
}

// DefaultConsoleSocket is where the daemon listens unless told otherwise.
const DefaultConsoleSocket = "/run/roce-fwd/console.sock"

// DefaultConsoleHistory is the interactive console's history file.
const DefaultConsoleHistory = "~/.roce-fwd_history"

func (c *Console) setDefaults() {
	c.Socket = DefaultConsoleSocket
	c.History = DefaultConsoleHistory
}

// Telemetry is the [telemetry] section.
type Telemetry struct {
	// Listen is the Prometheus endpoint's host:port ("" = off); the
	// metrics are at /metrics.
	Listen string `toml:"listen"`
	// DPDK registers the /roce/* commands with DPDK telemetry, next to
	// DPDK's own (/ethdev/*), for dpdk-telemetry.py. EAL's telemetry
	// socket must be on: no --no-telemetry in [eal] args.
	DPDK bool `toml:"dpdk"`
}

func (t *Telemetry) setDefaults() { t.DPDK = true }

func validateConsole(c *checker, cfg *Config) {
	p := root.key("console")
	if s := cfg.Console.Socket; s != "" && !filepath.IsAbs(s) {
		c.errorf(p.key("socket"), "%q must be an absolute path (or \"\" for no console socket)", s)
	} else if len(s) > 107 {
		// sun_path is 108 bytes with its terminating NUL.
		c.errorf(p.key("socket"), "%q is %d bytes; a UNIX socket path has at most 107", s, len(s))
	}
}

func validateTelemetry(c *checker, cfg *Config) {
	p := root.key("telemetry")
	if l := cfg.Telemetry.Listen; l != "" {
		host, port, err := net.SplitHostPort(l)
		if err != nil {
			c.errorf(p.key("listen"), "%q is not host:port (e.g. \"127.0.0.1:9479\")", l)
			return
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			c.errorf(p.key("listen"), "port %q is not 0..65535", port)
		}
		if host != "" && net.ParseIP(host) == nil && host != "localhost" {
			c.errorf(p.key("listen"), "host %q is not an IP address or localhost", host)
		}
	}
	if cfg.Telemetry.DPDK {
		for _, a := range cfg.EAL.Args {
			if a == "--no-telemetry" {
				c.errorf(p.key("dpdk"), "is true but eal.args has --no-telemetry: set dpdk = false or drop the flag")
			}
		}
	}
}
