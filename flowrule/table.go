package flowrule

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"

	"roce-fwd/roce"
)

// A frame is reduced to a key of nWords words that holds every matchable
// field at a fixed position; a rule is a mask and a value over that key
// plus range checks. Rules sharing a mask in a group form a tuple, an
// open-addressing hash table keyed by the masked key (tuple space search):
// a lookup costs one probe per distinct mask, not one comparison per rule.
const nWords = 9

type key [nWords]uint64

// Key words. IPv4 and IPv6 share words 3-7: the presence flags tell them
// apart.
const (
	wEthDst = 0 // dst<<16 | type
	wEthSrc = 1 // src<<16 | flags
	wVLAN   = 2 // tci0<<48 | inner0<<32 | tci1<<16 | inner1
	wIP     = 3 // (tos | vtc_flow)<<32 | ttl<<24 | proto<<16
	wSrc    = 4 // source address, 2 words (IPv4: top 32 bits of the first)
	wDst    = 6 // destination address, 2 words
	wL4     = 8 // sport<<48 | dport<<32 | opcode<<24 | dst_qp
)

// Presence flags, in the low bits of wEthSrc.
const (
	fEth  = 1 << iota // an Ethernet header
	fTag1             // at least one tag (has_vlan)
	fTag2             // at least two (first tag's has_more_vlan)
	fTag3             // more than two (second tag's has_more_vlan)
	fIPv4
	fIPv6
	fUDP
	fTCP
	fBTH
)

var presence = [numItemTypes]uint64{ItemEth: fEth, ItemIPv4: fIPv4, ItemIPv6: fIPv6, ItemUDP: fUDP, ItemTCP: fTCP, ItemIBBTH: fBTH}

// kpos is where a struct field sits in the key.
type kpos struct {
	w     uint8
	shift uint8
	wide  bool // a 128-bit address over words w and w+1
}

// keyPos maps structFields[t][i] of the vlan-th vlan item to the key.
func keyPos(t ItemType, vlan, i int) kpos {
	switch t {
	case ItemEth:
		return [...]kpos{{wEthDst, 16, false}, {wEthSrc, 16, false}, {wEthDst, 0, false}, {wEthSrc, 1, false}}[i]
	case ItemVLAN:
		return [...]kpos{{wVLAN, uint8(48 - 32*vlan), false}, {wVLAN, uint8(32 - 32*vlan), false}, {wEthSrc, uint8(2 + vlan), false}}[i]
	case ItemIPv4:
		return [...]kpos{{wIP, 32, false}, {wIP, 24, false}, {wIP, 16, false}, {wSrc, 32, false}, {wDst, 32, false}}[i]
	case ItemIPv6:
		return [...]kpos{{wIP, 32, false}, {wIP, 16, false}, {wIP, 24, false}, {wSrc, 0, true}, {wDst, 0, true}}[i]
	case ItemUDP, ItemTCP:
		return [...]kpos{{wL4, 48, false}, {wL4, 32, false}}[i]
	}
	return [...]kpos{{wL4, 24, false}, {wL4, 0, false}}[i] // ib_bth
}

// rangeCheck is one inclusive range over a key field, with bounds and mask
// at the field's key position (order is kept by the common shift).
type rangeCheck struct {
	w        uint8
	wide     bool
	m0, m1   uint64
	lo0, lo1 uint64
	hi0, hi1 uint64
}

func (c *rangeCheck) ok(k *key) bool {
	v0 := k[c.w] & c.m0
	if !c.wide {
		return v0 >= c.lo0 && v0 <= c.hi0
	}
	v1 := k[c.w+1] & c.m1
	return (v0 > c.lo0 || v0 == c.lo0 && v1 >= c.lo1) && (v0 < c.hi0 || v0 == c.hi0 && v1 <= c.hi1)
}

const (
	noJump   = -1 // the rule does not jump
	jumpMiss = -2 // it jumps to a group without rules
)

// cact is an action as Apply needs it.
type cact struct {
	typ   ActionType
	dscp  uint8
	id    uint32
	meter int32
}

