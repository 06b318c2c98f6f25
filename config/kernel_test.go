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

// A duplicate port name is one error, at the second port; the forward
// that names an unknown port lists each valid name once.
func TestDuplicatePortNameOnce(t *testing.T) {
	_, err := Parse("t.toml", src(
		/* 1 */ `[[port]]`,
		/* 2 */ `name = "a"`,
		/* 3 */ `vdev = "net_null0"`,
		/* 4 */ `[[port]]`,
		/* 5 */ `name = "a"`,
		/* 6 */ `vdev = "net_null1"`,
		/* 7 */ `[[forward]]`,
		/* 8 */ `from = "a"`,
		/* 9 */ `to = "b"`,
	))
	if err == nil {
		t.Fatal("accepted")
	}
	msg := err.Error()
	if !strings.Contains(msg, `t.toml:5: port[1].name: "a" is already the name of port[0] (line 1)`) ||
		!strings.Contains(msg, `t.toml:9: forward[0].to: unknown port "b"; valid ports: "a"`+"\n") && !strings.HasSuffix(msg, `valid ports: "a"`) {
		t.Errorf("errors:\n%s", msg)
	}
}
