/* DPDK telemetry commands answered by Go: one C callback serves every
 * command roce-fwd registers, and hands it to Go by name. */
#ifndef ROCEFWD_TELEMETRY_H
#define ROCEFWD_TELEMETRY_H

#include <rte_telemetry.h>

/* Registers cmd with rf_telemetry_cb as its callback. */
int rf_telemetry_register(const char *cmd, const char *help);

#endif
