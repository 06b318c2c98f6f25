package config

import (
	"strings"
	"testing"
)

// What run would refuse about the mbuf pool once its ports are up,
// validate refuses first where the sockets are known without EAL
// (virtual devices): exit 2 and the key's line, not a failed start.
func TestMbufDemandIsValidated(t *testing.T) {
	_, err := Parse("t.toml", src(append(append([]string{}, valid...),
		/* 10 */ `[eal]`,
		/* 11 */ `args = ["-l", "0-1"]`,
		/* 12 */ `[mempool]`,
		/* 13 */ `mbufs = 2000`,
	)...))
	// 2 ports × (1024 + 1024) descriptors, 1 worker × burst 32 × (2 + 2),
	// (1 + 1) lcore caches of 256.
	want := "t.toml:13: mempool.mbufs: 2000 is too few for the virtual devices' socket: its rx/tx rings, bursts and lcore caches can hold 4736 mbufs at once; set mbufs to at least 4736"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant %s", err, want)
	}
	if _, err := Parse("t.toml", src(append(append([]string{}, valid...), `[eal]`, `args = ["-l", "0-1"]`, `[mempool]`, `mbufs = 4736`)...)); err != nil {
		t.Errorf("just enough mbufs: %v", err)
	}
}
