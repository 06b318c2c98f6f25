// Package cbpf runs classic BPF programs (the filters tcpdump and libpcap
// compile "udp dst port 4791" into) over a packet's bytes, in pure Go:
// one switch on the instruction's code, no allocation, no interface, so a
// capture filter can run on a worker's packets. Programs come from
// libpcap's compiler (dpdk.CompileBPF); Check refuses what Run cannot
// run safely.
package cbpf

import (
	"encoding/binary"
	"fmt"
)

// Insn is one instruction, as struct bpf_insn.
type Insn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// Instruction classes and fields (linux/filter.h, pcap/bpf.h).
const (
	clsLD   = 0x00
	clsLDX  = 0x01
	clsST   = 0x02
	clsSTX  = 0x03
	clsALU  = 0x04
	clsJMP  = 0x05
	clsRET  = 0x06
	clsMISC = 0x07

	szW = 0x00
	szH = 0x08
	szB = 0x10

	modeIMM = 0x00
	modeABS = 0x20
	modeIND = 0x40
	modeMEM = 0x60
	modeLEN = 0x80
	modeMSH = 0xa0

	srcK = 0x00
	srcX = 0x08

	memWords = 16
)

// Check verifies that p is a program Run can execute: not empty, ending in
// a return, every jump forward and inside the program, every scratch
// memory index below 16, no division by a constant 0 or shift by a
// constant of 32 or more, and only the instructions classic BPF defines.
func Check(p []Insn) error {
	if len(p) == 0 || len(p) > 4096 {
		return fmt.Errorf("cbpf: a program of %d instructions (1..4096)", len(p))
	}
	for i, in := range p {
		c := in.Code
		if c > 0xff || !known[c] {
			return fmt.Errorf("cbpf: instruction %d: unknown code %#x", i, c)
		}
		switch c & 0x07 {
		case clsLD, clsLDX:
			switch c & 0xe0 {
			case modeMEM:
				if in.K >= memWords {
					return fmt.Errorf("cbpf: instruction %d: scratch word %d", i, in.K)
				}
			case modeIMM, modeABS, modeIND, modeLEN, modeMSH:
			default:
				return fmt.Errorf("cbpf: instruction %d: load mode %#x", i, c&0xe0)
			}
		case clsST, clsSTX:
			if in.K >= memWords {
				return fmt.Errorf("cbpf: instruction %d: scratch word %d", i, in.K)
			}
		case clsALU:
			op := c & 0xf0
			if op > 0xa0 && op != 0xc0 {
				return fmt.Errorf("cbpf: instruction %d: ALU op %#x", i, op)
			}
			if (op == 0x30 || op == 0x90) && c&srcX == 0 && in.K == 0 {
				return fmt.Errorf("cbpf: instruction %d: division by 0", i)
			}
			if (op == 0x60 || op == 0x70) && c&srcX == 0 && in.K >= 32 {
				return fmt.Errorf("cbpf: instruction %d: shift by %d", i, in.K) // as libpcap's bpf_validate
			}
		case clsJMP:
			if c&0xf0 == 0x00 { // ja
				if uint64(i)+1+uint64(in.K) >= uint64(len(p)) {
					return fmt.Errorf("cbpf: instruction %d: jump out of the program", i)
				}
			} else if i+1+int(max(in.Jt, in.Jf)) >= len(p) || c&0xf0 > 0x40 {
				return fmt.Errorf("cbpf: instruction %d: bad conditional jump", i)
			}
		case clsRET, clsMISC:
		}
	}
	if c := p[len(p)-1].Code & 0x07; c != clsRET {
		return fmt.Errorf("cbpf: the program does not end in a return")
	}
	return nil
}

// known holds the codes Run executes: the instructions of classic BPF.
var known = func() (k [256]bool) {
	for _, c := range []uint16{
		clsLD | szW | modeABS, clsLD | szH | modeABS, clsLD | szB | modeABS,
		clsLD | szW | modeIND, clsLD | szH | modeIND, clsLD | szB | modeIND,
		clsLD | szW | modeLEN, clsLD | modeIMM, clsLD | modeMEM,
		clsLDX | szW | modeIMM, clsLDX | szW | modeMEM, clsLDX | szW | modeLEN, clsLDX | szB | modeMSH,
		clsST, clsSTX,
		clsJMP | 0x00, clsRET | srcK, clsRET | 0x10, clsMISC | 0x00, clsMISC | 0x80,
		clsALU | 0x80,
	} {
		k[c] = true
	}
	for op := uint16(0x00); op <= 0xa0; op += 0x10 {
		if op != 0x80 {
			k[clsALU|op|srcK], k[clsALU|op|srcX] = true, true
		}
	}
	for op := uint16(0x10); op <= 0x40; op += 0x10 {
		k[clsJMP|op|srcK], k[clsJMP|op|srcX] = true, true
	}
	return k
}()

