package console

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// The wire protocol between `roce-fwd console` and a daemon: one JSON
// object per line each way. A request runs a command line or asks for
// completions; the reply carries the output, or the error text.
type request struct {
	Line     string  `json:"line,omitempty"`
	JSON     bool    `json:"json,omitempty"`
	Complete *string `json:"complete,omitempty"`
}

type reply struct {
	Output      string   `json:"output,omitempty"`
	Error       string   `json:"error,omitempty"`
	Completions []string `json:"completions,omitempty"`
	Quit        bool     `json:"quit,omitempty"` // the client asked to leave
}

// Server accepts console clients on a UNIX socket.
type Server struct {
	path string
	ln   *net.UnixListener
	sh   *Shell
	log  *slog.Logger
	wg   sync.WaitGroup
	mu   sync.Mutex
	open map[net.Conn]struct{}
}

// Listen creates the socket at path, mode 0600 (its directory, 0700, if
// missing). A socket left by a daemon that died is replaced; one a live
// daemon answers on is not.
func Listen(path string, sh *Shell, log *slog.Logger) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("console socket %s: exists and is not a socket; remove it or set [console] socket", path)
		}
		if err := CheckSocket(path); err != nil {
			return nil, err
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("console socket %s: removing the stale socket: %w", path, err)
		}
		log.Info("removed a stale console socket", "path", path)
	}
	// The socket is created 0600 from the start: no window in which
	// another user could connect.
	old := syscall.Umask(0o177)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("console socket: %w", err)
	}
	s := &Server{path: path, ln: ln, sh: sh, log: log, open: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// CheckSocket reports a live daemon answering on the console socket at
// path, with its PID: a second daemon configured with it must not start
// (it could not be controlled). A missing or stale socket is no error.
func CheckSocket(path string) error {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil
	}
	defer c.Close()
	who := "another roce-fwd"
	if uc, ok := c.(*net.UnixConn); ok {
		if raw, err := uc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					who = fmt.Sprintf("another roce-fwd (pid %d)", cred.Pid)
				}
			})
		}
	}
	return fmt.Errorf("console socket %s: %s is listening on it; stop it, or set [console] socket to another path", path, who)
}

// Path is where the server listens.
func (s *Server) Path() string { return s.path }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("console socket accept", "err", err)
			}
			return
		}
		s.mu.Lock()
		s.open[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		s.mu.Unlock()
		c.Close()
	}()
	in := bufio.NewScanner(c)
	in.Buffer(make([]byte, 64<<10), maxRequest)
	enc := json.NewEncoder(c)
	for in.Scan() {
		var req request
		var rep reply
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			rep.Error = "bad request: " + err.Error()
		} else if req.Complete != nil {
			rep.Completions = s.sh.Complete(*req.Complete)
		} else {
			out, err := s.sh.Exec(req.Line, req.JSON)
			rep.Output = out
			if errors.Is(err, ErrQuit) {
				// The client leaves; the daemon keeps running.
				enc.Encode(reply{Output: out, Quit: true})
				return
			}
			if err != nil {
				rep.Error = err.Error()
			}
		}
		if err := enc.Encode(rep); err != nil {
			return
		}
	}
	if errors.Is(in.Err(), bufio.ErrTooLong) {
		// Say why before hanging up: the rest of the line cannot be
		// told from the next request.
		enc.Encode(reply{Error: fmt.Sprintf("request longer than %d bytes: connection closed", maxRequest)})
	}
}

// maxRequest is the longest request line the console takes.
const maxRequest = 1 << 20

// Close stops accepting, disconnects the clients and removes the socket.
func (s *Server) Close() error {
	err := s.ln.Close() // also unlinks the socket file
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	// The listener unlinks the socket it created; removing the path again
	// could remove a newer daemon's socket.
	return err
}

// Client is a connection to a daemon's console socket.
type Client struct {
	c   net.Conn
	in  *bufio.Scanner
	enc *json.Encoder
}

// Dial connects to the console socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		var hint string
		switch {
		case errors.Is(err, os.ErrNotExist):
			hint = ": no roce-fwd is running with this [console] socket"
		case errors.Is(err, syscall.ECONNREFUSED):
			hint = ": nothing listens on it (a stale socket of a daemon that died?)"
		case errors.Is(err, os.ErrPermission):
			hint = ": permission denied (the socket is 0600: run as the daemon's user)"
		}
		return nil, fmt.Errorf("console socket %s%s", path, hint)
	}
	in := bufio.NewScanner(c)
	in.Buffer(make([]byte, 64<<10), 64<<20)
	return &Client{c: c, in: in, enc: json.NewEncoder(c)}, nil
}

func (cl *Client) roundTrip(req request) (reply, error) {
	if err := cl.enc.Encode(req); err != nil {
		return reply{}, err
	}
	if !cl.in.Scan() {
		if err := cl.in.Err(); err != nil {
			return reply{}, err
		}
		return reply{}, io.EOF
	}
	var rep reply
	err := json.Unmarshal(cl.in.Bytes(), &rep)
	return rep, err
}

// Exec runs a command line on the daemon. A command's own failure comes
// back as an error with the daemon's text.
func (cl *Client) Exec(line string, jsonOut bool) (string, error) {
	rep, err := cl.roundTrip(request{Line: line, JSON: jsonOut})
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrDisconnected, err)
	}
	if rep.Quit {
		return rep.Output, ErrQuit
	}
	if rep.Error != "" {
		return rep.Output, errors.New(rep.Error)
	}
	return rep.Output, nil
}

// Complete asks the daemon for the completions of line.
func (cl *Client) Complete(line string) []string {
	rep, err := cl.roundTrip(request{Complete: &line})
	if err != nil {
		return nil
	}
	return rep.Completions
}

// Close closes the connection.
func (cl *Client) Close() error { return cl.c.Close() }
