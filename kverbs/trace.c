// SPDX-License-Identifier: GPL-2.0-only
/* Instantiates the kverbs tracepoints declared in kverbs_trace.h. */
#include "kverbs-pri.h"

#define CREATE_TRACE_POINTS
#include "kverbs_trace.h"
