module roce-fwd

go 1.25.0

toolchain go1.27.3

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/chzyer/readline v1.5.1
	github.com/coreos/go-systemd/v22 v22.7.0
	github.com/creack/pty v1.1.24
	github.com/gopacket/gopacket v1.7.7
	github.com/prometheus/client_golang v1.24.0
	github.com/prometheus/client_model v0.6.2
	github.com/prometheus/common v0.70.0
	github.com/vishvananda/netlink v1.3.1
	golang.org/x/net v0.56.0
	golang.org/x/sys v0.47.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/procfs v0.21.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