// Run executes p (which Check accepted) over pkt and returns what it
// returns: 0 rejects the packet, anything else accepts it (libpcap's
// filters return the snap length). A load beyond the packet rejects it,
// as the kernel's interpreter does.
func Run(p []Insn, pkt []byte) uint32 {
	var a, x uint32
	var mem [memWords]uint32
	n := uint32(len(pkt))
	for pc := 0; pc < len(p); pc++ {
		in := &p[pc]
		switch in.Code {
		// loads into A
		case clsLD | szW | modeABS:
			if in.K > n || n-in.K < 4 {
				return 0
			}
			a = binary.BigEndian.Uint32(pkt[in.K:])
		case clsLD | szH | modeABS:
			if in.K > n || n-in.K < 2 {
				return 0
			}
			a = uint32(binary.BigEndian.Uint16(pkt[in.K:]))
		case clsLD | szB | modeABS:
			if in.K >= n {
				return 0
			}
			a = uint32(pkt[in.K])
		case clsLD | szW | modeIND:
			k := x + in.K
			if k < x || k > n || n-k < 4 {
				return 0
			}
			a = binary.BigEndian.Uint32(pkt[k:])
		case clsLD | szH | modeIND:
			k := x + in.K
			if k < x || k > n || n-k < 2 {
				return 0
			}
			a = uint32(binary.BigEndian.Uint16(pkt[k:]))
		case clsLD | szB | modeIND:
			k := x + in.K
			if k < x || k >= n {
				return 0
			}
			a = uint32(pkt[k])
		case clsLD | szW | modeLEN:
			a = n
		case clsLD | modeIMM:
			a = in.K
		case clsLD | modeMEM:
			a = mem[in.K&(memWords-1)]
		// loads into X
		case clsLDX | szW | modeIMM:
			x = in.K
		case clsLDX | szW | modeMEM:
			x = mem[in.K&(memWords-1)]
		case clsLDX | szW | modeLEN:
			x = n
		case clsLDX | szB | modeMSH:
			if in.K >= n {
				return 0
			}
			x = uint32(pkt[in.K]&0x0f) << 2
		case clsST:
			mem[in.K&(memWords-1)] = a
		case clsSTX:
			mem[in.K&(memWords-1)] = x
		// ALU
		case clsALU | 0x00 | srcK:
			a += in.K
		case clsALU | 0x00 | srcX:
			a += x
		case clsALU | 0x10 | srcK:
			a -= in.K
		case clsALU | 0x10 | srcX:
			a -= x
		case clsALU | 0x20 | srcK:
			a *= in.K
		case clsALU | 0x20 | srcX:
			a *= x
		case clsALU | 0x30 | srcK:
			a /= in.K // Check refused K = 0
		case clsALU | 0x30 | srcX:
			if x == 0 {
				return 0
			}
			a /= x
		case clsALU | 0x40 | srcK:
			a |= in.K
		case clsALU | 0x40 | srcX:
			a |= x
		case clsALU | 0x50 | srcK:
			a &= in.K
		case clsALU | 0x50 | srcX:
			a &= x
		case clsALU | 0x60 | srcK:
			a <<= in.K & 31 // Check refused K >= 32
		case clsALU | 0x60 | srcX:
			a <<= x // 0 from 32 on, as libpcap's bpf_filter
		case clsALU | 0x70 | srcK:
			a >>= in.K & 31
		case clsALU | 0x70 | srcX:
			a >>= x
		case clsALU | 0x80:
			a = -a
		case clsALU | 0x90 | srcK:
			a %= in.K
		case clsALU | 0x90 | srcX:
			if x == 0 {
				return 0
			}
			a %= x
		case clsALU | 0xa0 | srcK:
			a ^= in.K
		case clsALU | 0xa0 | srcX:
			a ^= x
		// jumps
		case clsJMP | 0x00:
			pc += int(in.K)
		case clsJMP | 0x10 | srcK:
			pc += jump(a == in.K, in)
		case clsJMP | 0x10 | srcX:
			pc += jump(a == x, in)
		case clsJMP | 0x20 | srcK:
			pc += jump(a > in.K, in)
		case clsJMP | 0x20 | srcX:
			pc += jump(a > x, in)
		case clsJMP | 0x30 | srcK:
			pc += jump(a >= in.K, in)
		case clsJMP | 0x30 | srcX:
			pc += jump(a >= x, in)
		case clsJMP | 0x40 | srcK:
			pc += jump(a&in.K != 0, in)
		case clsJMP | 0x40 | srcX:
			pc += jump(a&x != 0, in)
		// returns
		case clsRET | srcK:
			return in.K
		case clsRET | 0x10: // A
			return a
		// misc
		case clsMISC | 0x00: // tax
			x = a
		case clsMISC | 0x80: // txa
			a = x
		default:
			return 0 // an instruction Check would have refused
		}
	}
	return 0
}

func jump(cond bool, in *Insn) int {
	if cond {
		return int(in.Jt)
	}
	return int(in.Jf)
}
