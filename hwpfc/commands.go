package hwpfc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"roce-fwd/qos"
	"roce-fwd/roce"
)

// The kernel commands follow iproute2's dcb-pfc(8), dcb-ets(8) and
// dcb-app(8), and mlnx_qos from NVIDIA's mlnx-tools, and what mlx5_core
// does with them:
//
//   - mlx5's ETS requires the ETS TCs' bandwidths to sum to exactly 100
//     and serves strict TCs above ETS ones, the higher TC first (as
//     roce-fwd's scheduler does). A 0 % ETS TC goes to a lower group that
//     gets only what the others leave.
//   - mlx5 initialises prio-tc to 0:1 1:0 2:2 ... (priorities 0 and 1
//     swapped), so prio-tc is always given in full.
//   - mlx5 has no trust command in DCB netlink: adding a DSCP APP entry
//     switches the port to trust DSCP (and replaces that DSCP's previous
//     entry); deleting the last one switches it back to PCP, and deleting
//     an entry resets that DSCP to priority 0 in the firmware. The
//     firmware's own map is DSCP >> 3, which is also what
//     "mlnx_qos --trust dscp" installs when it switches trust. So the dcb
//     command gives all 64 DSCPs, which makes the result independent of
//     what was configured before.

// DCBCommands returns the iproute2 dcb commands that give netdev PFC on
// the priorities of lossless, and cfg's ETS, priority → TC map and
// classification.
func DCBCommands(netdev string, lossless uint8, cfg *qos.Config) []string {
	var pfc, tsa, bw, prioTC []string
	pct := ETSBandwidth(cfg)
	for i := range qos.NumTC {
		on := "off"
		if lossless&(1<<i) != 0 {
			on = "on"
		}
		pfc = append(pfc, fmt.Sprintf("%d:%s", i, on))
		tsa = append(tsa, fmt.Sprintf("%d:%s", i, tsaName(cfg.TC[i].Mode)))
		bw = append(bw, fmt.Sprintf("%d:%d", i, pct[i]))
		prioTC = append(prioTC, fmt.Sprintf("%d:%d", i, cfg.PrioToTC[i]))
	}
	cmds := []string{
		fmt.Sprintf("dcb pfc set dev %s prio-pfc %s", netdev, strings.Join(pfc, " ")),
		fmt.Sprintf("dcb ets set dev %s tc-tsa %s tc-bw %s", netdev, strings.Join(tsa, " "), strings.Join(bw, " ")),
		fmt.Sprintf("dcb ets set dev %s prio-tc %s", netdev, strings.Join(prioTC, " ")),
	}
	if cfg.TCMap.Trust == roce.TrustDSCP {
		prio := DSCPToPrio(cfg)
		m := make([]string, len(prio))
		for d, p := range prio {
			m[d] = fmt.Sprintf("%d:%d", d, p)
		}
		cmds = append(cmds, fmt.Sprintf("dcb app add dev %s dscp-prio %s", netdev, strings.Join(m, " ")))
	} else {
		// No DSCP entry: trust PCP.
		cmds = append(cmds, fmt.Sprintf("dcb app flush dev %s dscp-prio", netdev))
	}
	return cmds
}

// MlnxQosCommands returns the mlnx_qos commands equivalent to
// DCBCommands. mlnx_qos does not take --trust and --dscp2prio in one run;
// under trust DSCP the first command deletes every DSCP entry (trust goes
// back to PCP), the second switches to trust DSCP, which installs the
// firmware map DSCP >> 3, and the third, when needed, sets the DSCPs that
// cfg maps elsewhere.
func MlnxQosCommands(netdev string, lossless uint8, cfg *qos.Config) []string {
	var pfc, tsa, bw, prioTC []string
	pct := ETSBandwidth(cfg)
	for i := range qos.NumTC {
		pfc = append(pfc, fmt.Sprint((lossless>>i)&1))
		tsa = append(tsa, tsaName(cfg.TC[i].Mode))
		bw = append(bw, fmt.Sprint(pct[i]))
		prioTC = append(prioTC, fmt.Sprint(cfg.PrioToTC[i]))
	}
	trust := "pcp"
	if cfg.TCMap.Trust == roce.TrustDSCP {
		trust = "dscp"
	}
	main := fmt.Sprintf("mlnx_qos -i %s --trust %s --pfc %s --prio_tc %s --tsa %s --tcbw %s",
		netdev, trust, strings.Join(pfc, ","), strings.Join(prioTC, ","), strings.Join(tsa, ","), strings.Join(bw, ","))
	if trust == "pcp" {
		return []string{main}
	}
	cmds := []string{fmt.Sprintf("mlnx_qos -i %s --dscp2prio flush", netdev), main}
	var set []string
	for d, p := range DSCPToPrio(cfg) {
		if p != uint8(d>>3) {
			set = append(set, fmt.Sprintf("--dscp2prio set,%d,%d", d, p))
		}
	}
	if len(set) > 0 {
		cmds = append(cmds, fmt.Sprintf("mlnx_qos -i %s %s", netdev, strings.Join(set, " ")))
	}
	return cmds
}

