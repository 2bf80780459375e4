// SPDX-License-Identifier: GPL-2.0-only
/* Instantiates the kvmsg tracepoints declared in kvmsg_trace.h. */
#include "kvmsg-pri.h"

#define CREATE_TRACE_POINTS
#include "kvmsg_trace.h"
