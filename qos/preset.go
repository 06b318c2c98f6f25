package qos

import (
	"fmt"
	"strings"

	"roce-fwd/roce"
)

// Queue limits the presets use where their reference gives none. A switch
// ASIC sizes queues from a shared pool with dynamic thresholds; a software
// forwarder needs fixed bounds, so these are chosen for its situation:
const (
	// A lossy TC tail-drops at 1 MiB: 84 µs at 100 Gbps, 335 µs at
	// 25 Gbps, about a switch's per-queue share of a shared buffer.
	DefaultLossyLimit = 1 << 20
	// A lossless TC must hold what arrives after it sends XOFF: the PFC
	// threshold plus everything already in flight, which for a software
	// forwarder includes a full rx ring (1024 descriptors of 4 KB RoCE
	// frames, 4.3 MB), for a few ingress ports. It is not meant to be hit.
	DefaultLosslessLimit = 16 << 20
	// A strict TC carries CNPs and control traffic (small, rare); a short
	// queue caps how long it can hold the DWRR TCs back.
	DefaultStrictLimit = 256 << 10
)

// PresetNames lists the presets Preset knows.
func PresetNames() []string { return []string{"default", "nvidia-roce", "sonic-azure"} }

// Preset returns the named preset.
func Preset(name string) (Config, error) {
	switch name {
	case "default":
		return DefaultConfig(), nil
	case "nvidia-roce":
		return NVIDIARoCE(), nil
	case "sonic-azure":
		return SONiCAzure(), nil
	}
	return Config{}, fmt.Errorf("qos: unknown preset %q; presets: %s", name, strings.Join(PresetNames(), ", "))
}

// DefaultConfig is what a port does without QoS configuration: the mlx5
// firmware map (trust DSCP, TC = DSCP >> 3, PCP n → TC n), eight lossy
// TCs sharing the port equally by DWRR, no ECN, no PFC, no shaping.
func DefaultConfig() Config {
	c := Config{Name: "default", TCMap: roce.DefaultTCMap(), PrioToTC: IdentityPrioToTC}
	for i := range c.TC {
		c.TC[i] = TCConfig{Mode: DWRR, Weight: 1, Limit: DefaultLossyLimit}
	}
	return c
}

// NVIDIARoCE is the NVIDIA Onyx / Cumulus "RoCE lossless" profile:
//
//   - trust DSCP; DSCP 26 → TC3, DSCP 48 → TC6, every other DSCP → TC0;
//     PCP n → TC n for tagged non-IP frames;
//   - TC3 lossless (PFC on priority 3), DWRR 50, ECN from 150 KB to
//     1.5 MB with probability 0.1 at 1.5 MB, on the instantaneous depth;
//   - TC6 strict (CNPs); TC0 lossy, DWRR 50 (ETS 50 % / 50 %);
//   - TCs 1, 2, 4, 5 and 7 carry nothing under this map; they are lossy
//     DWRR weight 1 (Onyx gives them 0 % ETS, which DWRR cannot express;
//     idle, they take nothing from TC0 and TC3).
//
// Values the profile leaves to the ASIC's buffer calculation are chosen
// here: queue limits per DefaultLossyLimit, DefaultLosslessLimit and
// DefaultStrictLimit; PFC XOFF at 2 MB and XON at 1.5 MB held per ingress
// port, above the ECN range so that DCQCN (ECN) slows senders before PFC
// pauses the link, with 500 KB (about 120 RoCE frames) of hysteresis;
// XOFF quanta 0xFFFF refreshed at half the pause time; the PFC watchdog
// on with SONiC's defaults (200 ms detection, 200 ms restoration, drop).
func NVIDIARoCE() Config {
	c := Config{Name: "nvidia-roce", PrioToTC: IdentityPrioToTC}
	c.TCMap.Trust = roce.TrustDSCP
	c.TCMap.DSCP[26] = 3
	c.TCMap.DSCP[48] = 6
	c.TCMap.PCP = IdentityPrioToTC
	for i := range c.TC {
		c.TC[i] = TCConfig{Mode: DWRR, Weight: 1, Limit: DefaultLossyLimit}
	}
	c.TC[0].Weight = 50
	c.TC[3] = TCConfig{Mode: DWRR, Weight: 50, Lossless: true, Limit: DefaultLosslessLimit,
		ECN: ECN{Min: 150_000, Max: 1_500_000, Probability: 0.1}}
	c.TC[6] = TCConfig{Mode: Strict, Limit: DefaultStrictLimit}
	c.PFC = PFCConfig{Xoff: 2_000_000, Xon: 1_500_000, Quanta: DefaultQuanta}
	c.Watchdog = WatchdogConfig{Enabled: true, Action: ActionDrop,
		DetectionTime: DefaultDetectionTime, RestorationTime: DefaultRestorationTime}
	return c
}

// SONiCAzure is SONiC's AZURE QoS template (files/build_templates/
// qos_config.j2):
//
//   - DSCP_TO_TC_MAP AZURE: 3 → 3, 4 → 4, 46 → 5, 48 → 6, every other
//     DSCP → 1 (the upstream template also sends 5 → 2 and 8 → 0; this
//     preset keeps the simpler map roce-fwd documents); PCP n → TC n;
//     PFC priority n → queue n;
//   - lossless TCs 3 and 4 (pfc_enable "3,4"), DWRR weight 15
//     (scheduler.1) with the AZURE_LOSSLESS WRED profile: ECN from 1 MiB
//     to 2 MiB, 5 % at 2 MiB, instantaneous depth;
//   - TCs 0, 1, 2, 5 and 6 lossy, DWRR weight 14 (scheduler.0); TC7 has
//     no scheduler in the template and gets weight 14 here too;
//   - PFC watchdog: detection 200 ms, restoration 200 ms, action drop.
//
// Chosen here (SONiC takes them from per-platform buffer profiles):
// queue limits per DefaultLossyLimit and DefaultLosslessLimit; PFC XOFF at
// 3 MiB and XON at 2 MiB per ingress port, so ECN marks every ECT packet
// before PFC fires, with 1 MiB of hysteresis; XOFF quanta 0xFFFF.
func SONiCAzure() Config {
	c := Config{Name: "sonic-azure", PrioToTC: IdentityPrioToTC}
	c.TCMap.Trust = roce.TrustDSCP
	for i := range c.TCMap.DSCP {
		c.TCMap.DSCP[i] = 1
	}
	c.TCMap.DSCP[3] = 3
	c.TCMap.DSCP[4] = 4
	c.TCMap.DSCP[46] = 5
	c.TCMap.DSCP[48] = 6
	c.TCMap.PCP = IdentityPrioToTC
	for i := range c.TC {
		c.TC[i] = TCConfig{Mode: DWRR, Weight: 14, Limit: DefaultLossyLimit}
	}
	for _, i := range []int{3, 4} {
		c.TC[i] = TCConfig{Mode: DWRR, Weight: 15, Lossless: true, Limit: DefaultLosslessLimit,
			ECN: ECN{Min: 1 << 20, Max: 2 << 20, Probability: 0.05}}
	}
	c.PFC = PFCConfig{Xoff: 3 << 20, Xon: 2 << 20, Quanta: DefaultQuanta}
	c.Watchdog = WatchdogConfig{Enabled: true, Action: ActionDrop,
		DetectionTime: DefaultDetectionTime, RestorationTime: DefaultRestorationTime}
	return c
}
