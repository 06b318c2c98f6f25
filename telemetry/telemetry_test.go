package telemetry

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"roce-fwd/daemon"
	"roce-fwd/flowrule"
	"roce-fwd/internal/testenv"
	"roce-fwd/offload"
	"roce-fwd/pipeline"
	"roce-fwd/qos"
	"roce-fwd/qpstats"
	"roce-fwd/rocestats"
)

// EAL is needed by the DPDK telemetry tests only; the Prometheus ones
// run in the same binary.
func TestMain(m *testing.M) { testenv.Main(m, "telemetry") }

// testReport has a distinct number in every field the exports read.
func testReport() daemon.Report {
	drops := map[string]uint64{}
	for i := pipeline.Reason(0); i < pipeline.NumReasons; i++ {
		drops[i.String()] = 0
	}
	drops["qos_wred"] = 7
	drops["tx_full"] = 11

	tcs := make([]pipeline.TCQoS, qos.NumTC)
	for i := range tcs {
		tcs[i].TC = i
	}
	tcs[3] = pipeline.TCQoS{TC: 3, EnqueuedPackets: 3001, EnqueuedBytes: 3002, TxPackets: 3003, TxBytes: 3004,
		ECNMarked: 3005, Dropped: pipeline.QoSDrops{Tail: 3006, WRED: 3007, Watchdog: 3008, LosslessOverflow: 3009},
		MaxDepthBytes: 3010, DepthBytes: 3011, PausedNs: 2_500_000_000}

	pfc := &pipeline.PortPFC{Mode: "pfc", RxPause: 41, TxFrames: 42, TxFailed: 43}
	pfc.RxFrames[3], pfc.RxXOFF[3], pfc.RxXON[3] = 301, 302, 303
	pfc.PausedNs[3] = 1_500_000_000
	pfc.TxXOFF[3], pfc.TxXON[3] = 304, 305
	pfc.Watchdog[3] = pipeline.Watchdog{StormsDetected: 306, StormsRestored: 307, Dropped: 308, InStorm: true}

	return daemon.Report{
		DurationS: 12.5,
		Mode:      "roce",
		Ports: []daemon.PortReport{
			{Name: "p0", PortID: 0, Driver: "net_pcap", Link: "up, 100 Gbps, full-duplex",
				RxPackets: 1234, RxBytes: 5678, TxPackets: 1111, TxBytes: 2222,
				RxMissed: 13, RxErrors: 14, RxNoMbuf: 15, TxErrors: 16, TxDropped: 17},
			{Name: "p1", PortID: 1, Driver: "net_null", Link: "down", RxPackets: 99},
		},
		Lcores: []daemon.LcoreReport{
			{Lcore: 1, Socket: 0, Queues: []string{"p0:0"}, Packets: 5001, CyclesPerPacket: 123.45,
				BusyCycles: 5002, Bursts: 5003, EmptyPolls: 5004, Mpps: 1.5,
				Stalls: map[string]uint64{"50us": 5006, "200us": 5007, "1ms": 5008, "10ms": 5009}, MaxPollGapUS: 5010.5},
		},
		Drops:     drops,
		Queued:    21,
		Generated: 22,
		QoS:       map[string][]pipeline.TCQoS{"p1": tcs},
		PFC:       map[string]*pipeline.PortPFC{"p0": pfc},
		RoCE: &daemon.RoCEReport{
			Ports: []daemon.PortRoCE{{Name: "p0", Report: rocestats.Report{
				Frames: 7001, Bytes: 7002, RoCE: 7003, RoCEBytes: 7004, Other: 7005, IPv4: 7006, IPv6: 7007,
				CNPs: 7008, ECN: map[string]uint64{"not_ect": 7009, "ect1": 7010, "ect0": 7011, "ce": 7012},
				ICRCOK: 7013, ICRCBad: 7014, Malformed: map[string]uint64{"bad_tver": 7015}, PFC: 7016, Pause: 7017,
				Opcodes: map[string]uint64{"RC SEND Only": 7018, "CNP": 7008},
				TC:      [8]uint64{3: 7019},
			}}},
			QPTable: qpstats.TableStats{Slots: 4096, Used: 33, Inserts: 34, Evictions: 35, Aged: 36},
			QPFlows: 33,
		},
		TopQPs: []qpstats.FlowReport{
			{Src: "10.0.0.1", Dst: "10.0.0.2", QP: 0x1234, Packets: 8001, Bytes: 8002},
			{Src: "fd00::1", Dst: "fd00::2", QP: 0xabcdef, Packets: 8003, Bytes: 8004},
		},
		Flows: newFakeFlows(),
	}
}

