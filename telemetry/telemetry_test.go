package telemetry

import (
	"testing"

	"roce-fwd/daemon"
	"roce-fwd/internal/testenv"
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
				BusyCycles: 5002, Bursts: 5003, EmptyPolls: 5004, Mpps: 1.5},
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
				ICRCOK: 7013, ICRCBad: 7014, Malformed: map[string]uint64{"bad-tver": 7015}, PFC: 7016, Pause: 7017,
				Opcodes: map[string]uint64{"RC SEND Only": 7018, "CNP": 7008},
				TC:      [8]uint64{3: 7019},
			}}},
			QPTable: qpstats.TableStats{Slots: 4096, Used: 33, Inserts: 34, Evictions: 35, Aged: 36},
			QPFlows: 33,
		},
	}
}
