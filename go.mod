module roce-fwd

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/gopacket/gopacket v1.7.7 // indirect
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
