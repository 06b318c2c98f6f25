package bthlayer_test

import (
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"roce-fwd/roce"
	"roce-fwd/roce/bthlayer"
	"roce-fwd/roce/internal/rocetest"
)

func TestNewPacketCaptures(t *testing.T) {
	counts := map[string]map[uint8]int{}
	for _, c := range rocetest.Captures(t) {
		counts[c.Name] = map[uint8]int{}
		for i, f := range c.Frames {
			pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			b, _ := pkt.Layer(bthlayer.LayerTypeBTH).(*bthlayer.BTH)
			if b == nil {
				continue
			}
			if el := pkt.ErrorLayer(); el != nil {
				t.Errorf("%s #%d: %v", c.Name, i+1, el.Error())
			}
			counts[c.Name][b.Opcode]++
			res, err := bthlayer.VerifyICRC(pkt)
			if err != nil || !res.OK() {
				t.Errorf("%s #%d: ICRC %+v %v", c.Name, i+1, res, err)
			}
			if c.Name == "pcapplusplus_InfiniBandPacket.pcap" {
				if !b.HasRETH || b.RETH.VA != 0x7fee260fb000 || b.RETH.RKey != 0x2b8 || b.RETH.DMALength != 65536 ||
					b.Service != "RC" || b.Operation != "RDMA READ Request" {
					t.Errorf("READ Request: %+v", b)
				}
			}
			if c.Name == "scapy_uts_cx4lx_cnp.pcap" && (!b.IsCNP() || !b.BECN || len(b.Payload) != 16) {
				t.Errorf("CNP: %+v", b)
			}
			if b.HasAETH && b.AETH.SyndromeKind() != bthlayer.SyndromeACK {
				t.Errorf("%s #%d: %v", c.Name, i+1, b.AETH)
			}
		}
	}
	if got := counts["oferby_proxy_roce.pcap"]; got[0] != 33 || got[3] != 33 || got[5] != 2 || got[17] != 37 {
		t.Errorf("oferby opcodes %v", got)
	}
	if got := counts["montybeatnik_test.pcap"]; got[100] != 5 || got[14] != 2 || got[10] != 1 {
		t.Errorf("montybeatnik opcodes %v", got)
	}
}

// TestDecodingLayerParser decodes the same frames through the
// DecodingLayer path and checks it agrees with NewPacket.
func TestDecodingLayerParser(t *testing.T) {
	var (
		eth     layers.Ethernet
		dot1q   layers.Dot1Q
		ip4     layers.IPv4
		ip6     layers.IPv6
		ext     layers.IPv6ExtensionSkipper
		udp     layers.UDP
		bth     bthlayer.BTH
		payload gopacket.Payload
	)
	p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip4, &ip6, &ext, &udp, &bth, &payload)
	var decoded []gopacket.LayerType
	n := 0
	for _, c := range rocetest.Corpus() {
		if len(c.Spec.Tags) > 1 || len(c.Spec.IPv6Ext) > 0 {
			continue // one Dot1Q decoder, no extension headers in this parser
		}
		if err := p.DecodeLayers(c.Frame, &decoded); err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if decoded[len(decoded)-1] != bthlayer.LayerTypeBTH && decoded[len(decoded)-1] != gopacket.LayerTypePayload {
			t.Fatalf("%s: layers %v", c.Name, decoded)
		}
		pkt := gopacket.NewPacket(c.Frame, layers.LayerTypeEthernet, gopacket.Default)
		ref := pkt.Layer(bthlayer.LayerTypeBTH).(*bthlayer.BTH)
		if bth.Opcode != ref.Opcode || bth.DestQP != ref.DestQP || bth.PSN != ref.PSN ||
			bth.ICRC != ref.ICRC || len(bth.Payload) != len(ref.Payload) || bth.AETH != ref.AETH ||
			bth.RETH != ref.RETH || bth.DETH != ref.DETH || bth.ImmDt != ref.ImmDt {
			t.Fatalf("%s: parser %+v, NewPacket %+v", c.Name, bth, ref)
		}
		if uint8(c.Spec.BTH.Opcode) != bth.Opcode {
			t.Fatalf("%s: opcode %#x", c.Name, bth.Opcode)
		}
		n++
	}
	if n < 1000 {
		t.Fatalf("only %d frames", n)
	}
}

func TestTPID9100(t *testing.T) {
	s := rocetest.Spec(roce.OpRC|roce.OpAck, 1)
	s.Tags = rocetest.TagModes[3].Tags
	f := make([]byte, s.Len())
	s.Encode(f)
	pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
	if pkt.Layer(bthlayer.LayerTypeBTH) == nil || len(pkt.Layers()) < 5 {
		t.Fatalf("layers %v", pkt.Layers())
	}
}

func TestLayerErrors(t *testing.T) {
	base := func(op roce.Opcode) []byte {
		s := rocetest.Spec(op, 4)
		f := make([]byte, s.Len())
		s.Encode(f)
		return f[42:]
	}
	var b bthlayer.BTH
	df := gopacket.NilDecodeFeedback
	for _, c := range []struct {
		name string
		data []byte
		err  error
	}{
		{"ok", base(roce.OpRC | roce.OpSendOnly), nil},
		{"short", base(roce.OpRC | roce.OpAck)[:11], bthlayer.ErrTruncatedBTH},
		{"no icrc", base(roce.OpRC | roce.OpAck)[:14], bthlayer.ErrNoICRC},
		{"tver", func() []byte { d := base(roce.OpRC | roce.OpAck); d[1] |= 2; return d }(), bthlayer.ErrTVer},
		{"reserved", func() []byte { d := base(roce.OpRC | roce.OpAck); d[0] = 0x1e; return d }(), bthlayer.ErrReservedOpcode},
		{"short ext", func() []byte { d := base(roce.OpRC | roce.OpAck); d[0] = 0x13; return d }(), bthlayer.ErrShortHeaders},
		{"pad", func() []byte { d := base(roce.OpRC | roce.OpAck); d[1] |= 0x10; return d }(), bthlayer.ErrPad},
	} {
		if err := b.DecodeFromBytes(c.data, df); err != c.err {
			t.Errorf("%s: %v, want %v", c.name, err, c.err)
		}
	}
	for syn, want := range map[uint8]string{
		6: "ACK credit 6", 0x2e: "RNR NAK timer 14", 0x61: "NAK invalid request", 0x7f: "NAK code 31", 0x40: "reserved syndrome 0x40",
	} {
		if got := (bthlayer.AETH{Syndrome: syn}).String(); got != want {
			t.Errorf("%#x: %q", syn, got)
		}
	}
}
