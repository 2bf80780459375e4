/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kdsm tracepoints: events/kdsm/ in tracefs.  Every event is keyed by
 * this node's id and the page index; none carries a pointer.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kdsm

#if !defined(_KDSM_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KDSM_TRACE_H

#include <linux/tracepoint.h>

/* A task of this node faulted; its request leaves now. */
TRACE_EVENT(kdsm_fault,
	    TP_PROTO(u8 node, u32 page, bool write),
	    TP_ARGS(node, page, write),
	    TP_STRUCT__entry(__field(u8, node)
			     __field(u32, page)
			     __field(bool, write)),
	    TP_fast_assign(__entry->node = node;
			   __entry->page = page;
			   __entry->write = write;),
	    TP_printk("node=%u page=%u %s", __entry->node, __entry->page,
		      __entry->write ? "write" : "read")
);

/* The grant answering a fault: its latency. */
TRACE_EVENT(kdsm_fault_done,
	    TP_PROTO(u8 node, u32 page, u8 prot, u64 ns),
	    TP_ARGS(node, page, prot, ns),
	    TP_STRUCT__entry(__field(u8, node)
			     __field(u32, page)
			     __field(u8, prot)
			     __field(u64, ns)),
	    TP_fast_assign(__entry->node = node;
			   __entry->page = page;
			   __entry->prot = prot;
			   __entry->ns = ns;),
	    TP_printk("node=%u page=%u prot=%u ns=%llu", __entry->node,
		      __entry->page, __entry->prot, __entry->ns)
);

DECLARE_EVENT_CLASS(kdsm_peer_class,
		    TP_PROTO(u8 node, u32 page, u8 peer, u8 type),
		    TP_ARGS(node, page, peer, type),
		    TP_STRUCT__entry(__field(u8, node)
				     __field(u32, page)
				     __field(u8, peer)
				     __field(u8, type)),
		    TP_fast_assign(__entry->node = node;
				   __entry->page = page;
				   __entry->peer = peer;
				   __entry->type = type;),
		    TP_printk("node=%u page=%u peer=%u type=%u", __entry->node,
			      __entry->page, __entry->peer, __entry->type)
);

/* The home takes a request of @peer (queued or served). */
DEFINE_EVENT(kdsm_peer_class, kdsm_request,
	     TP_PROTO(u8 node, u32 page, u8 peer, u8 type),
	     TP_ARGS(node, page, peer, type));

/* This node sent @peer its reply (after the data, if any). */
DEFINE_EVENT(kdsm_peer_class, kdsm_serve,
	     TP_PROTO(u8 node, u32 page, u8 peer, u8 type),
	     TP_ARGS(node, page, peer, type));

/* Home @peer invalidates this node's copy (@type: the requester). */
DEFINE_EVENT(kdsm_peer_class, kdsm_invalidate,
	     TP_PROTO(u8 node, u32 page, u8 peer, u8 type),
	     TP_ARGS(node, page, peer, type));

/* An event goes to process context: 1 zap, 2 no buffer, 3 order. */
TRACE_EVENT(kdsm_defer,
	    TP_PROTO(u8 node, u32 page, u8 reason),
	    TP_ARGS(node, page, reason),
	    TP_STRUCT__entry(__field(u8, node)
			     __field(u32, page)
			     __field(u8, reason)),
	    TP_fast_assign(__entry->node = node;
			   __entry->page = page;
			   __entry->reason = reason;),
	    TP_printk("node=%u page=%u reason=%s", __entry->node,
		      __entry->page,
		      __print_symbolic(__entry->reason, { 1, "zap" },
				       { 2, "nobuf" }, { 3, "order" }))
);

#endif /* _KDSM_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE kdsm_trace
#include <trace/define_trace.h>
