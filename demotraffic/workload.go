package demotraffic

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"roce-fwd/roce"
)

// A Workload is a synthetic many-QP RoCEv2 capture for benchmarks: QPs
// active QPs between hosts of a fabric, their frames interleaved as a busy
// port sees them. The same Workload (Seed included) always gives the same
// bytes.
//
// Hosts: 64 to 256 of them (QPs/16, clamped), 32 per rack, at
// 10.0.RACK.N (IPv4) or fd00::RACK:N (IPv6, inside fd00::/64) with
// RACK from 1 and N from 2, MAC 02:00:00:00:RACK:N. Each QP joins a
// requester (a random host) to a responder (another random host). Its two
// QP numbers are random 24-bit values, unique in the whole workload and
// never the special QP 0 or 1, so no two QPs share a (source, destination,
// QP) flow. Its UDP source port is derived from both QP numbers as Linux
// does (udpSourcePort); two QPs between the same hosts may then share a
// UDP 5-tuple, as on a real fabric.
//
// Every frame is a valid Ethernet frame without FCS: IPv4 header checksum
// and ICRC correct, DF set, TTL 64, UDP checksum 0, P_Key 0xffff. Data,
// READ requests and ACKs use DSCP 26 ECT(0); CNPs use DSCP 48 ECT(0) with
// BECN set and UDP source port 0, as NICs send them.
//
// Frames are interleaved: a fixed random permutation of the QPs is cycled,
// one frame per QP per round, so successive frames always belong to
// different QPs (when there are at least two) and a flow cache sees every
// QP once per round. A QP's request PSNs count up from a random 24-bit
// start with no gaps but the PSNs a READ request reserves for its
// responses; an ACK carries the last PSN the requester has used (cumulative,
// so READs are covered too) and, as MSN, a count of the messages completed
// (from a random start); a CNP carries PSN 0.
type Workload struct {
	Mix    Mix
	QPs    int  // 1 to MaxQPs
	IPv6   bool // IPv6 instead of IPv4
	Frames int  // total frames, QPs to MaxFrames; 0 means DefaultFrames
	Seed   uint64
}

// Mix is the kind of traffic of a Workload.
type Mix uint8

const (
	// MixControl is control-size frames, a fixed cycle of ten per QP:
	// 4 RC ACKs (62 B over IPv4), 3 RC SEND Only with 32-64 payload bytes
	// (90-122 B), 2 RC READ Requests of 64 B to 4 KB (74 B) and 1 CNP
	// (74 B); IPv6 adds 20 B. Each QP starts at a random point of the
	// cycle, so the cycle is the exact ratio only over whole cycles.
	// READ PSN accounting assumes a path MTU of 1024.
	MixControl Mix = iota + 1
	// MixMTU1024 is RC WRITE (3 in 4 messages) and SEND messages of
	// 2 to 16 packets at path MTU 1024: First and Middle packets carry
	// exactly 1024 payload bytes, Last 64 to 1024. One frame in 16 of a
	// QP is an ACK back to the requester. Frames are 1082-1098 B over
	// IPv4 (WRITE First carries a RETH), ACKs 62 B; IPv6 adds 20 B.
	MixMTU1024
	// MixMTU4096 is MixMTU1024 at path MTU 4096: First and Middle frames
	// of 4154-4170 B over IPv4.
	MixMTU4096
)

// MixNames lists the workload mixes by name, for flags and messages.
var MixNames = []string{"control", "mtu1024", "mtu4096"}

// ParseMix returns the mix of a name in MixNames.
func ParseMix(s string) (Mix, error) {
	for i, n := range MixNames {
		if n == s {
			return Mix(i + 1), nil
		}
	}
	return 0, fmt.Errorf("unknown mix %q", s)
}

func (m Mix) String() string {
	if m >= MixControl && int(m) <= len(MixNames) {
		return MixNames[m-1]
	}
	return fmt.Sprintf("Mix(%d)", uint8(m))
}

// MTU is the IB path MTU of the data mixes, 0 for MixControl.
func (m Mix) MTU() int {
	switch m {
	case MixMTU1024:
		return 1024
	case MixMTU4096:
		return 4096
	}
	return 0
}

// MaxQPs and MaxFrames bound a Workload.
const (
	MaxQPs    = 1 << 20
	MaxFrames = 1 << 20

	// Default frame counts stop here: the benchmark replays the capture
	// with net_pcap infinite_rx, which holds every frame in an mbuf, and
	// 8192 frames of 4 KB already take 32 MB.
	defaultControlCap = 32768
	defaultMTUCap     = 8192
	framesPerQP       = 8
)

