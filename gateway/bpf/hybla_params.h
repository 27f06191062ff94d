/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Layout of the single entry of the pinned params map /sys/fs/bpf/perigee/hybla_params.
 * Mirrored by `ParamsValue` in crates/hybla/src/bpf_loader.rs: keep both in sync.
 */
#ifndef PERIGEE_HYBLA_PARAMS_H
#define PERIGEE_HYBLA_PARAMS_H

struct hybla_params {
	__u32 rtt0_us;     /* Hybla's reference RTT; 0 = HYBLA_RTT0_DEFAULT_US */
	__u32 base_rtt_us; /* operator-set base RTT used for rho instead of min RTT; 0 = measured */
	__u32 generation;  /* bumped on every change so open connections recompute rho */
	__u32 cwnd_max;    /* operator cwnd ceiling, segments; 0 = HYBLA_CWND_CEILING only */
};

#endif /* PERIGEE_HYBLA_PARAMS_H */
