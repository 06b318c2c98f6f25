package capture

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"roce-fwd/pipeline"
	"roce-fwd/qpstats"
)

// Request is what "capture start" and "trace start" ask for, before the
// BPF expression is compiled.
type Request struct {
	Filter  pipeline.TapFilter // without BPF
	BPF     string             // a tcpdump filter expression, "" for none
	File    string
	Count   uint64
	Snaplen int
}

// Syntax of the arguments, for help and errors.
const (
	CaptureSyntax = "capture start port <port> [rx|tx|drop|all] [reason <r>[,<r>...]] [qp <n>] [class <c>[,<c>...]] file <F.pcapng> [count <n>] [snaplen <s>] [filter <tcpdump expression>]"
	TraceSyntax   = "trace start [port <port>] [rx|tx|drop|all] [reason <r>[,...]] [qp <n>] [class <c>[,...]] [count <n>] [filter <tcpdump expression>]"
)

// ParseArgs reads the words after "capture start" or "trace start".
// port resolves a port name or number. A capture needs a port and a file;
// a trace takes neither file nor snaplen. filter takes the rest of the
// line.
func ParseArgs(words []string, trace bool, port func(string) (uint16, error)) (Request, error) {
	r := Request{Filter: pipeline.TapFilter{Port: -1, QP: -1}, Snaplen: 65535}
	if trace {
		r.Snaplen, r.Count = 256, 50
	}
	val := func(i int) (string, error) {
		if i+1 >= len(words) {
			return "", fmt.Errorf("%s needs a value", words[i])
		}
		return words[i+1], nil
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if d, ok := map[string]pipeline.TapDir{"rx": pipeline.TapRx, "tx": pipeline.TapTx, "drop": pipeline.TapDrop, "all": pipeline.TapAll}[w]; ok {
			r.Filter.Dirs |= d
			continue
		}
		if w == "filter" {
			r.BPF = strings.Join(words[i+1:], " ")
			if r.BPF == "" {
				return r, errors.New("filter needs a tcpdump expression, e.g. filter udp dst port 4791")
			}
			break
		}
		v, err := val(i)
		if err != nil {
			return r, err
		}
		i++
		switch w {
		case "port":
			p, err := port(v)
			if err != nil {
				return r, err
			}
			r.Filter.Port = int(p)
		case "reason":
			for _, name := range strings.Split(v, ",") {
				reason, ok := pipeline.ReasonNamed(name)
				if !ok {
					return r, fmt.Errorf("reason %q: not a drop reason (show errors lists them)", name)
				}
				r.Filter.Reasons |= 1 << reason
			}
		case "qp":
			n, err := strconv.ParseUint(v, 0, 24)
			if err != nil {
				return r, fmt.Errorf("qp %q: want a QP number, 0..0xffffff", v)
			}
			r.Filter.QP = int64(n)
		case "class":
			for _, name := range strings.Split(v, ",") {
				if name == "data" { // SEND and WRITE carry data
					r.Filter.Classes |= 1<<qpstats.ClassSend | 1<<qpstats.ClassWrite
					continue
				}
				c := classNamed(name)
				if c < 0 {
					return r, fmt.Errorf("class %q: want one of %s", name, strings.Join(qpstats.ClassNames[:], ", "))
				}
				r.Filter.Classes |= 1 << c
			}
		case "count":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 {
				return r, fmt.Errorf("count %q: want a number of packets above 0", v)
			}
			r.Count = n
		case "file":
			if trace {
				return r, errors.New("a trace is kept in memory: show trace prints it (capture start writes files)")
			}
			r.File = v
		case "snaplen":
			n, err := strconv.Atoi(v)
			if trace || err != nil || n < 1 || n > 65535 {
				return r, fmt.Errorf("snaplen %q: want 1..65535 bytes, for a capture", v)
			}
			r.Snaplen = n
		default:
			return r, fmt.Errorf("%q: not an argument of %s", w, map[bool]string{false: CaptureSyntax, true: TraceSyntax}[trace])
		}
	}
	if r.Filter.Dirs == 0 {
		r.Filter.Dirs = pipeline.TapAll
	}
	if r.Filter.Reasons != 0 && r.Filter.Dirs&pipeline.TapDrop == 0 {
		return r, errors.New("reason selects drops: add drop (or all)")
	}
	if !trace && (r.Filter.Port < 0 || r.File == "") {
		return r, fmt.Errorf("a capture needs a port and a file: %s", CaptureSyntax)
	}
	return r, nil
}

func classNamed(name string) int {
	for i, n := range qpstats.ClassNames {
		if n == name {
			return i
		}
	}
	return -1
}