// DefaultFrames is the frame count of a Workload with Frames 0: eight per
// QP up to 32768 frames for MixControl or 8192 for the MTU mixes, but at
// least one per QP, rounded down to whole rounds so every QP has as many
// frames as every other.
func DefaultFrames(m Mix, qps int) int {
	if qps <= 0 {
		return 0
	}
	limit := defaultControlCap
	if m.MTU() > 0 {
		limit = defaultMTUCap
	}
	n := max(qps, min(qps*framesPerQP, limit))
	return n / qps * qps
}

// Validate reports the first thing wrong with w. Messages name the field
// as the gen-pcap flag does (qps, frames).
func (w Workload) Validate() error {
	if w.Mix < MixControl || int(w.Mix) > len(MixNames) {
		return fmt.Errorf("mix %v: want one of %v", w.Mix, MixNames)
	}
	if w.QPs < 1 || w.QPs > MaxQPs {
		return fmt.Errorf("qps %d: want 1 to %d", w.QPs, MaxQPs)
	}
	if w.Frames < 0 || w.Frames > MaxFrames {
		return fmt.Errorf("frames %d: want %d to %d", w.Frames, w.QPs, MaxFrames)
	}
	if w.Frames != 0 && w.Frames < w.QPs {
		return fmt.Errorf("frames %d: fewer than the %d QPs, and every QP needs a frame", w.Frames, w.QPs)
	}
	return nil
}

// TotalFrames is the number of frames w makes.
func (w Workload) TotalFrames() int {
	if w.Frames != 0 {
		return w.Frames
	}
	return DefaultFrames(w.Mix, w.QPs)
}

// FiveTuple is one flow of a capture as an exact-match rule sees it.
type FiveTuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	Proto            uint8
}

// String is the line format of WriteFlows: "SRC DST SPORT DPORT PROTO".
func (t FiveTuple) String() string {
	return fmt.Sprintf("%s %s %d %d %d", t.Src, t.Dst, t.SrcPort, t.DstPort, t.Proto)
}

func compareTuples(a, b FiveTuple) int {
	return cmp.Or(a.Src.Compare(b.Src), a.Dst.Compare(b.Dst), cmp.Compare(a.SrcPort, b.SrcPort),
		cmp.Compare(a.DstPort, b.DstPort), cmp.Compare(a.Proto, b.Proto))
}

// sortTuples sorts flows by address, then port and protocol, and drops
// duplicates.
func sortTuples(flows []FiveTuple) []FiveTuple {
	slices.SortFunc(flows, compareTuples)
	return slices.Compact(flows)
}

// WriteFlows writes flows one per line as FiveTuple.String does.
func WriteFlows(out io.Writer, flows []FiveTuple) error {
	bw := bufio.NewWriter(out)
	for _, t := range flows {
		fmt.Fprintln(bw, t)
	}
	return bw.Flush()
}

// FlowsOf returns the distinct UDP and TCP 5-tuples of untagged IPv4 and
// IPv6 frames (IPv6 without extension headers), sorted; other frames are
// left out.
func FlowsOf(frames [][]byte) []FiveTuple {
	var out []FiveTuple
	for _, f := range frames {
		if t, ok := tupleOf(f); ok {
			out = append(out, t)
		}
	}
	return sortTuples(out)
}

func tupleOf(f []byte) (t FiveTuple, ok bool) {
	if len(f) < roce.EthernetHeaderLen {
		return t, false
	}
	ip := f[roce.EthernetHeaderLen:]
	var l4 []byte
	switch binary.BigEndian.Uint16(f[12:]) {
	case roce.EtherTypeIPv4:
		if len(ip) < roce.IPv4MinHeaderLen || ip[0]>>4 != 4 {
			return t, false
		}
		ihl := int(ip[0]&0x0f) * 4
		if ihl < roce.IPv4MinHeaderLen || len(ip) < ihl || binary.BigEndian.Uint16(ip[6:])&0x1fff != 0 {
			return t, false // a later fragment has no ports
		}
		t.Proto, t.Src, t.Dst = ip[9], netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		l4 = ip[ihl:]
	case roce.EtherTypeIPv6:
		if len(ip) < roce.IPv6HeaderLen || ip[0]>>4 != 6 {
			return t, false
		}
		t.Proto, t.Src, t.Dst = ip[6], netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		l4 = ip[roce.IPv6HeaderLen:]
	default:
		return t, false
	}
	if (t.Proto != 6 && t.Proto != roce.ProtoUDP) || len(l4) < 4 {
		return t, false
	}
	t.SrcPort, t.DstPort = binary.BigEndian.Uint16(l4), binary.BigEndian.Uint16(l4[2:])
	return t, true
}

