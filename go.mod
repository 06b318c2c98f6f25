module roce-fwd

go 1.25.0

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/gopacket/gopacket v1.7.7 // indirect
)
