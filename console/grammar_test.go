package console

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

var testPorts = []Port{{0, "in"}, {1, "out"}}

// Every command, abbreviated and in full, resolves to its syntax with the
// words normalised; every error path says what is wrong.
func TestResolve(t *testing.T) {
	s := newGrammar(testPorts)
	cases := []struct {
		line   string
		syntax string
		words  string
	}{
		{"help", "help [<rest>]", "help"},
		{"help qos", "help [<rest>]", "help qos"},
		{"quit", "quit|exit", "quit"},
		{"exit", "quit|exit", "exit"},
		{"start", "start", "start"},
		{"stop", "stop", "stop"},
		{"reload", "reload", "reload"},
		{"show fwd stats all", "show fwd stats all", "show fwd stats all"},
		{"sh fw st a", "show fwd stats all", "show fwd stats all"},
		{"clear fwd stats all", "clear fwd stats all", "clear fwd stats all"},
		{"sh po st all", "show port info|stats|xstats|summary <port>|all", "show port stats all"},
		{"show port info 1", "show port info|stats|xstats|summary <port>|all", "show port info 1"},
		{"show port xstats out", "show port info|stats|xstats|summary <port>|all", "show port xstats 1"},
		{"show port summary all", "show port info|stats|xstats|summary <port>|all", "show port summary all"},
		{"clear port stats in", "clear port stats|xstats <port>|all", "clear port stats 0"},
		{"clear port xstats all", "clear port stats|xstats <port>|all", "clear port xstats all"},
		{"show config fwd", "show config fwd|cores|rxtx", "show config fwd"},
		{"show conf co", "show config fwd|cores|rxtx", "show config cores"},
		{"show config rxtx", "show config fwd|cores|rxtx", "show config rxtx"},
		{"show lcores", "show lcores", "show lcores"},
		{"show errors", "show errors", "show errors"},
		{"show numa", "show numa", "show numa"},
		{"show hugepages", "show hugepages", "show hugepages"},
		{"show running-config", "show running-config", "show running-config"},
		{"show offload", "show offload [<port>|all]", "show offload"},
		{"show offload out", "show offload [<port>|all]", "show offload 1"},
		{"sh off all", "show offload [<port>|all]", "show offload all"},
		{"flow list 0", "flow [<rest>]", "flow list 0"},
		{"fl cr in ingress pattern eth / end actions count / end", "flow [<rest>]", "flow cr in ingress pattern eth / end actions count / end"},
		{"show roce stats", "show roce stats [<port>]", "show roce stats"},
		{"show roce stats out", "show roce stats [<port>]", "show roce stats 1"},
		{"show roce qp", "show roce qp [top <n>] [by bytes|packets|naks|cnp|gaps|marked|held|qos_drops]", "show roce qp"},
		{"show roce qp top 5 by naks", "show roce qp [top <n>] [by bytes|packets|naks|cnp|gaps|marked|held|qos_drops]", "show roce qp top 5 by naks"},
		{"show roce qp by cnp", "show roce qp [top <n>] [by bytes|packets|naks|cnp|gaps|marked|held|qos_drops]", "show roce qp by cnp"},
		{"clear roce stats", "clear roce stats", "clear roce stats"},
		{"show qos", "show qos [<port>]", "show qos"},
		{"show qos 1", "show qos [<port>]", "show qos 1"},
		{"show pfc in", "show pfc [<port>]", "show pfc 0"},
		{"show pfc victims", "show pfc victims [top <n>]", "show pfc victims"},
		{"show pfc vi top 5", "show pfc victims [top <n>]", "show pfc victims top 5"},
		{"show ecn marks top 3", "show ecn marks [top <n>]", "show ecn marks top 3"},
		{"show pfc history", "show pfc history [<port>|all]", "show pfc history"},
		{"sh pfc hi out", "show pfc history [<port>|all]", "show pfc history 1"},
		{"set qos ecn out 3 min 150KB max 1.5MB prob 0.1", "set qos ecn <port> <tc> min <size> max <size> prob <p>", "set qos ecn 1 3 min 150KB max 1.5MB prob 0.1"},
		{"set qos dscp 26 tc 3", "set qos dscp <dscp> tc <tc>", "set qos dscp 26 tc 3"},
		{"set pfc watchdog 0 3 off", "set pfc watchdog <port> <tc> on|off", "set pfc watchdog 0 3 off"},
		{"set pfc watchdog 0 3 action forward", "set pfc watchdog <port> <tc> action drop|forward|alert", "set pfc watchdog 0 3 action forward"},
		{"set pfc watchdog 0 3 ac al", "set pfc watchdog <port> <tc> action drop|forward|alert", "set pfc watchdog 0 3 action alert"},
		{"port start all", "port start|stop <port>|all", "port start all"},
		{"port stop 1", "port start|stop <port>|all", "port stop 1"},
		{"set promisc all off", "set promisc <port>|all on|off", "set promisc all off"},
		{"set fwd roce", "set fwd io|mac|roce", "set fwd roce"},
		{"set fwd m", "set fwd io|mac|roce", "set fwd mac"},
		{"show ip fib", "show ip fib [<rest>]", "show ip fib"},
		{"sh ip fib 10.0.0.0/8", "show ip fib [<rest>]", "show ip fib 10.0.0.0/8"},
		{"show ipv6 fib 2001:db8::1", "show ipv6 fib [<rest>]", "show ipv6 fib 2001:db8::1"},
		{"show neighbors", "show neighbors", "show neighbors"},
		{"show ecmp", "show ecmp", "show ecmp"},
		{"route add 10.0.0.0/8 via 10.1.0.2 port in", "route add|del <rest>", "route add 10.0.0.0/8 via 10.1.0.2 port in"},
		{"route del 10.0.0.0/8", "route add|del <rest>", "route del 10.0.0.0/8"},
		{"route load /tmp/routes.txt", "route load <rest>", "route load /tmp/routes.txt"},
		{"neighbor add in 10.1.0.2 b8:ce:f6:00:00:01", "neighbor add|del <rest>", "neighbor add in 10.1.0.2 b8:ce:f6:00:00:01"},
		{"neighbor del in 10.1.0.2", "neighbor add|del <rest>", "neighbor del in 10.1.0.2"},
		{"capture start port in drop file /tmp/d.pcapng", "capture start <rest>", "capture start port in drop file /tmp/d.pcapng"},
		{"capture stop", "capture stop", "capture stop"},
		{"show capture", "show capture", "show capture"},
		{"trace start port out count 10", "trace start [<rest>]", "trace start port out count 10"},
		{"trace start", "trace start [<rest>]", "trace start"},
		{"trace clear", "trace stop|clear", "trace clear"},
		{"show trace", "show trace", "show trace"},
		{"impair add port in rx qp 0x11 every 100 action drop", "impair add <rest>", "impair add port in rx qp 0x11 every 100 action drop"},
		{"impair del 3", "impair del <id>|all", "impair del 3"},
		{"imp del all", "impair del <id>|all", "impair del all"},
		{"impair list", "impair list", "impair list"},
		{"impair storm start port out pfc 3 for 300ms", "impair storm start <rest>", "impair storm start port out pfc 3 for 300ms"},
		{"impair storm stop out", "impair storm stop <port>|all", "impair storm stop 1"},
		{"show impair stats", "show impair stats", "show impair stats"},
		{"sh imp st", "show impair stats", "show impair stats"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		c, words, err := s.Resolve(strings.Fields(tc.line))
		if err != nil {
			t.Errorf("%q: %v", tc.line, err)
			continue
		}
		if c.Syntax != tc.syntax || strings.Join(words, " ") != tc.words {
			t.Errorf("%q: %q %q, want %q %q", tc.line, c.Syntax, strings.Join(words, " "), tc.syntax, tc.words)
		}
		seen[c.Syntax] = true
	}
	for _, c := range s.Commands() {
		if !seen[c.Syntax] {
			t.Errorf("no case for %q", c.Syntax)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	s := newGrammar(testPorts)
	cases := []struct{ line, want string }{
		{"frobnicate", "Command not found"},
		{"show frob", "Command not found"},
		{"s", `Ambiguous command "s": set, show, start, stop`},
		{"st", `Ambiguous command "st": start, stop`},
		{"show port stats 7", "Invalid port 7 (valid ports: 0 1)"},
		{"show port stats eth9", `Invalid port "eth9" (valid ports: 0 (in), 1 (out))`},
		{"show port stats", "Bad arguments: missing one of all, <port> (usage: show port info|stats|xstats|summary <port>|all)"},
		{"show port s all", `Bad arguments: "s" is ambiguous: stats, summary`},
		{"show port stats all extra", `Bad arguments: unexpected "extra"`},
		{"set qos dscp 64 tc 3", `Bad arguments: "64" is not a DSCP value (0..63)`},
		{"set qos dscp 26 tc 8", `Bad arguments: "8" is not a traffic class (0..7)`},
		{"set qos ecn 0 3 min 1KB max 2KB prob 2", `Bad arguments: "2" is not a probability (0..1)`},
		{"set qos ecn 0 3 min 1Kb max 2KB prob 0.1", `Bad arguments: "1Kb" is not a size (150KB, 1.5MB, 4MiB)`},
		{"quit now", `Bad arguments: unexpected "now" (usage: quit|exit)`},
		{"show port", "Bad arguments: missing one of info, stats, xstats, summary"},
		{"set fwd rxonly", `Bad arguments: "rxonly" is not one of io, mac, roce`},
		{"show roce qp top many", `Bad arguments: "many" is not a count (1 or more)`},
		{"show roce qp top 0", `Bad arguments: "0" is not a count (1 or more)`},
		{"show roce qp top 0x10", `Bad arguments: "0x10" is not a count (1 or more)`},
		{"set qos ecn 0 3 min 1KB max 2KB prob NaN", `Bad arguments: "NaN" is not a probability (0..1)`},
		{"set pfc watchdog 0 3 maybe", `Bad arguments: "maybe" is not one of`},
	}
	for _, tc := range cases {
		_, _, err := s.Resolve(strings.Fields(tc.line))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.line, err, tc.want)
		}
	}
	if _, _, err := s.Resolve([]string{"nope"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("not found is %v", err)
	}
}

func TestComplete(t *testing.T) {
	s := newGrammar(testPorts)
	cases := []struct {
		line string
		want []string
	}{
		{"", []string{"capture", "clear", "exit", "flow", "help", "impair", "neighbor", "port", "quit", "reload", "route", "set", "show", "start", "stop", "trace"}},
		{"sh", []string{"show"}},
		{"show ", []string{"capture", "config", "ecmp", "ecn", "errors", "fwd", "hugepages", "impair", "ip", "ipv6", "lcores", "neighbors", "numa", "offload", "pfc", "port", "qos", "roce", "running-config", "trace"}},
		{"route ", []string{"add", "del", "load"}},
		{"show offload ", []string{"0", "1", "all", "in", "out"}},
		{"show port ", []string{"info", "stats", "summary", "xstats"}},
		{"show port st", []string{"stats"}},
		{"show port stats ", []string{"0", "1", "all", "in", "out"}},
		{"show port stats o", []string{"out"}},
		{"sh po st ", []string{"0", "1", "all", "in", "out"}},
		{"show roce qp ", []string{"by", "top"}},
		{"show roce qp by ", []string{"bytes", "cnp", "gaps", "held", "marked", "naks", "packets", "qos_drops"}},
		{"set pfc watchdog in 3 ", []string{"action", "off", "on"}},
		{"show port stats all ", nil},
	}
	for _, tc := range cases {
		if got := s.Complete(tc.line); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Complete(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestHelpAndGrammar(t *testing.T) {
	s := newGrammar(testPorts)
	out, err := s.Exec("help", false)
	if err != nil || !strings.Contains(out, "help qos") || !strings.Contains(out, "help display") {
		t.Errorf("help: %v\n%s", err, out)
	}
	out, _ = s.Exec("help qos", false)
	if !strings.Contains(out, "set qos ecn <port> <tc> min <size> max <size> prob <p>") || strings.Contains(out, "show lcores") {
		t.Errorf("help qos:\n%s", out)
	}
	out, _ = s.Exec("help show port", false)
	if !strings.Contains(out, "show port info|stats|xstats|summary") || strings.Contains(out, "show qos") {
		t.Errorf("help show port:\n%s", out)
	}
	out, _ = s.Exec("show roce ?", false)
	if !strings.Contains(out, "show roce qp [top <n>]") || !strings.Contains(out, "show roce stats") || strings.Contains(out, "show qos") {
		t.Errorf("show roce ?:\n%s", out)
	}
	if _, err := s.Exec("quit", false); !errors.Is(err, ErrQuit) {
		t.Errorf("quit: %v", err)
	}
}

// After Close every command is refused: roce-fwd closes the shell before
// it takes the daemon down.
func TestCloseRefusesCommands(t *testing.T) {
	s := newGrammar(testPorts)
	if _, err := s.Exec("help", false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Exec("help", false); !errors.Is(err, ErrStopping) {
		t.Errorf("after Close: %v, want %v", err, ErrStopping)
	}
}
