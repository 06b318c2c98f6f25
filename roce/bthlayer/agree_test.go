package bthlayer_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"roce-fwd/roce"
	"roce-fwd/roce/bthlayer"
	"roce-fwd/roce/internal/rocetest"
)

// bthReasons maps each layer error to the classifier reasons that describe
// the same defect. A short UDP payload is one defect seen two ways: the
// classifier judges the UDP length field, the layer the bytes it got.
var bthReasons = []struct {
	err     error
	reasons []roce.Reason
}{
	{nil, []roce.Reason{roce.ReasonNone, roce.ErrBadICRC}},
	{bthlayer.ErrTruncatedBTH, []roce.Reason{roce.ErrTruncatedBTH, roce.ErrUDPLength}},
	{bthlayer.ErrNoICRC, []roce.Reason{roce.ErrUDPLength}},
	{bthlayer.ErrTVer, []roce.Reason{roce.ErrBadTVer}},
	{bthlayer.ErrReservedOpcode, []roce.Reason{roce.ErrReservedOpcode}},
	{bthlayer.ErrShortHeaders, []roce.Reason{roce.ErrTruncatedExt}},
	{bthlayer.ErrPad, []roce.Reason{roce.ErrBadPad}},
}

func bthLevel(r roce.Reason) bool {
	switch r {
	case roce.ReasonNone, roce.ErrBadICRC, roce.ErrBadTVer, roce.ErrReservedOpcode,
		roce.ErrTruncatedExt, roce.ErrBadPad:
		return true
	}
	return false
}

// disagreement returns "" when the classifier and the gopacket decode agree
// on frame, else what differs. Where the lower layers are read differently
// by design (gopacket trusts lengths less strictly, decodes EtherType 0xFFFF
// as IPv4, parses IP options, stops at any IPv6 fragment header, walks any
// number of tags), the frame is not judged.
func disagreement(frame []byte) string {
	var r roce.Result
	roce.Classify(frame, nil, true, &r)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)

	var (
		etype    layers.EthernetType
		tags     []*layers.Dot1Q
		ip4      *layers.IPv4
		ip6      *layers.IPv6
		udp      *layers.UDP
		bl       *bthlayer.BTH
		v6ext    int
		fragment bool
	)
	for _, l := range pkt.Layers() {
		switch l := l.(type) {
		case *layers.Ethernet:
			etype = l.EthernetType
		case *layers.Dot1Q:
			tags = append(tags, l)
			etype = l.Type
		case *layers.IPv4:
			ip4 = l
		case *layers.IPv6:
			ip6 = l
			if l.HopByHop != nil {
				v6ext++
			}
		case *layers.IPv6Routing, *layers.IPv6Destination:
			v6ext++
		case *layers.IPv6Fragment:
			v6ext++
			fragment = true
		case *layers.UDP:
			udp = l
		case *bthlayer.BTH:
			bl = l
		}
	}
	var decodeErr error
	if el := pkt.ErrorLayer(); el != nil {
		decodeErr = el.Error()
	}
	var bthErr error
	for _, m := range bthReasons[1:] {
		if errors.Is(decodeErr, m.err) {
			bthErr = m.err
		}
	}

	// Frames whose lower layers the two read differently by design.
	l3 := 14 + 4*len(tags)
	// gopacket also decodes EtherType 0xFFFF ("raw") as IPv4.
	lenient := len(tags) > roce.MaxTags || v6ext > roce.MaxIPv6Ext || pkt.Metadata().Truncated ||
		etype != layers.EthernetTypeIPv4 && etype != layers.EthernetTypeIPv6
	if ip4 != nil && len(frame) >= l3+4 {
		lenient = lenient || frame[l3]>>4 != 4 || binary.BigEndian.Uint16(frame[l3+2:]) == 0
	}
	if ip6 != nil && len(frame) >= l3+6 {
		lenient = lenient || frame[l3]>>4 != 6 || binary.BigEndian.Uint16(frame[l3+4:]) == 0
	}
	if udp != nil && udp.Length == 0 {
		lenient = true
	}
	// gopacket parses IPv4 options and IPv6 option TLVs, which the
	// classifier skips by length; it never decodes past a fragment header.
	hasExt := v6ext > 0 || ip6 != nil && roce.IsIPv6ExtHeader(uint8(ip6.NextHeader))
	strict := decodeErr != nil && bthErr == nil && (ip4 != nil && ip4.IHL > 5 || hasExt) || fragment

	gpRoCE := bl != nil && udp != nil && udp.DstPort == bthlayer.Port
	if r.RoCE && bthLevel(r.Err) && !gpRoCE {
		if strict {
			return ""
		}
		return fmt.Sprintf("classifier: RoCE (%v), gopacket: no BTH (%v)", r.Err, decodeErr)
	}
	if !gpRoCE || lenient && !(r.RoCE && bthLevel(r.Err)) {
		return ""
	}
	if decodeErr != nil && bthErr == nil {
		return fmt.Sprintf("gopacket error after the BTH: %v", decodeErr)
	}
	if !r.RoCE {
		return fmt.Sprintf("gopacket decoded a BTH, classifier says not RoCE (%v)", r.Err)
	}
	ok := false
	for _, m := range bthReasons {
		if m.err == bthErr {
			for _, x := range m.reasons {
				ok = ok || x == r.Err
			}
		}
	}
	if !ok {
		return fmt.Sprintf("classifier %v, gopacket %v", r.Err, bthErr)
	}
	if len(bl.Contents) < 12 {
		return ""
	}
	return compareFields(frame, &r, bl, tags, ip4, ip6, pkt)
}

