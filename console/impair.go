package console

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"roce-fwd/daemon"
	"roce-fwd/impair"
	"roce-fwd/pipeline"
)

// Impairment rules, in testpmd's word order (as flow create/destroy/list),
// and PFC storms:
//
//	impair add <rule>        impair del <id>|all
//	impair list              show impair stats
//	impair storm <storm>     impair storm stop <port>|all
func impairCommands() []*Command {
	return []*Command{
		{Syntax: "impair add <rest>", Section: "impair", Help: "impair add " + impair.Syntax + ": a rule after the others (each packet meets the rules in order; a drop or hold ends it)",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				r, err := s.d.AddImpair(w[2:])
				if err != nil {
					return "", err
				}
				if j {
					return asJSON(r)
				}
				return fmt.Sprintf("impair rule %d added: %s\n", r.ID, r), nil
			}},
		{Syntax: "impair del <id>|all", Section: "impair", Help: "remove a rule, or every rule",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.DelImpair(w[2]); err != nil {
					return "", err
				}
				return ok(j, "impair rule "+w[2]+" deleted")
			}},
		{Syntax: "impair storm start <rest>", Section: "impair", Help: "impair storm start " + impair.StormSyntax + ": the port sends PFC XOFF (or PAUSE) frames for a while, ahead of its data",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				st, err := s.d.StartStorm(w[3:])
				if err != nil {
					return "", err
				}
				return ok(j, "storm started: "+st.String())
			}},
		{Syntax: "impair storm stop <port>|all", Section: "impair", Help: "end a port's storm now",
			Run: func(s *Shell, w []string, j bool) (string, error) {
				if err := s.d.StopStorm(w[3]); err != nil {
					return "", err
				}
				return ok(j, "storm stopped")
			}},
		{Syntax: "impair list", Section: "impair", Help: "the rules, in the order packets meet them",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				rules, _ := s.d.ImpairRules()
				if j {
					out := make([]impair.Rule, len(rules))
					for i, r := range rules {
						out[i] = r.Rule
					}
					return asJSON(out)
				}
				if len(rules) == 0 {
					return "no impairment rules: impair add " + impair.Syntax + "\n", nil
				}
				var b strings.Builder
				for _, r := range rules {
					fmt.Fprintf(&b, "%d\t%s\n", r.Rule.ID, r.Rule)
				}
				return b.String(), nil
			}},
		{Syntax: "show impair stats", Section: "impair", Help: "per rule: packets matched and acted on, whether it expired; packets held back",
			Run: func(s *Shell, _ []string, j bool) (string, error) {
				rules, held := s.d.ImpairRules()
				storms := s.d.Storms()
				if j {
					return asJSON(struct {
						Rules  []daemon.ImpairRule    `json:"rules"`
						Held   int                    `json:"held"`
						Storms []pipeline.StormStatus `json:"storms"`
					}{rules, held, storms})
				}
				return impairTable(rules, held, storms), nil
			}},
	}
}

func impairTable(rules []daemon.ImpairRule, held int, storms []pipeline.StormStatus) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMATCHED\tACTED\tSTATE\tRULE")
	for _, r := range rules {
		state := "active"
		if r.Expired {
			state = "expired"
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", r.Rule.ID, r.Matched, r.Acted, state, r.Rule)
	}
	tw.Flush()
	fmt.Fprintf(&b, "packets held back (delay, reorder): %d\n", held)
	for _, st := range storms {
		state := "ended"
		if st.Active {
			state = "active"
		}
		fmt.Fprintf(&b, "storm %s: %s, %d frames sent, %d not sent\n", st.Storm, state, st.Sent, st.Failed)
	}
	return b.String()
}

func (s *Shell) showPFCHistory(w []string, j bool) (string, error) {
	var ports []int
	if len(w) > 3 {
		ports = portIDs(w[3])
	}
	hist, err := s.d.PFCHistory(ports)
	if err != nil {
		return "", err
	}
	if j {
		return asJSON(hist)
	}
	var b strings.Builder
	for _, h := range hist {
		fmt.Fprintf(&b, "port %s: %d pauses, %d watchdog storms\n", h.Port, len(h.Pauses), len(h.Storms))
		for _, st := range h.Storms {
			end := "ongoing"
			if st.Restored != 0 {
				end = "restored at " + time.Unix(0, st.Restored).Format("15:04:05.000000") + " after " + time.Duration(st.Restored-st.Detected).String()
			}
			fmt.Fprintf(&b, "  storm on TC %d (lcore %d, action %s): detected at %s, %s\n", st.TC, st.Lcore, st.Action, time.Unix(0, st.Detected).Format("15:04:05.000000"), end)
		}
		if len(h.Pauses) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  PRIO\tTC\tFROM\tDURATION\tXOFF FRAMES\tENDED")
		for _, e := range h.Pauses {
			ended := "quanta ran out"
			switch {
			case e.Open:
				ended = "ongoing"
			case e.XON:
				ended = "XON"
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%d\t%s\n", e.Prio, e.TC, time.Unix(0, e.From).Format("15:04:05.000000"),
				time.Duration(e.To-e.From), e.Frames, ended)
		}
		tw.Flush()
	}
	return b.String(), nil
}
