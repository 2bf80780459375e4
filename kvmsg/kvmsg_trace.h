/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmsg tracepoints: events/kvmsg/ in tracefs.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kvmsg

#if !defined(_KVMSG_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KVMSG_TRACE_H

#include <linux/tracepoint.h>

struct kverbs_ep;

TRACE_EVENT(kvmsg_send,
	    TP_PROTO(const struct kverbs_ep *ep, u32 seq, u32 len,
		     u16 credits, bool signaled),
	    TP_ARGS(ep, seq, len, credits, signaled),
	    TP_STRUCT__entry(__field(const void *, ep)
			     __field(u32, seq)
			     __field(u32, len)
			     __field(u16, credits)
			     __field(bool, signaled)),
	    TP_fast_assign(__entry->ep = ep;
			   __entry->seq = seq;
			   __entry->len = len;
			   __entry->credits = credits;
			   __entry->signaled = signaled;),
	    TP_printk("ep=%p seq=%u len=%u grant=%u%s", __entry->ep,
		      __entry->seq, __entry->len, __entry->credits,
		      __entry->signaled ? " signaled" : "")
);

TRACE_EVENT(kvmsg_recv,
	    TP_PROTO(const struct kverbs_ep *ep, u32 seq, u32 len,
		     u16 credits, u8 type),
	    TP_ARGS(ep, seq, len, credits, type),
	    TP_STRUCT__entry(__field(const void *, ep)
			     __field(u32, seq)
			     __field(u32, len)
			     __field(u16, credits)
			     __field(u8, type)),
	    TP_fast_assign(__entry->ep = ep;
			   __entry->seq = seq;
			   __entry->len = len;
			   __entry->credits = credits;
			   __entry->type = type;),
	    TP_printk("ep=%p seq=%u len=%u grant=%u type=%u", __entry->ep,
		      __entry->seq, __entry->len, __entry->credits,
		      __entry->type)
);

TRACE_EVENT(kvmsg_defer,
	    TP_PROTO(const struct kverbs_ep *ep, u32 seq, bool behind),
	    TP_ARGS(ep, seq, behind),
	    TP_STRUCT__entry(__field(const void *, ep)
			     __field(u32, seq)
			     __field(bool, behind)),
	    TP_fast_assign(__entry->ep = ep;
			   __entry->seq = seq;
			   __entry->behind = behind;),
	    TP_printk("ep=%p seq=%u %s", __entry->ep, __entry->seq,
		      __entry->behind ? "queued behind backlog" :
					"handler deferred")
);

TRACE_EVENT(kvmsg_credit_stall,
	    TP_PROTO(const struct kverbs_ep *ep, u32 avail, u32 ungranted),
	    TP_ARGS(ep, avail, ungranted),
	    TP_STRUCT__entry(__field(const void *, ep)
			     __field(u32, avail)
			     __field(u32, ungranted)),
	    TP_fast_assign(__entry->ep = ep;
			   __entry->avail = avail;
			   __entry->ungranted = ungranted;),
	    TP_printk("ep=%p credits=%u ungranted=%u", __entry->ep,
		      __entry->avail, __entry->ungranted)
);

TRACE_EVENT(kvmsg_error,
	    TP_PROTO(const struct kverbs_ep *ep, const char *why),
	    TP_ARGS(ep, why),
	    TP_STRUCT__entry(__field(const void *, ep)
			     __array(char, why, 40)),
	    TP_fast_assign(__entry->ep = ep;
			   strscpy(__entry->why, why, sizeof(__entry->why));),
	    TP_printk("ep=%p %s", __entry->ep, __entry->why)
);

#endif /* _KVMSG_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE kvmsg_trace
#include <trace/define_trace.h>