type crule struct {
	rank      int32
	next      int32 // internal group index, noJump or jumpMiss
	never     bool  // contradictory pattern
	offloaded bool  // the NIC runs its actions (CompileOffloaded)
	acts      []cact
	ranges    []rangeCheck
	mask, val key
}

func (c *crule) inRange(k *key) bool {
	for i := range c.ranges {
		if !c.ranges[i].ok(k) {
			return false
		}
	}
	return true
}

type entry struct {
	hash     uint64
	key      key
	first, n int32 // rules sharing the key: chain[first:first+n], best first
}

type tuple struct {
	mask  key
	words []uint8 // words of mask that are not zero
	best  int32   // best rank of the tuple's rules
	slots []int32 // entry index + 1; 0 is empty
	smask uint64
	ents  []entry
	chain []int32
}

type group struct {
	id     uint32
	tuples []tuple // by best rank
}

type meterParams struct {
	alg                MeterAlgorithm
	cir, pir           uint64 // bytes/s: nano-bytes per ns
	cbs, ebs, pbs      uint64 // nano-bytes
	green, yellow, red ColorAction
}

// Table is a compiled, immutable rule set. Match and Apply may run on
// several goroutines at once, each with its own State.
type Table struct {
	rules  []Rule
	cr     []crule
	groups []group
	root   int32 // internal index of group 0, -1 without rules there
	meters []meterParams
}

// Rules returns the rules the table was compiled from; index i of Match
// and Apply is Rules()[i]. The slice is the table's: do not modify it.
func (t *Table) Rules() []Rule { return t.rules }

const hashSeed = 0x9e3779b97f4a7c15

func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>31
}

// Compile validates rules and builds a Table. Rule i keeps index i.
// Direction attributes (ingress, egress, transfer) are not looked at:
// compile one table per direction.
func Compile(rules []Rule) (*Table, error) {
	t := &Table{rules: append([]Rule(nil), rules...), cr: make([]crule, len(rules)), root: -1}
	if len(rules) > math.MaxInt32-1 {
		return nil, errors.New("flowrule: too many rules")
	}
	order := make([]int32, len(rules))
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(a, b int) bool {
		ra, rb := &rules[order[a]], &rules[order[b]]
		if ra.Priority != rb.Priority {
			return ra.Priority < rb.Priority
		}
		return ra.ID < rb.ID
	})
	for rank, i := range order {
		t.cr[i].rank = int32(rank)
	}

	gidx := map[uint32]int32{}
	for i := range rules {
		if _, ok := gidx[rules[i].Group]; !ok {
			gidx[rules[i].Group] = int32(len(t.groups))
			t.groups = append(t.groups, group{id: rules[i].Group})
		}
	}
	if g, ok := gidx[0]; ok {
		t.root = g
	}

	for i := range rules {
		r := &rules[i]
		if err := r.Validate(); err != nil {
			return nil, errors.New("flowrule: rule " + itoa(uint64(i)) + ": " + err.Error())
		}
		c := &t.cr[i]
		c.compilePattern(r)
		c.next = noJump
		for j := range r.Actions {
			a := &r.Actions[j]
			ca := cact{typ: a.Type, dscp: a.DSCP, id: a.ID, meter: -1}
			switch a.Type {
			case ActJump:
				c.next = jumpMiss
				if g, ok := gidx[a.Group]; ok {
					c.next = g
				}
			case ActMeter:
				ca.meter = int32(len(t.meters))
				t.meters = append(t.meters, newMeterParams(a.Meter))
			}
			c.acts = append(c.acts, ca)
		}
	}
	if err := t.checkJumps(); err != nil {
		return nil, err
	}

	members := make([][]int32, len(t.groups))
	for _, i := range order { // best first
		if !t.cr[i].never {
			g := gidx[rules[i].Group]
			members[g] = append(members[g], i)
		}
	}
	for g := range t.groups {
		t.groups[g].tuples = t.buildTuples(members[g])
	}
	return t, nil
}

