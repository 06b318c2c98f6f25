// Package qos holds the egress QoS algorithms that make a roce-fwd port
// behave like a lossless RoCE switch port with SONiC / NVIDIA Onyx
// semantics: byte-bounded per-TC queues, WRED with ECN marking (the DCQCN
// congestion point), strict-priority and DWRR (ETS) scheduling, token
// bucket shaping, 802.1Qbb PFC reception and generation, and the SONiC PFC
// watchdog, plus named presets of all of it.
//
// Everything on the per-packet path (Queue, WRED, Scheduler, TokenBucket,
// PFCRx, PFCTx, Watchdog) is built once and then never allocates, never
// takes a lock, and never reads the clock or a global random source: time
// is an int64 nanosecond argument ("now") and randomness comes from a
// small per-instance generator seeded by the caller, so a test can replay
// any run exactly. Instances are not safe for concurrent use; the
// dataplane gives each worker lcore its own.
//
// Sizes are bytes, rates are bits per second, times are nanoseconds.
// The zero value of a size limit or a rate means "unlimited".
package qos
