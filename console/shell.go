// Package console is roce-fwd's testpmd-style command line: the grammar
// (testpmd's nouns and word order where testpmd has the command,
// abbreviations, Tab completion, help), the commands over a running
// daemon, and the UNIX-socket server and client through which
// `roce-fwd console` attaches to a daemon, as vppctl does to VPP.
package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"roce-fwd/daemon"
	"roce-fwd/offload"
	"roce-fwd/qos"
)

// Command is one command of the grammar.
type Command struct {
	Syntax  string
	Help    string
	Section string
	// Run executes the command with its normalised words (abbreviations
	// expanded, ports as ids). jsonOut asks for JSON.
	Run func(s *Shell, words []string, jsonOut bool) (string, error)
	// CompleteRest, for a syntax ending in <rest>, completes within that
	// argument's own grammar; rest is its complete words so far.
	CompleteRest func(s *Shell, rest []string) []string
	seq          []node
}

// Sections, in the order help lists them.
var sections = []struct{ name, title string }{
	{"control", "Control: start and stop forwarding, reload the config, leave"},
	{"display", "Display: ports, forwarding, lcores, errors, memory, config"},
	{"roce", "RoCE: classification counters and per-QP telemetry"},
	{"qos", "QoS and PFC: per-TC queues, ECN, pause and the watchdog"},
	{"flow", "Flow rules: testpmd's flow grammar, hardware or software"},
	{"route", "Routing: FIB, neighbours, ECMP groups; routes and neighbours added live"},
	{"config", "Configuration: ports, forwarding mode, QoS parameters"},
	{"debug", "Debugging: packet trace, and capture to pcapng with each packet's verdict"},
	{"impair", "Impairment: drop, mark, corrupt, delay, reorder or rate-limit chosen RoCE packets"},
}

// Port is what the grammar knows of a port.
type Port struct {
	ID   int
	Name string
}

// Errors the shell returns, with testpmd's wording.
var (
	ErrNotFound = errors.New("Command not found")
	// ErrQuit is returned by quit/exit: the interactive loop ends.
	ErrQuit = errors.New("quit")
	// ErrDisconnected: the daemon's console connection is gone.
	ErrDisconnected = errors.New("console connection lost")
)

// Shell parses and runs command lines. It is safe for concurrent use:
// the daemon serialises what it changes.
type Shell struct {
	cmds  []*Command
	ports func() []Port
	d     *daemon.Daemon // what the commands act on; nil in grammar tests
	flows func() *offload.Manager
	// mu guards what commands keep between calls.
	mu         sync.Mutex
	lastLcores lcoreMark
	// life lets Close wait for the commands under way and refuse the
	// rest: after it the daemon goes away under them.
	life   sync.RWMutex
	closed bool
}

// ErrStopping answers a command that arrives while roce-fwd stops.
var ErrStopping = errors.New("roce-fwd is stopping")

// Close waits for the commands under way and makes Exec refuse the next
// ones: roce-fwd calls it before it stops forwarding and closes the
// daemon, so that no command (from the socket or the terminal) reaches a
// daemon being taken down.
func (s *Shell) Close() {
	s.life.Lock()
	s.closed = true
	s.life.Unlock()
}

func (s *Shell) add(cmds ...*Command) {
	for _, c := range cmds {
		seq, err := parseSyntax(c.Syntax)
		if err != nil {
			panic(err) // the built-in table is wrong
		}
		c.seq = seq
		s.cmds = append(s.cmds, c)
	}
}

// Commands lists the grammar.
func (s *Shell) Commands() []*Command { return s.cmds }

// check validates an argument.
func (s *Shell) check(kind, tok string) (string, error) {
	switch kind {
	case "port":
		ps := s.ports()
		var ids []string
		for _, p := range ps {
			if tok == p.Name || tok == strconv.Itoa(p.ID) {
				return strconv.Itoa(p.ID), nil
			}
			ids = append(ids, strconv.Itoa(p.ID))
		}
		if _, err := strconv.Atoi(tok); err == nil {
			return "", userError{fmt.Sprintf("Invalid port %s (valid ports: %s)", tok, strings.Join(ids, " "))}
		}
		return "", userError{fmt.Sprintf("Invalid port %q (valid ports: %s)", tok, portList(ps))}
	case "n":
		if n, err := strconv.Atoi(tok); err != nil || n < 1 {
			return "", fmt.Errorf("%q is not a count (1 or more)", tok)
		}
	case "tc":
		if n, err := strconv.Atoi(tok); err != nil || n < 0 || n > 7 {
			return "", fmt.Errorf("%q is not a traffic class (0..7)", tok)
		}
	case "dscp":
		if n, err := strconv.Atoi(tok); err != nil || n < 0 || n > 63 {
			return "", fmt.Errorf("%q is not a DSCP value (0..63)", tok)
		}
	case "p":
		if f, err := strconv.ParseFloat(tok, 64); err != nil || !(f >= 0 && f <= 1) {
			return "", fmt.Errorf("%q is not a probability (0..1)", tok)
		}
	case "size":
		if _, err := qos.ParseSize(tok); err != nil {
			return "", fmt.Errorf("%q is not a size (150KB, 1.5MB, 4MiB)", tok)
		}
	}
	return tok, nil
}

// portWords are what may name a port: names and ids.
func portWords(ps []Port) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name, strconv.Itoa(p.ID))
	}
	return out
}

