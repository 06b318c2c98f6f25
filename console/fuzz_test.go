package console

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"roce-fwd/capture"
)

// FuzzGrammar feeds arbitrary lines to the console's grammar: resolving,
// completing, the grammar shown for "?", help, and the parsers of the
// commands whose words are read without a daemon (flow rules, routes).
// Nothing may panic, and a line that resolves resolves again, to the same
// command and words, from its normalised words: what a user is shown as
// the command's words is a command too.
func FuzzGrammar(f *testing.F) {
	for _, seed := range []string{
		"sh po st all", "show port info 1", "set qos ecn out 3 min 150KB max 1.5MB prob 0.1",
		"set pfc watchdog 0 3 ac al", "help qos", "help all", "show roce qp top 5 by naks",
		"flow create 0 ingress pattern eth / ipv4 / udp dst is 4791 / end actions queue index 1 / end",
		"fl de in rule 3", "route add 10.0.0.0/8 via 10.1.0.2 port in weight 3 via 10.1.0.3 port out",
		"route add 2001:db8::/32 drop", "neighbor add in 10.1.0.2 b8:ce:f6:00:00:01", "show ip fib 10.0.0.0/8",
		"capture start port in drop reason qos_wred,flow_drop qp 0x12 class data,ack file /tmp/x count 5 snaplen 64 filter udp port 4791",
		"trace start port in count 5 rx", "show port ?", "?", "s", "port start all", "set fwd m", "--json show fwd stats all",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		s := newGrammar(testPorts)
		s.Complete(line)
		toks := strings.Fields(line)
		s.grammarFor(toks)
		if len(toks) == 0 {
			return
		}
		c, words, err := s.Resolve(toks)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("%q: an error with no message", line)
			}
			return
		}
		c2, words2, err := s.Resolve(words)
		if err != nil || c2 != c || !slices.Equal(words, words2) {
			t.Fatalf("%q resolves to %q (%s) but that resolves to %q (%s), %v", line, words, c.Syntax, words2, syntaxOf(c2), err)
		}
		switch words[0] {
		case "help":
			s.help(words)
		case "flow":
			s.parseFlow(words)
		case "route":
			if len(words) > 2 && words[1] == "add" {
				parseRoute(words[2:])
			}
		case "capture", "trace":
			if len(words) > 1 && words[1] == "start" {
				capture.ParseArgs(words[2:], words[0] == "trace", func(p string) (uint16, error) {
					if p == "in" || p == "0" {
						return 0, nil
					}
					return 0, errors.New("no port")
				})
			}
		}
	})
}

func syntaxOf(c *Command) string {
	if c == nil {
		return "none"
	}
	return c.Syntax
}
