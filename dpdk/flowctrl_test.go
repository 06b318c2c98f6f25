package dpdk

import (
	"errors"
	"syscall"
	"testing"
)

// net_null and net_ring have no flow control ops: the binding must report
// DPDK's -ENOTSUP so that hwpfc can tell "not implemented" from a failure.
// (EAL is up from TestMain in dpdk_test.go.)
func TestPriorityFlowCtrlNotSupported(t *testing.T) {
	pool, err := NewPktmbufPool("t_pfc", 511, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	for _, name := range []string{"net_null_pfc0", "net_ring_pfc0"} {
		t.Run(name, func(t *testing.T) {
			p := ringPort(t, name, pool) // configured and started, like a daemon port
			err := p.SetPriorityFlowCtrl(3, 0x80, 0x40, 0xFFFF, true)
			if err == nil {
				t.Fatal("SetPriorityFlowCtrl succeeded on a PMD without the op")
			}
			if !errors.Is(err, syscall.ENOTSUP) {
				t.Fatalf("error %v is not ENOTSUP", err)
			}
			var de *Error
			if !errors.As(err, &de) || de.Errno != int(syscall.ENOTSUP) {
				t.Fatalf("error %#v is not a *dpdk.Error with errno ENOTSUP", err)
			}
			t.Log(err)

			if _, err := p.FlowCtrl(); !errors.Is(err, syscall.ENOTSUP) {
				t.Errorf("FlowCtrl: %v, want ENOTSUP", err)
			}
		})
	}
}

func TestPriorityFlowCtrlBadArgs(t *testing.T) {
	pool, err := NewPktmbufPool("t_pfc_bad", 511, 0, 2176, -1, "")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Free()
	p := ringPort(t, "net_null_pfc1", pool)
	// ethdev rejects a priority above 7 before looking for the op.
	if err := p.SetPriorityFlowCtrl(8, 0x80, 0x40, 0xFFFF, true); !errors.Is(err, syscall.EINVAL) {
		t.Errorf("priority 8: %v, want EINVAL", err)
	}
	// A port id that does not exist.
	if err := Port(0xFFFF).SetPriorityFlowCtrl(3, 0x80, 0x40, 0xFFFF, true); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("invalid port: %v, want ENODEV", err)
	}
}