func portList(ps []Port) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d (%s)", p.ID, p.Name))
	}
	return strings.Join(out, ", ")
}

// Exec runs one command line and returns its output. "--json" anywhere
// in the line asks for JSON; a trailing "?" prints the matching grammar.
func (s *Shell) Exec(line string, jsonOut bool) (string, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return "", ErrStopping
	}
	toks := strings.Fields(line)
	if i := slices.Index(toks, "--json"); i >= 0 {
		toks, jsonOut = slices.Delete(toks, i, i+1), true
	}
	if len(toks) == 0 {
		return "", nil
	}
	if last := toks[len(toks)-1]; strings.HasSuffix(last, "?") {
		toks[len(toks)-1] = strings.TrimSuffix(last, "?")
		if toks[len(toks)-1] == "" {
			toks = toks[:len(toks)-1]
		}
		return s.grammarFor(toks), nil
	}
	c, words, err := s.Resolve(toks)
	if err != nil {
		return "", err
	}
	return c.Run(s, words, jsonOut)
}

// Resolve finds the command toks name and its normalised words.
func (s *Shell) Resolve(toks []string) (*Command, []string, error) {
	// The first word picks the candidates, as testpmd's does.
	var firsts []string
	for _, c := range s.cmds {
		for _, w := range c.seq[0].words {
			if strings.HasPrefix(w, toks[0]) && !slices.Contains(firsts, w) {
				firsts = append(firsts, w)
			}
		}
	}
	if slices.Contains(firsts, toks[0]) {
		firsts = []string{toks[0]}
	}
	switch len(firsts) {
	case 0:
		return nil, nil, ErrNotFound
	case 1:
	default:
		slices.Sort(firsts)
		return nil, nil, fmt.Errorf("Ambiguous command %q: %s", toks[0], strings.Join(firsts, ", "))
	}
	var best failure
	var bestCmd *Command
	for _, c := range s.cmds {
		if !slices.Contains(c.seq[0].words, firsts[0]) {
			continue
		}
		m := matcher{toks: toks, check: s.check}
		m.match(c.seq)
		if m.ok {
			return c, m.words, nil
		}
		if bestCmd == nil || m.fail.at > best.at {
			best, bestCmd = m.fail, c
		}
	}
	if best.kind == failUser {
		return nil, nil, errors.New(best.msg)
	}
	// A wrong second word means no command has those words.
	if best.at == 1 && best.kind == failMismatch {
		return nil, nil, ErrNotFound
	}
	return nil, nil, fmt.Errorf("Bad arguments: %s (usage: %s)", best.msg, bestCmd.Syntax)
}

// Complete returns the words that may replace the last, partial word of
// line (everything after its last space): keywords, port names and ids.
func (s *Shell) Complete(line string) []string {
	toks := strings.Fields(line)
	partial := ""
	if !strings.HasSuffix(line, " ") && len(toks) > 0 {
		partial, toks = toks[len(toks)-1], toks[:len(toks)-1]
	}
	var out []string
	for _, c := range s.cmds {
		m := matcher{toks: toks, check: s.check, complete: true}
		m.match(c.seq)
		if c.CompleteRest != nil {
			for _, at := range m.restAt {
				out = append(out, c.CompleteRest(s, toks[at:])...)
			}
		}
		for _, n := range m.next {
			if n == "<port>" {
				out = append(out, portWords(s.ports())...)
				continue
			}
			if strings.HasPrefix(n, "<") {
				continue // a value: nothing to offer
			}
			out = append(out, n)
		}
	}
	var keep []string
	for _, w := range out {
		if strings.HasPrefix(w, partial) && !slices.Contains(keep, w) {
			keep = append(keep, w)
		}
	}
	slices.Sort(keep)
	return keep
}

// grammarFor lists the commands whose syntax can follow toks.
func (s *Shell) grammarFor(toks []string) string {
	var b strings.Builder
	for _, c := range s.cmds {
		m := matcher{toks: toks, check: s.check, complete: true}
		m.match(c.seq)
		if len(m.next) > 0 || m.ok || len(toks) == 0 {
			fmt.Fprintf(&b, "%-60s %s\n", c.Syntax, c.Help)
		}
	}
	if b.Len() == 0 {
		return "no command starts with \"" + strings.Join(toks, " ") + "\"\n"
	}
	return b.String()
}

// help is the "help [section|command]" text.
func (s *Shell) help(words []string) string {
	var b strings.Builder
	if len(words) == 1 {
		b.WriteString("Help is available for the following sections:\n\n")
		for _, sec := range sections {
			fmt.Fprintf(&b, "    help %-10s: %s\n", sec.name, sec.title)
		}
		b.WriteString("    help all       : every command\n\n" +
			"Words may be abbreviated (sh po st all); Tab completes; a trailing ? shows the grammar.\n")
		return b.String()
	}
	topic := words[1:]
	for _, sec := range sections {
		if topic[0] == sec.name || topic[0] == "all" {
			fmt.Fprintf(&b, "%s\n\n", sec.title)
			for _, c := range s.cmds {
				if c.Section == sec.name {
					fmt.Fprintf(&b, "%s\n    %s\n\n", c.Syntax, c.Help)
				}
			}
		}
	}
	if b.Len() == 0 {
		return s.grammarFor(topic)
	}
	return b.String()
}

// asJSON renders v for --json.
func asJSON(v any) (string, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	return string(b) + "\n", nil
}
