package hugepages

// Demand is what the forwarding config asks of one socket.
type Demand struct {
	Socket   int // negative (SOCKET_ID_ANY) is counted as socket 0
	Mbufs    int // elements of the socket's mbuf pool
	DataRoom int // mbuf data room incl. headroom; 0 means RTE_MBUF_DEFAULT_BUF_SIZE
	Cache    int // per-lcore mempool cache size
	Lcores   int // lcores that use the pool
	RxDesc   int // summed over this socket's queues
	TxDesc   int // summed over this socket's queues
	// TableBytes is the workers' own tables on this socket (the per-QP
	// tables), allocated from the same hugepage heap.
	TableBytes uint64
}

const (
	mib = 1 << 20

	mempoolObjHeader = 64 // rte_mempool_objhdr, padded to a cache line
	sizeofMbuf       = 128
	mbufPrivSize     = 0
	cacheLine        = 64
	defaultDataRoom  = 2048 + 128 // RTE_MBUF_DEFAULT_BUF_SIZE
	descBytes        = 64         // largest HW descriptor of mlx5/ionic/i40e
	ringSlotBytes    = 8          // one pointer per rte_ring slot
	fixedOverhead    = 64 * mib   // EAL and ethdev memzones per socket
)

// Estimate returns the hugepage memory, in bytes rounded up to MiB, that one
// socket needs for d. The model, deliberately on the safe side:
//
//	element  = roundup64(64 mempool header + 128 rte_mbuf + 0 private + DataRoom)
//	elements = Mbufs + Lcores×Cache      mbufs parked in per-lcore caches are
//	                                     not available to the rings, so they
//	                                     are counted on top of the pool
//	pool     = elements × element
//	rings    = (RxDesc+TxDesc) × 64 B    64 B bounds mlx5, ionic and i40e
//	         + pow2ceil(elements+1) × 8 B the mempool's own rte_ring
//	total    = (pool + rings + TableBytes + 64 MiB EAL/ethdev memzones) × 1.25
//
// The 25 % margin covers what the model leaves out: per-lcore cache
// structures, memseg fragmentation, PMD-private allocations.
func Estimate(d Demand) uint64 {
	return finish(variableBytes(d))
}

// variableBytes is everything in Estimate except the per-socket overhead
// and margin, so several demands on one socket can be summed first.
func variableBytes(d Demand) uint64 {
	pos := func(v int) uint64 { return uint64(max(v, 0)) }
	room := pos(d.DataRoom)
	if room == 0 {
		room = defaultDataRoom
	}
	elt := roundUp(mempoolObjHeader+sizeofMbuf+mbufPrivSize+room, cacheLine)
	n := pos(d.Mbufs) + pos(d.Lcores)*pos(d.Cache)
	ring := pow2Ceil(n+1) * ringSlotBytes
	if n == 0 {
		ring = 0
	}
	return n*elt + ring + (pos(d.RxDesc)+pos(d.TxDesc))*descBytes + d.TableBytes
}

func finish(variable uint64) uint64 {
	total := variable + fixedOverhead
	total += (total + 3) / 4
	return roundUp(total, mib)
}

func roundUp(v, to uint64) uint64 { return (v + to - 1) / to * to }

func pow2Ceil(v uint64) uint64 {
	p := uint64(1)
	for p < v {
		p <<= 1
	}
	return p
}
