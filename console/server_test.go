package console

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A client whose daemon went away says so with ErrDisconnected, which
// ends an interactive session; the server's socket file is gone.
func TestClientSeesDaemonGone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	srv, err := Listen(path, newGrammar(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cl, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Exec("help", false); err != nil {
		t.Fatalf("help: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("socket still there after close: %v", err)
	}
	if _, err := cl.Exec("help", false); !errors.Is(err, ErrDisconnected) {
		t.Errorf("exec after the server closed: %v, want ErrDisconnected", err)
	}
}

// A request line over the limit gets an error reply saying so before the
// server hangs up, rather than a bare close.
func TestOverlongRequestIsAnswered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	srv, err := Listen(path, newGrammar(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	_, err = cl.Exec("show "+strings.Repeat("x", maxRequest), false)
	if err == nil || !strings.Contains(err.Error(), "request longer than 1048576 bytes") {
		t.Errorf("overlong request: %v", err)
	}
}
