// SPDX-License-Identifier: GPL-2.0-only
/* Instantiates the kmsg tracepoints declared in kmsg_trace.h. */
#include "../kverbs/kverbs-pri.h"

#define CREATE_TRACE_POINTS
#include "kmsg_trace.h"