func compareFields(frame []byte, r *roce.Result, bl *bthlayer.BTH, tags []*layers.Dot1Q,
	ip4 *layers.IPv4, ip6 *layers.IPv6, pkt gopacket.Packet) string {
	type pair struct {
		what     string
		ours, gp any
	}
	ps := []pair{
		{"opcode", uint8(r.Opcode), bl.Opcode},
		{"se", r.SE, bl.SolicitedEvent},
		{"migreq", r.MigReq, bl.MigReq},
		{"pad", r.PadCount, bl.PadCount},
		{"tver", r.TVer, bl.TVer},
		{"pkey", r.PKey, bl.PKey},
		{"fecn", r.FECN, bl.FECN},
		{"becn", r.BECN, bl.BECN},
		{"destqp", r.DestQP, bl.DestQP},
		{"ackreq", r.AckReq, bl.AckReq},
		{"psn", r.PSN, bl.PSN},
		{"cnp", r.CNP, bl.IsCNP()},
		{"transport", r.Transport.String(), map[bool]string{true: "VENDOR", false: bl.Service}[bl.Service == "Reserved"]},
		{"tagged", r.Tagged, len(tags) > 0},
	}
	if len(tags) > 0 {
		in := tags[len(tags)-1]
		ps = append(ps, pair{"pcp", r.PCP, in.Priority}, pair{"vid", r.VID, in.VLANIdentifier})
	}
	if ip4 != nil {
		ps = append(ps, pair{"ipver", r.IPVersion, uint8(4)}, pair{"dscp", r.DSCP, ip4.TOS >> 2}, pair{"ecn", r.ECN, ip4.TOS & 3})
	} else {
		ps = append(ps, pair{"ipver", r.IPVersion, uint8(6)}, pair{"dscp", r.DSCP, ip6.TrafficClass >> 2}, pair{"ecn", r.ECN, ip6.TrafficClass & 3})
	}
	if r.Err == roce.ReasonNone || r.Err == roce.ErrBadICRC {
		ext, has := roce.BTH(frame[r.BTH : int(r.ICRCOff)+4]).ExtFields()
		gh := ext2mask(bl)
		ps = append(ps,
			pair{"payload", int(r.PayloadLen), len(bl.Payload)},
			pair{"icrc carried", binary.LittleEndian.Uint32(frame[r.ICRCOff:]), bl.ICRC},
			pair{"ext mask", has, gh},
			pair{"aeth", [2]any{r.HasAETH, uint8(r.AETH)}, [2]any{bl.HasAETH, bl.AETH.Syndrome}},
			pair{"ext", ext, gpExt(bl)},
		)
		res, err := bthlayer.VerifyICRC(pkt)
		if err != nil {
			return "VerifyICRC: " + err.Error()
		}
		ps = append(ps, pair{"icrc ok", r.ICRC == roce.ICRCOK, res.OK()})
	}
	for _, p := range ps {
		if p.ours != p.gp {
			return fmt.Sprintf("%s: classifier %v, gopacket %v", p.what, p.ours, p.gp)
		}
	}
	return ""
}

