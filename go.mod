module roce-fwd

go 1.25.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/gopacket/gopacket v1.7.7
	golang.org/x/sys v0.45.0
)

require golang.org/x/net v0.55.0 // indirect
