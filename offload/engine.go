package offload

import (
	"roce-fwd/dpdk"
)

// Engine is a port's rte_flow API. NIC gives the real one; tests script
// their own to check call order and error handling.
type Engine interface {
	Info() (dpdk.FlowInfo, error)
	Configure(c dpdk.FlowEngineConfig) error
	Validate(s *dpdk.FlowSpec) error
	Create(s *dpdk.FlowSpec) (Handle, error)
	Destroy(h Handle) error
	// QueryCount reads a rule's count action; ok is false when the PMD
	// returned neither hits nor bytes.
	QueryCount(h Handle) (hits, bytes uint64, ok bool, err error)
	Flush() error
	// NewTable makes a template table (pattern and actions templates) for
	// rules shaped like s.
	NewTable(s *dpdk.FlowSpec, rules uint32) (TemplateTable, error)
}

// Handle is an installed rule.
type Handle any

// TemplateTable is a template table of the asynchronous API.
type TemplateTable interface {
	AsyncCreate(queue int, s *dpdk.FlowSpec, postpone bool, userData uint64) (Handle, error)
	AsyncDestroy(queue int, h Handle, postpone bool, userData uint64) error
	Push(queue int) error
	Pull(queue, max int) ([]dpdk.FlowOpResult, error)
	Destroy() error
}

// NIC is the Engine of a DPDK port.
func NIC(p dpdk.Port) Engine { return nicEngine{p} }

type nicEngine struct{ p dpdk.Port }

func (e nicEngine) Info() (dpdk.FlowInfo, error)            { return e.p.FlowInfo() }
func (e nicEngine) Configure(c dpdk.FlowEngineConfig) error { return e.p.FlowConfigureEngine(c) }
func (e nicEngine) Validate(s *dpdk.FlowSpec) error         { return e.p.FlowValidate(s) }
func (e nicEngine) Flush() error                            { return e.p.FlowFlush() }

func (e nicEngine) Create(s *dpdk.FlowSpec) (Handle, error) {
	f, err := e.p.FlowCreate(s)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (e nicEngine) Destroy(h Handle) error { return e.p.FlowDestroy(h.(*dpdk.Flow)) }

func (e nicEngine) QueryCount(h Handle) (uint64, uint64, bool, error) {
	hits, bytes, hs, bs, err := e.p.FlowQueryCount(h.(*dpdk.Flow), false)
	return hits, bytes, hs || bs, err
}

func (e nicEngine) NewTable(s *dpdk.FlowSpec, rules uint32) (TemplateTable, error) {
	t, err := e.p.FlowTableCreate(s, rules)
	if err != nil {
		return nil, err
	}
	return nicTable{t}, nil
}

type nicTable struct{ t *dpdk.FlowTable }

func (t nicTable) AsyncCreate(q int, s *dpdk.FlowSpec, postpone bool, ud uint64) (Handle, error) {
	f, err := t.t.AsyncCreate(q, s, postpone, ud)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (t nicTable) AsyncDestroy(q int, h Handle, postpone bool, ud uint64) error {
	return t.t.AsyncDestroy(q, h.(*dpdk.Flow), postpone, ud)
}

func (t nicTable) Push(q int) error                             { return t.t.Push(q) }
func (t nicTable) Pull(q, max int) ([]dpdk.FlowOpResult, error) { return t.t.Pull(q, max) }
func (t nicTable) Destroy() error                               { return t.t.Destroy() }
