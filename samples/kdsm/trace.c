// SPDX-License-Identifier: GPL-2.0-only
/* Instantiates the kdsm tracepoints declared in kdsm_trace.h. */
#include "kdsm-pri.h"

#define CREATE_TRACE_POINTS
#include "kdsm_trace.h"