// compilePattern turns the items into the rule's mask, value and ranges.
func (c *crule) compilePattern(r *Rule) {
	var need uint64
	vlan := 0
	for i := range r.Items {
		it := &r.Items[i]
		need |= presence[it.Type]
		if it.Type == ItemVLAN {
			need |= fTag1 << vlan
		}
		spec, mask, last, hasLast, ok := it.images()
		if ok {
			for j := range structFields[it.Type] {
				c.addField(&structFields[it.Type][j], keyPos(it.Type, vlan, j), &spec, &mask, &last, hasLast)
			}
		}
		if it.Type == ItemVLAN {
			vlan++
		}
	}
	// A header the pattern requires but one of its fields excludes.
	if c.mask[wEthSrc]&need&^c.val[wEthSrc] != 0 {
		c.never = true
	}
	c.mask[wEthSrc] |= need
	c.val[wEthSrc] |= need
}

func fieldWords(f *field, b *img) (hi, lo uint64) {
	if f.size == 16 {
		return binary.BigEndian.Uint64(b[f.off:]), binary.BigEndian.Uint64(b[f.off+8:])
	}
	return 0, getUint(b, f.off, f.size) & f.whole()
}

func (c *crule) addField(f *field, p kpos, spec, mask, last *img, hasLast bool) {
	sh, sl := fieldWords(f, spec)
	mh, ml := fieldWords(f, mask)
	lh, ll := fieldWords(f, last)
	sh, sl, lh, ll = sh&mh, sl&ml, lh&mh, ll&ml
	if hasLast && (lh > sh || lh == sh && ll > sl) {
		if f.bits == 1 {
			return // 0 to 1: any value of a one-bit field
		}
		rc := rangeCheck{w: p.w, wide: p.wide}
		if p.wide {
			rc.m0, rc.m1, rc.lo0, rc.lo1, rc.hi0, rc.hi1 = mh, ml, sh, sl, lh, ll
		} else {
			rc.m0, rc.lo0, rc.hi0 = ml<<p.shift, sl<<p.shift, ll<<p.shift
		}
		c.ranges = append(c.ranges, rc)
		return
	}
	if p.wide {
		c.mask[p.w] |= mh
		c.val[p.w] |= sh
		c.mask[p.w+1] |= ml
		c.val[p.w+1] |= sl
		return
	}
	c.mask[p.w] |= ml << p.shift
	c.val[p.w] |= sl << p.shift
}

func (t *Table) buildTuples(members []int32) []tuple {
	var tuples []tuple
	byMask := map[key]int{}
	byVal := []map[key]int32{}
	chains := [][][]int32{}
	for _, i := range members { // best first, so chains and bests come out sorted
		c := &t.cr[i]
		ti, ok := byMask[c.mask]
		if !ok {
			ti = len(tuples)
			byMask[c.mask] = ti
			tp := tuple{mask: c.mask, best: c.rank}
			for w := range c.mask {
				if c.mask[w] != 0 {
					tp.words = append(tp.words, uint8(w))
				}
			}
			tuples = append(tuples, tp)
			byVal = append(byVal, map[key]int32{})
			chains = append(chains, nil)
		}
		e, ok := byVal[ti][c.val]
		if !ok {
			e = int32(len(chains[ti]))
			byVal[ti][c.val] = e
			chains[ti] = append(chains[ti], nil)
			tp := &tuples[ti]
			tp.ents = append(tp.ents, entry{key: c.val, hash: tp.hash(&c.val)})
		}
		chains[ti][e] = append(chains[ti][e], i)
	}
	for ti := range tuples {
		tp := &tuples[ti]
		for e := range tp.ents {
			tp.ents[e].first = int32(len(tp.chain))
			tp.ents[e].n = int32(len(chains[ti][e]))
			tp.chain = append(tp.chain, chains[ti][e]...)
		}
		n := 4
		for n < 2*len(tp.ents) {
			n *= 2
		}
		tp.slots = make([]int32, n)
		tp.smask = uint64(n - 1)
		for e := range tp.ents {
			s := tp.ents[e].hash & tp.smask
			for tp.slots[s] != 0 {
				s = (s + 1) & tp.smask
			}
			tp.slots[s] = int32(e + 1)
		}
	}
	// Members came best first, so tuples were created in order of their
	// best rank already.
	return tuples
}