// DSCPToPrio is the NIC's DSCP → priority map for cfg: cfg maps a DSCP
// to a TC, and the NIC maps priorities to TCs, so each DSCP gets the
// priority of its TC (qos.Config.TCToPrio: the lowest priority mapped to
// it).
func DSCPToPrio(cfg *qos.Config) [64]uint8 {
	tcPrio := cfg.TCToPrio()
	var m [64]uint8
	for d, tc := range cfg.TCMap.DSCP {
		if tc < qos.NumTC {
			m[d] = tcPrio[tc]
		}
	}
	return m
}

// ETSBandwidth converts cfg's DWRR weights to ETS percentages: 0 for
// strict TCs, and for DWRR (ETS) TCs their weight's share of 100, rounded
// down, the points lost to rounding then going one at a time to the TCs
// with a non-zero share, heaviest first (ties to the lower TC), so that
// the ETS TCs sum to exactly 100 as mlx5 requires. A TC whose share
// rounds down to 0 stays at 0 %: mlx5 serves 0 % ETS TCs only when the
// others leave bandwidth, what a weight under 1 % of the total means.
// NVIDIA's RoCE profile (TC0 and TC3 at 50, the idle TCs at 1) gives
// 50/50, as Onyx configures it.
func ETSBandwidth(cfg *qos.Config) [qos.NumTC]uint8 {
	var pct [qos.NumTC]uint8
	var sum uint64
	for i := range cfg.TC {
		if cfg.TC[i].Mode == qos.DWRR {
			sum += uint64(cfg.TC[i].Weight)
		}
	}
	if sum == 0 {
		return pct
	}
	left := 100
	var shared []int
	for i := range cfg.TC {
		if cfg.TC[i].Mode != qos.DWRR {
			continue
		}
		p := uint64(cfg.TC[i].Weight) * 100 / sum
		pct[i] = uint8(p)
		left -= int(p)
		if p > 0 {
			shared = append(shared, i)
		}
	}
	slices.SortStableFunc(shared, func(a, b int) int { return cmp.Compare(cfg.TC[b].Weight, cfg.TC[a].Weight) })
	for k := 0; left > 0; k, left = k+1, left-1 {
		pct[shared[k%len(shared)]]++
	}
	return pct
}

func tsaName(m qos.SchedMode) string {
	if m == qos.Strict {
		return "strict"
	}
	return "ets"
}

// mapNotes says where the NIC cannot follow cfg's classification.
func mapNotes(cfg *qos.Config) []string {
	var notes []string
	var reached uint8
	for _, tc := range cfg.PrioToTC {
		if tc < qos.NumTC {
			reached |= 1 << tc
		}
	}
	switch cfg.TCMap.Trust {
	case roce.TrustDSCP:
		var orphan uint8
		for _, tc := range cfg.TCMap.DSCP {
			if tc < qos.NumTC && reached&(1<<tc) == 0 {
				orphan |= 1 << tc
			}
		}
		if orphan != 0 {
			notes = append(notes, fmt.Sprintf("no priority maps to TC %s, which DSCPs map to: the NIC classifies those DSCPs elsewhere", qos.MaskList(orphan)))
		}
	case roce.TrustPCP:
		var differ []string
		for p, tc := range cfg.TCMap.PCP {
			if tc != cfg.PrioToTC[p] {
				differ = append(differ, fmt.Sprintf("PCP %d: TC%d, NIC TC%d", p, tc, cfg.PrioToTC[p]))
			}
		}
		if len(differ) > 0 {
			notes = append(notes, "the NIC maps PCP n to the TC of priority n, which differs from the PCP map ("+strings.Join(differ, ", ")+")")
		}
	default:
		notes = append(notes, fmt.Sprintf("trust %s has no NIC equivalent: the NIC trusts PCP", cfg.TCMap.Trust))
	}
	return notes
}
