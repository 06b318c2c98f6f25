package dpdk

/*
#cgo pkg-config: libpcap
#include <stdlib.h>
#include <pcap/pcap.h>

// rf_bpf_compile compiles expr for Ethernet frames of up to snaplen bytes.
// It returns the number of instructions (copied to out, up to max), or -1
// with libpcap's message in err.
static int rf_bpf_compile(const char *expr, int snaplen, struct bpf_insn *out, int max, char *err, int errlen) {
	pcap_t *p = pcap_open_dead(DLT_EN10MB, snaplen);
	if (p == NULL) {
		snprintf(err, errlen, "pcap_open_dead failed");
		return -1;
	}
	struct bpf_program prog;
	if (pcap_compile(p, &prog, expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
		snprintf(err, errlen, "%s", pcap_geterr(p));
		pcap_close(p);
		return -1;
	}
	int n = (int)prog.bf_len;
	for (int i = 0; i < n && i < max; i++)
		out[i] = prog.bf_insns[i];
	pcap_freecode(&prog);
	pcap_close(p);
	return n;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"roce-fwd/cbpf"
)

// CompileBPF compiles a tcpdump filter expression ("udp dst port 4791 and
// ip[1] & 3 == 3") for Ethernet frames with libpcap, as tcpdump and
// dpdk-dumpcap do, into a program cbpf.Run executes.
func CompileBPF(expr string, snaplen int) ([]cbpf.Insn, error) {
	cs := C.CString(expr)
	defer C.free(unsafe.Pointer(cs))
	const maxInsns = 4096
	out := make([]C.struct_bpf_insn, maxInsns)
	var msg [256]C.char
	n := C.rf_bpf_compile(cs, C.int(snaplen), &out[0], maxInsns, &msg[0], C.int(len(msg)))
	if n < 0 {
		return nil, fmt.Errorf("filter %q: %s", expr, C.GoString(&msg[0]))
	}
	if n > maxInsns {
		return nil, fmt.Errorf("filter %q: %d instructions, more than %d", expr, n, maxInsns)
	}
	p := make([]cbpf.Insn, n)
	for i := range p {
		in := out[i]
		p[i] = cbpf.Insn{Code: uint16(in.code), Jt: uint8(in.jt), Jf: uint8(in.jf), K: uint32(in.k)}
	}
	if err := cbpf.Check(p); err != nil {
		return nil, fmt.Errorf("filter %q: %w", expr, err)
	}
	return p, nil
}
