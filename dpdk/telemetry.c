#include "telemetry.h"
#include "_cgo_export.h"

/* Runs on DPDK's telemetry client thread, not on an lcore. */
static int rf_telemetry_cb(const char *cmd, const char *params, struct rte_tel_data *d)
{
	return rfTelemetryCallback((char *)cmd, (char *)params, d);
}

int rf_telemetry_register(const char *cmd, const char *help)
{
	return rte_telemetry_register_cmd(cmd, rf_telemetry_cb, help);
}