// Summary describes a generated workload.
type Summary struct {
	Frames int
	QPs    int
	Bytes  int64       // all frames, without FCS
	Flows  []FiveTuple // every distinct 5-tuple of the frames, sorted
}

// WriteFile writes w as a pcap file at path, streaming: the frames are
// never all in memory.
func (w Workload) WriteFile(path string) (Summary, error) {
	if err := w.Validate(); err != nil {
		return Summary{}, err
	}
	f, err := os.Create(path)
	if err != nil {
		return Summary{}, err
	}
	s, err := w.Write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return s, err
}

// Write writes w to out as a pcap, frames one microsecond apart from the
// same start as pcapio.Write, so the demo capture and workloads look alike.
func (w Workload) Write(out io.Writer) (Summary, error) {
	if err := w.Validate(); err != nil {
		return Summary{}, err
	}
	bw := bufio.NewWriterSize(out, 1<<20)
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		return Summary{}, err
	}
	ts := time.Unix(1700000000, 0)
	i := 0
	s, err := w.Generate(func(f []byte) error {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(f), Length: len(f)}
		i++
		return pw.WritePacket(ci, f)
	})
	if err != nil {
		return s, err
	}
	return s, bw.Flush()
}

// Generate calls emit with every frame of w in order and stops at the
// first error. The frame is only valid during the call (its buffer is
// reused). Memory is linear in QPs, not in frames.
func (w Workload) Generate(emit func(frame []byte) error) (Summary, error) {
	return w.generate(func(f []byte, _ int) error { return emit(f) })
}

// op is what one frame of a QP does.
type op uint8

const (
	opSend op = iota // RC SEND Only
	opRead           // RC READ Request
	opAck            // RC ACK, responder to requester
	opCNP            // CNP, responder (the notification point) to requester
	opData           // the next packet of the QP's current WRITE or SEND message
)

// controlCycle is MixControl's per-QP cycle: 40% ACK, 30% SEND, 20% READ,
// 10% CNP. No two ACKs are adjacent, even across the wrap, so a request
// separates any two ACKs of a QP and their PSNs strictly increase.
var controlCycle = [...]op{opAck, opSend, opAck, opRead, opCNP, opSend, opAck, opRead, opAck, opSend}

// mtuAckEvery: in the MTU mixes one frame in this many of a QP is an ACK.
const mtuAckEvery = 16

const (
	dscpData   = 26 // RoCE traffic class 3 in the usual fabric presets
	dscpCNP    = 48 // CNPs go in their own strict-priority class
	ecnECT0    = 2
	psnMask    = 0xffffff
	controlMTU = 1024 // path MTU the control mix's READ requests assume
	hostsRack  = 32
)

// Which frames of a QP the capture holds, for the flow list.
const (
	seenRequest = 1 << iota // requester to responder, the QP's source port
	seenReverse             // ACKs, responder to requester, the same port
	seenCNP                 // CNPs, responder to requester, port 0
)

type qpState struct {
	va           uint64 // next remote address of a READ or WRITE
	src, dst     uint16 // requester and responder hosts
	sport        uint16
	phase        uint8  // where the QP starts in its cycle
	seen         uint8  // seenRequest | ...
	lqpn, rqpn   uint32 // requester's and responder's QP numbers
	flowLabel    uint32 // IPv6 flow label, the source of sport
	psn          uint32 // next request PSN
	msn          uint32 // messages completed, as ACKs report it
	rkey         uint32
	msgLen, left uint32 // MTU mixes: current message length, bytes left
	write        bool   // current message is a WRITE (else a SEND)
}

// flowLabel is the 20-bit flow label Linux gives a RoCEv2 connection
// (rdma_calc_flow_label): the product of the two QP numbers, folded by
// XOR from 64 bits. Multiplication commutes, so both ends compute the
// same label.
func flowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v) & 0xfffff
}

// udpSourcePort is the RoCEv2 UDP source port of a flow label, as Linux
// and rdma-core derive it (rdma_flow_label_to_udp_sport): the label's
// top 6 bits XORed into its low 14, in the 0xC000-0xFFFF range.
func udpSourcePort(fl uint32) uint16 {
	return uint16(0xc000 | (fl&0x3fff ^ fl>>14&0x3f))
}

