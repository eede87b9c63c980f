// SPDX-License-Identifier: Apache-2.0
/*
 * netsend_opts.c - irqlab-netsend's options with their defaults: in the lowest
 * layer, so every part reads them downward; netsend.c fills them from argv
 * before any thread starts
 */
#include "netsend.h"

struct options opt = {
	.po = PROBE_OPTS_INIT, .port = NET_PORT, .cpu = -1,
	.period_ns = 1000000, .payload_bytes = 64, .timeout_ns = DEFAULT_TIMEOUT_NS,
	.ready_timeout_ns = DEFAULT_READY_NS,
};