func ext2mask(b *bthlayer.BTH) roce.ExtMask {
	var m roce.ExtMask
	for _, x := range []struct {
		has bool
		h   roce.ExtMask
	}{
		{b.HasRDETH, roce.ExtRDETH}, {b.HasDETH, roce.ExtDETH}, {b.HasXRCETH, roce.ExtXRCETH},
		{b.HasFETH, roce.ExtFETH}, {b.HasRETH, roce.ExtRETH}, {b.HasAtomicETH, roce.ExtAtomicETH},
		{b.HasAETH, roce.ExtAETH}, {b.HasAtomicAckETH, roce.ExtAtomicAckETH},
		{b.HasImmDt, roce.ExtImmDt}, {b.HasIETH, roce.ExtIETH},
	} {
		if x.has {
			m |= x.h
		}
	}
	return m
}

func gpExt(b *bthlayer.BTH) roce.ExtFields {
	return roce.ExtFields{
		EEContext: b.RDETH.EEContext, QKey: b.DETH.QKey, SrcQP: b.DETH.SrcQP, SRQ: b.XRCETH.SRQ,
		FlushSel: b.FETH.SelectivityLevel, FlushPlacement: b.FETH.PlacementType,
		VA: b.RETH.VA, RKey: b.RETH.RKey, DMALength: b.RETH.DMALength,
		AtomicVA: b.AtomicETH.VA, AtomicRKey: b.AtomicETH.RKey, SwapAdd: b.AtomicETH.SwapAdd,
		Compare: b.AtomicETH.Compare, Syndrome: roce.AETHSyndrome(b.AETH.Syndrome), MSN: b.AETH.MSN,
		OrigRemoteData: b.AtomicAckETH.OrigRemoteData, Imm: b.ImmDt, InvRKey: b.IETH.RKey,
	}
}

func allFrames(tb testing.TB) (names []string, frames [][]byte) {
	// Captures when present; the generated frames always.
	for i, f := range rocetest.CaptureFrames() {
		names = append(names, fmt.Sprintf("capture#%d", i+1))
		frames = append(frames, f)
	}
	for i, f := range rocetest.ReadPcap(tb, "../testdata/scapy_corpus.pcap") {
		names = append(names, fmt.Sprintf("scapy#%d", i+1))
		frames = append(frames, f)
	}
	for _, c := range rocetest.Corpus() {
		names = append(names, c.Name)
		frames = append(frames, c.Frame)
	}
	return names, frames
}

// TestAgree: the classifier and the gopacket decode agree on every frame
// of every capture, the scapy corpus and the builder corpus, and both
// decode the RoCE frames among them without error.
func TestAgree(t *testing.T) {
	names, frames := allFrames(t)
	roceFrames := 0
	for i, f := range frames {
		if d := disagreement(f); d != "" {
			t.Errorf("%s: %s", names[i], d)
		}
		pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		if pkt.Layer(bthlayer.LayerTypeBTH) != nil && pkt.ErrorLayer() == nil {
			roceFrames++
		}
	}
	if roceFrames < 2800 {
		t.Errorf("gopacket decoded only %d RoCE frames", roceFrames)
	}
}

// TestAgreeMutations runs the agreement over broken variants of every
// corpus frame: each header byte flipped, lengths cut.
func TestAgreeMutations(t *testing.T) {
	_, frames := allFrames(t)
	n := 0
	for _, f := range frames[:len(frames):len(frames)] {
		if len(f) > 200 {
			continue
		}
		for i := 12; i < len(f) && i < 96; i++ {
			for _, x := range []byte{0x01, 0x10, 0x80, 0xff} {
				g := append([]byte(nil), f...)
				g[i] ^= x
				if d := disagreement(g); d != "" {
					t.Fatalf("byte %d ^ %#x of % x: %s", i, x, f, d)
				}
				n++
			}
		}
		for cut := 1; cut < 40 && cut < len(f); cut += 3 {
			if d := disagreement(f[:len(f)-cut]); d != "" {
				t.Fatalf("cut %d of % x: %s", cut, f, d)
			}
		}
		if testing.Short() && n > 20000 {
			break
		}
	}
}

func FuzzAgree(f *testing.F) {
	for _, fr := range rocetest.CaptureFrames() {
		f.Add(fr)
	}
	for _, c := range rocetest.Corpus() {
		f.Add(c.Frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		if d := disagreement(frame); d != "" {
			t.Fatal(d)
		}
	})
}