// hostCount is how many hosts the QPs are spread over.
func hostCount(qps int) int { return min(256, max(64, qps/16)) }

func hostAddr(h int, ipv6 bool) netip.Addr {
	rack, n := byte(h/hostsRack+1), byte(h%hostsRack+2)
	if ipv6 {
		return netip.AddrFrom16([16]byte{0: 0xfd, 13: rack, 15: n})
	}
	return netip.AddrFrom4([4]byte{10, 0, rack, n})
}

func hostMAC(h int) roce.MAC {
	return roce.MAC{0x02, 0, 0, 0, byte(h/hostsRack + 1), byte(h%hostsRack + 2)}
}

type generator struct {
	w       Workload
	rng     *rand.Rand
	mtu     int
	qps     []qpState
	addrs   []netip.Addr
	macs    []roce.MAC
	spec    roce.FrameSpec
	buf     []byte
	pattern []byte // payload bytes counting up; CNPs use zero
	zero    [16]byte
}

// generate is Generate, also telling emit which QP (an index in setup
// order) each frame belongs to.
func (w Workload) generate(emit func(frame []byte, qp int) error) (Summary, error) {
	if err := w.Validate(); err != nil {
		return Summary{}, err
	}
	g := &generator{w: w, rng: rand.New(rand.NewPCG(w.Seed, 0x726f63652d667764)), mtu: w.Mix.MTU()}
	g.setup()
	total := w.TotalFrames()
	n := len(g.qps)
	order := g.rng.Perm(n)
	sum := Summary{QPs: n}
	for k := 0; k < total; k++ {
		i := order[k%n]
		q := &g.qps[i]
		step := int(q.phase) + k/n // one frame per QP per round
		o := opData
		if w.Mix == MixControl {
			o = controlCycle[step%len(controlCycle)]
		} else if step%mtuAckEvery == mtuAckEvery-1 {
			o = opAck
		}
		f, err := g.frame(q, o)
		if err != nil {
			return sum, err
		}
		if err := emit(f, i); err != nil {
			return sum, err
		}
		sum.Frames++
		sum.Bytes += int64(len(f))
	}
	sum.Flows = g.flows()
	return sum, nil
}

func (g *generator) setup() {
	hosts := hostCount(g.w.QPs)
	for h := range hosts {
		g.addrs = append(g.addrs, hostAddr(h, g.w.IPv6))
		g.macs = append(g.macs, hostMAC(h))
	}
	g.buf = make([]byte, 8192)
	g.pattern = make([]byte, 4096)
	for i := range g.pattern {
		g.pattern[i] = byte(i)
	}
	// A bitmap of the 2^24 QP numbers (2 MB) keeps them unique.
	used := make([]uint64, 1<<24/64)
	qpn := func() uint32 {
		for {
			v := g.rng.Uint32() & psnMask
			if v >= 2 && used[v/64]&(1<<(v%64)) == 0 {
				used[v/64] |= 1 << (v % 64)
				return v
			}
		}
	}
	period := len(controlCycle)
	if g.mtu > 0 {
		period = mtuAckEvery
	}
	g.qps = make([]qpState, g.w.QPs)
	for i := range g.qps {
		q := &g.qps[i]
		src := g.rng.IntN(hosts)
		dst := g.rng.IntN(hosts - 1)
		if dst >= src {
			dst++
		}
		q.src, q.dst = uint16(src), uint16(dst)
		q.lqpn, q.rqpn = qpn(), qpn()
		q.flowLabel = flowLabel(q.lqpn, q.rqpn)
		q.sport = udpSourcePort(q.flowLabel)
		q.psn = g.rng.Uint32() & psnMask
		q.msn = g.rng.Uint32() & psnMask
		q.rkey = g.rng.Uint32()
		// A page-aligned user-space buffer address.
		q.va = 0x7f00_0000_0000 + g.rng.Uint64N(1<<36)&^0xfff
		q.phase = uint8(g.rng.IntN(period))
	}
}

