package dpdk

/*
#include <rte_pdump.h>
*/
import "C"

// PdumpInit lets DPDK's own capture tools (dpdk-dumpcap, dpdk-pdump),
// run as secondary processes of the same file prefix, capture this
// process's ports (rte_pdump_init). It needs EAL's shared runtime
// directory: not --no-shconf or --in-memory.
func PdumpInit() error { return errRC("rte_pdump_init", C.rte_pdump_init()) }

// PdumpUninit stops serving them (rte_pdump_uninit).
func PdumpUninit() error { return errRC("rte_pdump_uninit", C.rte_pdump_uninit()) }
