/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kvmsg tracepoints: events/kvmsg/ in tracefs.  Every event is keyed by
 * stable ids, the domain's name, the endpoint's id in its domain and its
 * QP number, never by a pointer.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kvmsg

#if !defined(_KVMSG_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KVMSG_TRACE_H

#include <linux/tracepoint.h>

#define kvmsg_show_type(t)					\
	__print_symbolic(t, { KVMSG_TYPE_DATA, "data" },	\
			 { KVMSG_TYPE_CREDIT, "credit" })

DECLARE_EVENT_CLASS(kvmsg_msg_class,
		    TP_PROTO(const struct kverbs_ep *ep, u32 seq, u32 len,
			     u16 credits, u8 type, bool signaled),
		    TP_ARGS(ep, seq, len, credits, type, signaled),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(u32, ep)
				     __field(u32, qpn)
				     __field(u32, seq)
				     __field(u32, len)
				     __field(u16, credits)
				     __field(u8, type)
				     __field(bool, signaled)),
		    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
				   __entry->seq = seq;
				   __entry->len = len;
				   __entry->credits = credits;
				   __entry->type = type;
				   __entry->signaled = signaled;),
		    TP_printk("%s ep%u qpn=%u %s seq=%u len=%u grant=%u%s",
			      __entry->dom, __entry->ep, __entry->qpn,
			      kvmsg_show_type(__entry->type), __entry->seq,
			      __entry->len, __entry->credits,
			      __entry->signaled ? " signaled" : "")
);

DEFINE_EVENT(kvmsg_msg_class, kvmsg_send,
	     TP_PROTO(const struct kverbs_ep *ep, u32 seq, u32 len,
		      u16 credits, u8 type, bool signaled),
	     TP_ARGS(ep, seq, len, credits, type, signaled));

DEFINE_EVENT(kvmsg_msg_class, kvmsg_recv,
	     TP_PROTO(const struct kverbs_ep *ep, u32 seq, u32 len,
		      u16 credits, u8 type, bool signaled),
	     TP_ARGS(ep, seq, len, credits, type, signaled));

DECLARE_EVENT_CLASS(kvmsg_ep_class,
		    TP_PROTO(const struct kverbs_ep *ep, u32 a, u32 b),
		    TP_ARGS(ep, a, b),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(u32, ep)
				     __field(u32, qpn)
				     __field(u32, a)
				     __field(u32, b)),
		    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
				   __entry->a = a;
				   __entry->b = b;),
		    TP_printk("%s ep%u qpn=%u seq=%u %s", __entry->dom,
			      __entry->ep, __entry->qpn, __entry->a,
			      __entry->b ? "behind" : "deferred")
);

/* a = the message's sequence number, b = 1 if it queued behind others */
DEFINE_EVENT(kvmsg_ep_class, kvmsg_defer,
	     TP_PROTO(const struct kverbs_ep *ep, u32 a, u32 b),
	     TP_ARGS(ep, a, b));

/* a = credits available, b = grants not sent yet */
DEFINE_EVENT_PRINT(kvmsg_ep_class, kvmsg_credit_stall,
		   TP_PROTO(const struct kverbs_ep *ep, u32 a, u32 b),
		   TP_ARGS(ep, a, b),
		   TP_printk("%s ep%u qpn=%u credits=%u ungranted=%u",
			     __entry->dom, __entry->ep, __entry->qpn,
			     __entry->a, __entry->b));

TRACE_EVENT(kvmsg_error,
	    TP_PROTO(const struct kverbs_ep *ep, const char *why),
	    TP_ARGS(ep, why),
	    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
			     __field(u32, ep)
			     __field(u32, qpn)
			     __array(char, why, 40)),
	    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
			   strscpy_pad(__entry->why, why,
				       sizeof(__entry->why));),
	    TP_printk("%s ep%u qpn=%u %s", __entry->dom, __entry->ep,
		      __entry->qpn, __entry->why)
);

#endif /* _KVMSG_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE kvmsg_trace
#include <trace/define_trace.h>