// frame builds the next frame of q doing o and advances q.
func (g *generator) frame(q *qpState, o op) ([]byte, error) {
	s := &g.spec
	from, to, destQP := q.src, q.dst, q.rqpn
	if o == opAck || o == opCNP {
		from, to, destQP = q.dst, q.src, q.lqpn
	}
	*s = roce.FrameSpec{
		Dst: g.macs[to], Src: g.macs[from], IPv6: g.w.IPv6,
		SrcIP: g.addrs[from], DstIP: g.addrs[to], DSCP: dscpData, ECN: ecnECT0,
		FlowLabel: q.flowLabel, SrcPort: q.sport,
		BTH: roce.BTHFields{PKey: 0xffff, DestQP: destQP},
	}
	b := &s.BTH
	switch o {
	case opSend:
		b.Opcode, b.PSN, b.AckReq = roce.OpSendOnly, q.psn, true
		s.Payload = g.pattern[:32+g.rng.IntN(33)]
		q.psn = (q.psn + 1) & psnMask
		q.msn = (q.msn + 1) & psnMask
		q.seen |= seenRequest
	case opRead:
		n := uint32(64 * (1 + g.rng.IntN(64)))
		b.Opcode, b.PSN, b.AckReq = roce.OpReadRequest, q.psn, true
		s.Ext = roce.ExtFields{VA: q.va, RKey: q.rkey, DMALength: n}
		// The responses take one PSN per path MTU of data.
		q.psn = (q.psn + (n+controlMTU-1)/controlMTU) & psnMask
		q.msn = (q.msn + 1) & psnMask
		q.va += uint64(n)
		q.seen |= seenRequest
	case opAck:
		b.Opcode, b.PSN = roce.OpAck, (q.psn-1)&psnMask
		s.Ext = roce.ExtFields{Syndrome: roce.SyndromeACK(0x1f), MSN: q.msn}
		q.seen |= seenReverse
	case opCNP:
		b.Opcode, b.BECN = roce.OpCNP, true
		s.DSCP, s.SrcPort, s.FlowLabel = dscpCNP, 0, 0
		s.Payload = g.zero[:] // 16 reserved bytes
		q.seen |= seenCNP
	case opData:
		g.data(q)
		q.seen |= seenRequest
	}
	n, err := s.Encode(g.buf)
	if err != nil {
		return nil, err
	}
	return g.buf[:n], nil
}

// data fills the spec with the next packet of q's current message,
// starting a new message when the last one is done. A message is 2 to 16
// packets: all but the last carry exactly the path MTU.
func (g *generator) data(q *qpState) {
	s, mtu := &g.spec, uint32(g.mtu)
	if q.left == 0 {
		q.write = g.rng.IntN(4) != 0
		q.msgLen = mtu + uint32(64*(1+g.rng.IntN(15*g.mtu/64)))
		q.left = q.msgLen
	}
	n := min(q.left, mtu)
	first, last := q.left == q.msgLen, q.left == n
	ops := [3]roce.Opcode{roce.OpSendFirst, roce.OpSendMiddle, roce.OpSendLast}
	if q.write {
		ops = [3]roce.Opcode{roce.OpWriteFirst, roce.OpWriteMiddle, roce.OpWriteLast}
	}
	b := &s.BTH
	switch {
	case first:
		b.Opcode = ops[0]
		if q.write {
			s.Ext = roce.ExtFields{VA: q.va, RKey: q.rkey, DMALength: q.msgLen}
			q.va += uint64(q.msgLen)
		}
	case last:
		b.Opcode, b.AckReq = ops[2], true
		q.msn = (q.msn + 1) & psnMask
	default:
		b.Opcode = ops[1]
	}
	b.PSN = q.psn
	q.psn = (q.psn + 1) & psnMask
	s.Payload = g.pattern[:n]
	q.left -= n
}

// flows lists the 5-tuples of the frames generated so far. They are
// sorted as compact host-index keys, which order as the addresses do
// (hostAddr grows with the index), and only the distinct ones become
// FiveTuples: a million QPs would otherwise take hundreds of MB here.
func (g *generator) flows() []FiveTuple {
	type key struct{ from, to, sport uint16 }
	var keys []key
	for i := range g.qps {
		q := &g.qps[i]
		if q.seen&seenRequest != 0 {
			keys = append(keys, key{q.src, q.dst, q.sport})
		}
		if q.seen&seenReverse != 0 {
			keys = append(keys, key{q.dst, q.src, q.sport})
		}
		if q.seen&seenCNP != 0 {
			keys = append(keys, key{q.dst, q.src, 0})
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to), cmp.Compare(a.sport, b.sport))
	})
	keys = slices.Compact(keys)
	out := make([]FiveTuple, len(keys))
	for i, k := range keys {
		out[i] = FiveTuple{Src: g.addrs[k.from], Dst: g.addrs[k.to], SrcPort: k.sport,
			DstPort: roce.RoCEv2Port, Proto: roce.ProtoUDP}
	}
	return out
}