func (tp *tuple) hash(k *key) uint64 {
	h := uint64(hashSeed)
	for _, w := range tp.words {
		h = mix(h, k[w]&tp.mask[w])
	}
	return h
}

// checkJumps refuses jump loops and chains longer than MaxPath rules.
func (t *Table) checkJumps() error {
	n := len(t.groups)
	edges := make([][]int32, n)
	for i := range t.cr {
		if nx := t.cr[i].next; nx >= 0 {
			g := t.groupOf(i)
			edges[g] = append(edges[g], nx)
		}
	}
	const (
		unseen = iota
		active
		done
	)
	state := make([]uint8, n)
	depth := make([]int, n) // rules on the longest path starting in the group
	var visit func(g int32, path []uint32) error
	visit = func(g int32, path []uint32) error {
		path = append(path, t.groups[g].id)
		switch state[g] {
		case active:
			s := "flowrule: jump loop: group"
			for i, id := range path {
				if i > 0 {
					s += " ->"
				}
				s += " " + itoa(uint64(id))
			}
			return errors.New(s)
		case done:
			return nil
		}
		state[g] = active
		depth[g] = 1
		for _, nx := range edges[g] {
			if err := visit(nx, path); err != nil {
				return err
			}
			depth[g] = max(depth[g], depth[nx]+1)
		}
		state[g] = done
		return nil
	}
	for g := 0; g < n; g++ {
		if err := visit(int32(g), nil); err != nil {
			return err
		}
	}
	if t.root >= 0 && depth[t.root] > MaxPath {
		return errors.New("flowrule: jumps chain more than " + itoa(MaxPath) + " rules")
	}
	return nil
}

func (t *Table) groupOf(i int) int32 {
	for g := range t.groups {
		if t.groups[g].id == t.rules[i].Group {
			return int32(g)
		}
	}
	return -1
}

// Path is the rules a packet went through, jumping rules first.
type Path struct {
	N     int
	Rules [MaxPath]int32
}

// Match returns the index of the rule frame hits, or -1. r is the frame's
// roce.Classify result. Matching starts in group 0 and follows jump
// actions; a jump into a group where nothing matches is a miss (-1).
func (t *Table) Match(frame []byte, r *roce.Result) int {
	return t.MatchPath(frame, r, nil)
}

// MatchPath is Match that also records, when p is not nil, the rules the
// packet traversed (the jumping ones and the final one), for ApplyPath.
func (t *Table) MatchPath(frame []byte, r *roce.Result, p *Path) int {
	if p != nil {
		p.N = 0
	}
	g := t.root
	if g < 0 {
		return -1
	}
	var k key
	extract(frame, r, &k)
	for range MaxPath {
		idx := t.lookup(g, &k)
		if idx < 0 {
			return -1
		}
		if p != nil {
			p.Rules[p.N] = idx
			p.N++
		}
		nx := t.cr[idx].next
		if nx == noJump {
			return int(idx)
		}
		if nx < 0 {
			return -1
		}
		g = nx
	}
	return -1
}

func (t *Table) lookup(g int32, k *key) int32 {
	best, bestRank := int32(-1), int32(math.MaxInt32)
	tuples := t.groups[g].tuples
	for i := range tuples {
		tp := &tuples[i]
		if tp.best >= bestRank {
			break // tuples are by best rank: none further can win
		}
		h := tp.hash(k)
		for s := h & tp.smask; ; s = (s + 1) & tp.smask {
			e := tp.slots[s]
			if e == 0 {
				break
			}
			en := &tp.ents[e-1]
			if en.hash != h || !tp.equal(k, &en.key) {
				continue
			}
			for _, ri := range tp.chain[en.first : en.first+en.n] {
				c := &t.cr[ri]
				if c.rank >= bestRank {
					break
				}
				if len(c.ranges) == 0 || c.inRange(k) {
					best, bestRank = ri, c.rank
					break
				}
			}
			break
		}
	}
	return best
}

func (tp *tuple) equal(k, v *key) bool {
	for _, w := range tp.words {
		if k[w]&tp.mask[w] != v[w] {
			return false
		}
	}
	return true
}