// fakeFlows is a flow rules manager of two ports: p0 runs its rules in
// software (a counter and a meter), p1 on a NIC (a counted rule, one
// without a count action, a NIC meter and a rule whose query failed).
// It counts List calls per port.
type fakeFlows struct {
	ports []offload.PortStatus
	rules map[uint16][]offload.Entry
	na    map[uint16]uint64

	mu    sync.Mutex
	lists map[uint16]int
}

func newFakeFlows() *fakeFlows {
	count := flowrule.Action{Type: flowrule.ActCount}
	meter := flowrule.Action{Type: flowrule.ActMeter, Meter: &flowrule.Meter{Algorithm: flowrule.SrTCM, CIR: 1, CBS: 1, EBS: 1}}
	queue := flowrule.Action{Type: flowrule.ActQueue}
	rule := func(id, group, prio uint32, acts ...flowrule.Action) flowrule.Rule {
		return flowrule.Rule{ID: id, Group: group, Priority: prio, Ingress: true,
			Items: []flowrule.Item{{Type: flowrule.ItemEth}}, Actions: acts}
	}
	return &fakeFlows{
		ports: []offload.PortStatus{
			{ID: 0, Name: "p0", Backend: offload.BackendSoftware, SW: 2, Failed: 63,
				Caps: offload.Caps{Driver: "net_pcap", Engine: "none"}},
			{ID: 1, Name: "p1", Backend: offload.BackendRTEFlow, HW: 4, Inserted: 62, Destroyed: 64,
				Caps: offload.Caps{Driver: "mlx5_pci", Engine: "rte_flow"}},
		},
		rules: map[uint16][]offload.Entry{
			0: {
				{Rule: rule(0, 0, 1, count), Where: offload.InSoftware, Counted: true,
					Counter: flowrule.Counter{Packets: 601, Bytes: 602}},
				{Rule: rule(4, 2, 0, meter), Where: offload.InSoftware, Counted: true,
					Counter: flowrule.Counter{Packets: 603, Bytes: 604, Green: 605, Yellow: 606, Red: 607}},
			},
			1: {
				{Rule: rule(7, 1, 0, count), Where: offload.InHardware, Counted: true,
					Counter: flowrule.Counter{Packets: 611, Bytes: 612}},
				{Rule: rule(8, 1, 1, queue), Where: offload.InHardware},
				{Rule: rule(9, 1, 2, count, meter), Where: offload.InHardware, Counted: true,
					Counter: flowrule.Counter{Packets: 613, Bytes: 614, Green: 615}},
				{Rule: rule(10, 3, 0, count), Where: offload.InHardware, CountErr: errors.New("query failed")},
			},
		},
		na:    map[uint16]uint64{0: 61},
		lists: map[uint16]int{},
	}
}

func (f *fakeFlows) Ports() []offload.PortStatus { return f.ports }

func (f *fakeFlows) List(port uint16, groups []uint32) ([]offload.Entry, error) {
	f.mu.Lock()
	f.lists[port]++
	f.mu.Unlock()
	if groups != nil {
		return nil, errors.New("the exports list every group")
	}
	e, ok := f.rules[port]
	if !ok {
		return nil, fmt.Errorf("port %d has no flow rules manager", port)
	}
	return e, nil
}

func (f *fakeFlows) NotApplicable(port uint16) uint64 { return f.na[port] }

// listed is how many times each port's rules were listed.
func (f *fakeFlows) listed() map[uint16]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.lists)
}
