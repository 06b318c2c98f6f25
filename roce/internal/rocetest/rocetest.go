// Package rocetest builds the frame corpus and finds the shared captures
// that the roce and bthlayer tests both use.
package rocetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"roce-fwd/pcapio"
	"roce-fwd/roce"
)

// captureDirs is where shared/ sits relative to roce/ and its subpackages.
var captureDirs = []string{
	"../../shared/testdata/captures",
	"../../../shared/testdata/captures",
	"../../../../shared/testdata/captures",
}

// CapturesDir returns the shared capture directory seen from the calling
// test's package directory, or skips the test when it is absent.
func CapturesDir(tb testing.TB) string {
	for _, d := range captureDirs {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	tb.Skip("shared/testdata/captures not found")
	return ""
}

// CaptureFrames returns every frame of every shared capture, or nothing
// when the directory is absent.
func CaptureFrames() [][]byte {
	var out [][]byte
	for _, d := range captureDirs {
		paths, _ := filepath.Glob(filepath.Join(d, "*.pcap"))
		for _, p := range paths {
			frames, err := pcapio.ReadFile(p)
			if err != nil {
				continue
			}
			out = append(out, frames...)
		}
		if len(paths) > 0 {
			break
		}
	}
	return out
}

// Capture is one pcap file's frames.
type Capture struct {
	Name   string
	Frames [][]byte
}

// Captures reads every pcap in the shared capture directory.
func Captures(tb testing.TB) []Capture {
	dir := CapturesDir(tb)
	paths, err := filepath.Glob(filepath.Join(dir, "*.pcap"))
	if err != nil || len(paths) == 0 {
		tb.Skip("no captures")
	}
	var out []Capture
	for _, p := range paths {
		out = append(out, Capture{Name: filepath.Base(p), Frames: ReadPcap(tb, p)})
	}
	return out
}

// ReadPcap returns the frames of an Ethernet pcap file.
func ReadPcap(tb testing.TB, path string) [][]byte {
	frames, err := pcapio.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return frames
}

// Case is one generated frame and the spec it came from.
type Case struct {
	Name  string
	Spec  roce.FrameSpec
	Frame []byte
}

// TagModes are the tag stacks every opcode is built with.
var TagModes = []struct {
	Name string
	Tags []roce.VLANTag
}{
	{"untagged", nil},
	{"vlan", []roce.VLANTag{{PCP: 3, VID: 100}}},
	{"qinq", []roce.VLANTag{{TPID: roce.EtherTypeQinQ, PCP: 1, VID: 2000}, {PCP: 5, VID: 42}}},
	{"qinq9100", []roce.VLANTag{{TPID: roce.EtherTypeQinQ9100, PCP: 7, DEI: true, VID: 4095}, {PCP: 2, VID: 1}}},
}

// PayloadLen picks a payload size that suits the opcode, varied by seed so
// that every pad count shows up.
func PayloadLen(op roce.Opcode, seed int) int {
	switch {
	case op == roce.OpCNP:
		return 16 // reserved bytes
	case op&0x1f == roce.OpAtomicWrite:
		return 8
	}
	switch op & 0x1f {
	case roce.OpReadRequest, roce.OpAck, roce.OpAtomicAck, roce.OpCmpSwap,
		roce.OpFetchAdd, roce.OpResync, roce.OpFlush:
		return 0
	}
	return 1 + seed%11
}

// DefinedOpcodes lists every opcode the spec defines.
func DefinedOpcodes() []roce.Opcode {
	var out []roce.Opcode
	for op := 0; op < 256; op++ {
		if roce.Opcode(op).Defined() {
			out = append(out, roce.Opcode(op))
		}
	}
	return out
}

// Spec fills a spec for op with distinctive field values.
func Spec(op roce.Opcode, seed int) roce.FrameSpec {
	pl := make([]byte, PayloadLen(op, seed))
	for i := range pl {
		pl[i] = byte(seed + i)
	}
	s := roce.FrameSpec{
		Dst:     roce.MAC{0x02, 0, 0, 0, 0, 2},
		Src:     roce.MAC{0x02, 0, 0, 0, 0, 1},
		SrcPort: uint16(49152 + seed%1000),
		DSCP:    26,
		ECN:     roce.ECNECT0,
		BTH: roce.BTHFields{
			Opcode: op, SE: seed&1 != 0, MigReq: seed&2 != 0, PKey: 0xffff,
			FECN: seed&4 != 0, BECN: op == roce.OpCNP || seed&8 != 0,
			DestQP: uint32((0x10000 + seed*7919) & 0xffffff), AckReq: seed&16 != 0,
			PSN: uint32(seed * 104729 & 0xffffff),
		},
		Ext: roce.ExtFields{
			EEContext: 0xabcdef, QKey: 0x80010000, SrcQP: 0x000123 + uint32(seed),
			SRQ: 0x00beef, FlushSel: 1, FlushPlacement: 2,
			VA: 0x7fee260fb000 + uint64(seed), RKey: 0x2b8, DMALength: 65536,
			AtomicVA: 0x1122334455667788, AtomicRKey: 0x99aabbcc, SwapAdd: 42, Compare: 7,
			Syndrome: roce.AETHSyndrome(seed * 37 & 0x7f), MSN: uint32(seed),
			OrigRemoteData: 0x0102030405060708, Imm: 0xdeadbeef, InvRKey: 0xcafe,
		},
		Payload: pl,
	}
	if op == roce.OpCNP {
		s.DSCP = 48
		s.SrcPort = 0
	}
	return s
}

func encode(s roce.FrameSpec) []byte {
	b := make([]byte, s.Len())
	if _, err := s.Encode(b); err != nil {
		panic(err)
	}
	return b
}

// Corpus is every defined opcode over IPv4 and IPv6, every tag mode and
// every ECN codepoint, plus frames with IPv4 options, IPv6 extension
// headers, ICMP-size padding and large payloads.
func Corpus() []Case {
	var out []Case
	seed := 0
	for _, op := range DefinedOpcodes() {
		for _, v6 := range []bool{false, true} {
			for _, tm := range TagModes {
				for ecn := uint8(0); ecn < 4; ecn++ {
					s := Spec(op, seed)
					seed++
					s.IPv6 = v6
					s.Tags = tm.Tags
					s.ECN = ecn
					s.FlowLabel = uint32(seed * 31 & 0xfffff)
					s.UDPChecksum = uint16(seed * 13)
					ipv := "ipv4"
					if v6 {
						ipv = "ipv6"
					}
					out = append(out, Case{
						Name: fmt.Sprintf("%02x-%s-%s-ecn%d", uint8(op), ipv, tm.Name, ecn),
						Spec: s, Frame: encode(s),
					})
				}
			}
		}
	}
	for _, c := range Specials() {
		c.Frame = encode(c.Spec)
		out = append(out, c)
	}
	return out
}

// Specials are frames that exercise options, extension headers and sizes.
func Specials() []Case {
	var out []Case
	add := func(name string, s roce.FrameSpec) { out = append(out, Case{Name: name, Spec: s}) }

	s := Spec(roce.OpRC|roce.OpSendMiddle, 3)
	s.Payload = nil
	add("short-padded-ipv4", s) // 58 bytes before Ethernet padding

	s = Spec(roce.OpRC|roce.OpAck, 5)
	s.IPv4Options = []byte{0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00} // router alert, NOPs, EOL
	add("ipv4-options", s)

	s = Spec(roce.OpRC|roce.OpWriteOnly, 9)
	s.IPv4Options = make([]byte, 40)
	s.IPv4Options[0] = 0x01
	add("ipv4-options-max", s)

	s = Spec(roce.OpRC|roce.OpSendOnly, 6)
	s.IPv6 = true
	s.IPv6Ext = []roce.IPv6ExtSpec{
		{Proto: roce.ProtoHopByHop, Data: []byte{5, 2, 0, 0, 1, 0}},
		{Proto: roce.ProtoDestOpts, Data: make([]byte, 14)},
		{Proto: roce.ProtoRouting, Data: append([]byte{2, 0, 0, 0, 0, 0}, make([]byte, 16)...)}, // type 2, spent
		{Proto: roce.ProtoFragment, Data: []byte{0, 0, 0, 0, 0, 7}},                             // atomic fragment
	}
	add("ipv6-ext-chain", s)

	s = Spec(roce.OpUD|roce.OpSendOnly, 7)
	s.IPv6 = true
	s.IPv6Ext = []roce.IPv6ExtSpec{{Proto: roce.ProtoDestOpts, Data: make([]byte, 6+8*20)}}
	add("ipv6-long-destopts", s)

	for _, n := range []int{64, 255, 1024, 4096} {
		s = Spec(roce.OpRC|roce.OpWriteMiddle, n)
		s.Payload = make([]byte, n)
		for i := range s.Payload {
			s.Payload[i] = byte(i * 7)
		}
		add(fmt.Sprintf("payload-%d-ipv4", n), s)
		s.IPv6 = true
		s.Tags = TagModes[2].Tags
		add(fmt.Sprintf("payload-%d-ipv6-qinq", n), s)
	}
	return out
}
