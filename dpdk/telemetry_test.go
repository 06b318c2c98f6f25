package dpdk

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// telClient is a connection to this process's telemetry socket.
type telClient struct {
	conn     *net.UnixConn
	greeting map[string]any
}

func dialTelemetry(t *testing.T) *telClient {
	t.Helper()
	path := TelemetrySocket()
	if fi, err := os.Stat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("telemetry socket %q: %v (mode %v)", path, err, fi)
	}
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &telClient{conn: conn}
	if err := json.Unmarshal(c.read(t), &c.greeting); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *telClient) read(t *testing.T) []byte {
	t.Helper()
	buf := make([]byte, 1<<16)
	if err := c.conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := c.conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// query sends a command and returns the value of the reply's only key,
// with numbers kept exact.
func (c *telClient) query(t *testing.T, cmd string) any {
	t.Helper()
	if _, err := c.conn.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	raw := c.read(t)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var reply map[string]any
	if err := dec.Decode(&reply); err != nil {
		t.Fatalf("%s: reply %q: %v", cmd, raw, err)
	}
	name, _, _ := strings.Cut(cmd, ",")
	v, ok := reply[name]
	if !ok || len(reply) != 1 {
		t.Fatalf("%s: reply %q", cmd, raw)
	}
	return v
}

func TestTelemetrySocket(t *testing.T) {
	c := dialTelemetry(t)
	if got := c.greeting["pid"]; got != float64(os.Getpid()) {
		t.Errorf("greeting pid %v, want %d", got, os.Getpid())
	}
	if got := c.greeting["version"]; got != Version() {
		t.Errorf("greeting version %v, want %q", got, Version())
	}
	if !strings.Contains(TelemetrySocket(), fmt.Sprintf("rf-dpdk-test-%d", os.Getpid())) {
		t.Errorf("socket %s is not in the file prefix's runtime directory", TelemetrySocket())
	}
}

func TestRegisterTelemetry(t *testing.T) {
	var gotParams atomic.Value // set on DPDK's telemetry thread
	err := RegisterTelemetry("/rftest/values", "test values", func(params string) (any, error) {
		gotParams.Store(params)
		return map[string]any{
			"u64":       uint64(1<<63 + 5),
			"int":       -42,
			"big_neg":   int64(-1 << 40),
			"big_pos":   int64(1 << 40),
			"half":      0.5,
			"whole":     3.0,
			"yes":       true,
			"str":       "hello \"world\"\tcafé",
			"bad-key!":  uint16(7),
			"bad_key_":  uint16(8), // sanitizes alike: kept apart
			"nil":       nil,
			"err":       errors.New("boom"),
			"nested":    map[string]uint64{"a": 1, "b": 2},
			"deep":      map[string]any{"l2": map[string]any{"l3": []int{-1, 2}}},
			"counts":    []uint64{10, 20, 30},
			"names":     []string{"p0", "p1"},
			"mixed":     []any{1, "two"},
			"per_index": []map[string]int{{"x": 1}, {"x": 2}},
			"params":    params,
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialTelemetry(t)
	v := c.query(t, "/rftest/values,port=p0").(map[string]any)
	if p := gotParams.Load(); p != "port=p0" {
		t.Errorf("handler got params %q", p)
	}
	want := map[string]string{
		"u64": "9223372036854775813", "int": "-42", "big_neg": `"-1099511627776"`, "big_pos": "1099511627776",
		"half": `"0.5"`, "whole": "3", "yes": "1", "str": `"hello \"world\"\tcaf?"`, "bad_key_": "7", "bad_key__2": "8",
		"err": `"boom"`, "nested": `{"a":1,"b":2}`, "deep": `{"l2":{"l3":[-1,2]}}`,
		"counts": "[10,20,30]", "names": `["p0","p1"]`, "mixed": `["1","two"]`,
		"per_index": `{"0":{"x":1},"1":{"x":2}}`, "params": `"port=p0"`,
	}
	for k, w := range want {
		b, _ := json.Marshal(v[k])
		if string(b) != w {
			t.Errorf("%s = %s, want %s", k, b, w)
		}
	}
	if _, ok := v["nil"]; ok {
		t.Error("nil value was sent")
	}
	if len(v) != len(want) {
		t.Errorf("%d keys, want %d: %v", len(v), len(want), v)
	}

	// The command is listed, with its help.
	if cmds := fmt.Sprint(c.query(t, "/")); !strings.Contains(cmds, "/rftest/values") {
		t.Errorf("command list %s", cmds)
	}
	if h := c.query(t, "/help,/rftest/values").(map[string]any); h["/rftest/values"] != "test values" {
		t.Errorf("help %v", h)
	}

	// Registering again replaces the handler.
	if err := RegisterTelemetry("/rftest/values", "test values", func(string) (any, error) { return "replaced", nil }); err != nil {
		t.Fatal(err)
	}
	if got := c.query(t, "/rftest/values"); got != "replaced" {
		t.Errorf("after replacing: %v", got)
	}
}

func TestTelemetryShapes(t *testing.T) {
	reply := map[string]func(string) (any, error){
		"/rftest/u64":    func(string) (any, error) { return uint64(12345678901234), nil },
		"/rftest/nil":    func(string) (any, error) { return nil, nil },
		"/rftest/matrix": func(string) (any, error) { return [][]uint64{{1, 2}, {3}}, nil },
		"/rftest/maps":   func(string) (any, error) { return []map[string]string{{"a": "b"}}, nil },
		"/rftest/array":  func(string) (any, error) { return [3]int{-1, 0, 1}, nil },
		"/rftest/error":  func(string) (any, error) { return nil, syscall.EBUSY },
		"/rftest/panic":  func(string) (any, error) { panic("handler bug") },
	}
	for cmd, fn := range reply {
		if err := RegisterTelemetry(cmd, "shape", fn); err != nil {
			t.Fatal(err)
		}
	}
	c := dialTelemetry(t)
	want := map[string]string{
		"/rftest/u64":    `"12345678901234"`,
		"/rftest/nil":    `{}`,
		"/rftest/matrix": `[[1,2],[3]]`,
		"/rftest/maps":   `{"0":{"a":"b"}}`,
		"/rftest/array":  `[-1,0,1]`,
		"/rftest/error":  `null`,
		"/rftest/panic":  `null`,
	}
	for cmd, w := range want {
		b, _ := json.Marshal(c.query(t, cmd))
		if string(b) != w {
			t.Errorf("%s: %s, want %s", cmd, b, w)
		}
	}
}

func TestTelemetryLimits(t *testing.T) {
	big := map[string]uint64{}
	for i := range 300 {
		big[fmt.Sprintf("k%03d", i)] = uint64(i)
	}
	long := make([]uint64, 600)
	err := RegisterTelemetry("/rftest/limits", "limits", func(string) (any, error) {
		return map[string]any{
			"big":                    big,
			"long":                   long,
			"str":                    strings.Repeat("é", 100), // not ASCII
			"long_str":               strings.Repeat("x", 200),
			strings.Repeat("k", 200): 1,
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	v := dialTelemetry(t).query(t, "/rftest/limits").(map[string]any)
	b := v["big"].(map[string]any)
	if len(b) != 256 || b["k254"] != json.Number("254") || b[TruncatedKey] != json.Number("45") {
		t.Errorf("300-entry map: %d entries, k254 %v, %s %v", len(b), b["k254"], TruncatedKey, b[TruncatedKey])
	}
	if n := len(v["long"].([]any)); n != 512 {
		t.Errorf("600-entry array: %d entries, want 512", n)
	}
	if s := v["str"].(string); s != strings.Repeat("?", 100) {
		t.Errorf("long string cut to %d bytes: %q", len(s), s)
	}
	if s := v["long_str"].(string); s != strings.Repeat("x", 127) {
		t.Errorf("200-byte string cut to %d bytes", len(s))
	}
	if v[strings.Repeat("k", 127)] != json.Number("1") {
		t.Errorf("long key not cut to 127 bytes: %v", v)
	}
}

func TestRegisterTelemetryInvalid(t *testing.T) {
	ok := func(string) (any, error) { return nil, nil }
	for _, cmd := range []string{"", "/", "noslash", "/bad-name", "/sp ace", "/" + strings.Repeat("x", 55)} {
		if err := RegisterTelemetry(cmd, "", ok); err == nil {
			t.Errorf("command %q accepted", cmd)
		}
	}
	if err := RegisterTelemetry("/rftest/nilfn", "", nil); err == nil {
		t.Error("nil handler accepted")
	}
	if err := RegisterTelemetry("/"+strings.Repeat("x", 54), strings.Repeat("h", 200), ok); err != nil {
		t.Errorf("55-byte command with long help: %v", err)
	}
}

// With another process on dpdk_telemetry.v2, EAL binds dpdk_telemetry.v2:N:
// the socket reported is the one this process listens on, not the other's.
func TestOwnUnixSocket(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed: no second process to hold the base socket")
	}
	base := filepath.Join(t.TempDir(), "dpdk_telemetry.v2")
	other := exec.Command(py, "-c", `import socket,sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
print("up", flush=True); sys.stdin.read()`, base)
	stdin, err := other.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); other.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("second process: %v", err)
	}
	if got := ownUnixSocket(base); got != "" {
		t.Errorf("only another process listens: got %q, want none", got)
	}
	l, err := net.Listen("unix", base+":1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if got := ownUnixSocket(base); got != base+":1" {
		t.Errorf("got %q, want %q", got, base+":1")
	}
}