func be16(b []byte) uint64 { return uint64(binary.BigEndian.Uint16(b)) }
func be32(b []byte) uint64 { return uint64(binary.BigEndian.Uint32(b)) }
func be48(b []byte) uint64 { return be16(b)<<32 | be32(b[2:]) }

// extract builds a frame's key from its bytes and Classify's result: the
// result says where each header is and what the IP header carries; the
// key's fields are read from the headers it located.
func extract(f []byte, r *roce.Result, k *key) {
	n := len(f)
	if n < roce.EthernetHeaderLen {
		return
	}
	flags := uint64(fEth)
	k[wEthDst] = be48(f[roce.EthernetDstOffset:])<<16 | be16(f[roce.EthernetTypeOffset:])
	k[wEthSrc] = be48(f[roce.EthernetSrcOffset:]) << 16
	const tag1 = roce.EthernetHeaderLen
	const tag2 = tag1 + roce.VLANTagLen
	if r.Tags >= 1 && n >= tag1+roce.VLANTagLen {
		flags |= fTag1
		k[wVLAN] = be16(f[tag1+roce.VLANTCIOffset:])<<48 | be16(f[tag1+roce.VLANTypeOffset:])<<32
		if r.Tags >= 2 && n >= tag2+roce.VLANTagLen {
			flags |= fTag2
			k[wVLAN] |= be16(f[tag2+roce.VLANTCIOffset:])<<16 | be16(f[tag2+roce.VLANTypeOffset:])
			if r.Err == roce.ErrTooManyTags {
				flags |= fTag3
			}
		}
	}
	l3 := int(r.L3)
	switch r.IPVersion {
	case 4:
		if l3 == 0 || l3+roce.IPv4MinHeaderLen > n {
			break
		}
		ip := roce.IPv4(f[l3 : l3+roce.IPv4MinHeaderLen])
		flags |= fIPv4
		k[wIP] = uint64(ip.TOS())<<32 | uint64(ip.TTL())<<24 | uint64(r.L4Proto)<<16
		k[wSrc] = be32(ip[roce.IPv4SrcOffset:]) << 32
		k[wDst] = be32(ip[roce.IPv4DstOffset:]) << 32
	case 6:
		if l3 == 0 || l3+roce.IPv6HeaderLen > n {
			break
		}
		ip := roce.IPv6(f[l3 : l3+roce.IPv6HeaderLen])
		flags |= fIPv6
		// The proto field is the fixed header's next header (see doc.go),
		// not r.L4Proto, which is the one after the extension headers.
		k[wIP] = be32(ip[roce.IPv6VTCFlowOffset:])<<32 | uint64(ip.HopLimit())<<24 | uint64(ip.NextHeader())<<16
		k[wSrc] = binary.BigEndian.Uint64(ip[roce.IPv6SrcOffset:])
		k[wSrc+1] = binary.BigEndian.Uint64(ip[roce.IPv6SrcOffset+8:])
		k[wDst] = binary.BigEndian.Uint64(ip[roce.IPv6DstOffset:])
		k[wDst+1] = binary.BigEndian.Uint64(ip[roce.IPv6DstOffset+8:])
	}
	// Classify sets L4 for UDP, and for TCP when a whole header lies in the
	// IP payload of a whole datagram or first fragment. The key takes both
	// ports with one load.
	if l4 := int(r.L4); l4 != 0 {
		switch r.L4Proto {
		case roce.ProtoUDP:
			if l4+roce.UDPHeaderLen <= n {
				flags |= fUDP
				k[wL4] = be32(f[l4+roce.UDPSrcPortOffset:]) << 32
			}
		case roce.ProtoTCP:
			// TCP behind IPv6 extension headers is not matched (see doc.go).
			if l4+roce.TCPMinHeaderLen <= n && (r.IPVersion == 4 || l4 == l3+roce.IPv6HeaderLen) {
				flags |= fTCP
				k[wL4] = be32(f[l4+roce.TCPSrcPortOffset:]) << 32
			}
		}
	}
	if r.BTH != 0 {
		flags |= fBTH
		k[wL4] |= uint64(r.Opcode)<<24 | uint64(r.DestQP&0xffffff)
	}
	k[wEthSrc] |= flags
}
