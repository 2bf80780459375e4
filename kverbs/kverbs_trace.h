/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * kverbs tracepoints: events/kverbs/ in tracefs, for connection
 * management and teardown.  Endpoint events are keyed by the domain's name
 * and the endpoint's id in its domain, listener events by the domain's
 * name and the listener's address, never by a pointer.
 *
 * Endpoint events share their key with kvmsg's (KVERBS_TRACE_EP_ASSIGN in
 * kverbs-pri.h).  The QP number is the one cached when the QP was created
 * (0 before), so no event follows ep->qp while teardown may be destroying
 * it.  The ep id is the key across all events.
 *
 * Teardown has no begin/end events of its own: it starts with the
 * transition to CLOSING (from CONNECTING or CONNECTED) and ends with
 * CLOSING -> CLOSED, both kverbs_ep_state events, whose @error is the
 * reason the endpoint goes down.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kverbs

#if !defined(_KVERBS_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KVERBS_TRACE_H

#include <linux/socket.h>
#include <linux/tracepoint.h>

/* enum rdma_cm_event_type (rdma/rdma_cm.h), as trace/misc/rdma.h shows it */
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ADDR_RESOLVED);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ADDR_ERROR);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ROUTE_RESOLVED);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ROUTE_ERROR);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_CONNECT_REQUEST);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_CONNECT_RESPONSE);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_CONNECT_ERROR);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_UNREACHABLE);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_REJECTED);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ESTABLISHED);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_DISCONNECTED);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_DEVICE_REMOVAL);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_MULTICAST_JOIN);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_MULTICAST_ERROR);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_ADDR_CHANGE);
TRACE_DEFINE_ENUM(RDMA_CM_EVENT_TIMEWAIT_EXIT);

#define kverbs_show_cm_event(e)						\
	__print_symbolic(e,						\
		{ RDMA_CM_EVENT_ADDR_RESOLVED, "ADDR_RESOLVED" },	\
		{ RDMA_CM_EVENT_ADDR_ERROR, "ADDR_ERROR" },		\
		{ RDMA_CM_EVENT_ROUTE_RESOLVED, "ROUTE_RESOLVED" },	\
		{ RDMA_CM_EVENT_ROUTE_ERROR, "ROUTE_ERROR" },		\
		{ RDMA_CM_EVENT_CONNECT_REQUEST, "CONNECT_REQUEST" },	\
		{ RDMA_CM_EVENT_CONNECT_RESPONSE, "CONNECT_RESPONSE" },	\
		{ RDMA_CM_EVENT_CONNECT_ERROR, "CONNECT_ERROR" },	\
		{ RDMA_CM_EVENT_UNREACHABLE, "UNREACHABLE" },		\
		{ RDMA_CM_EVENT_REJECTED, "REJECTED" },			\
		{ RDMA_CM_EVENT_ESTABLISHED, "ESTABLISHED" },		\
		{ RDMA_CM_EVENT_DISCONNECTED, "DISCONNECTED" },		\
		{ RDMA_CM_EVENT_DEVICE_REMOVAL, "DEVICE_REMOVAL" },	\
		{ RDMA_CM_EVENT_MULTICAST_JOIN, "MULTICAST_JOIN" },	\
		{ RDMA_CM_EVENT_MULTICAST_ERROR, "MULTICAST_ERROR" },	\
		{ RDMA_CM_EVENT_ADDR_CHANGE, "ADDR_CHANGE" },		\
		{ RDMA_CM_EVENT_TIMEWAIT_EXIT, "TIMEWAIT_EXIT" })

TRACE_DEFINE_ENUM(KVERBS_EP_CONNECTING);
TRACE_DEFINE_ENUM(KVERBS_EP_CONNECTED);
TRACE_DEFINE_ENUM(KVERBS_EP_CLOSING);
TRACE_DEFINE_ENUM(KVERBS_EP_CLOSED);

#define kverbs_show_ep_state(s)					\
	__print_symbolic(s, { KVERBS_EP_CONNECTING, "connecting" },	\
			 { KVERBS_EP_CONNECTED, "connected" },	\
			 { KVERBS_EP_CLOSING, "closing" },	\
			 { KVERBS_EP_CLOSED, "closed" })

/* An address as the entry holds it: %pISpc reads IPv4 and IPv6. */
#define KVERBS_TRACE_ADDR_LEN	sizeof(struct sockaddr_storage)

/* Every rdma_cm event the handler of an endpoint's id receives. */
TRACE_EVENT(kverbs_cm_event,
	    TP_PROTO(const struct kverbs_ep *ep,
		     const struct rdma_cm_event *ev),
	    TP_ARGS(ep, ev),
	    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
			     __field(u32, ep)
			     __field(u32, qpn)
			     __field(u32, event)
			     __field(int, status)),
	    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
			   __entry->event = ev->event;
			   __entry->status = ev->status;),
	    TP_printk("%s ep%u %s status=%d", __entry->dom, __entry->ep,
		      kverbs_show_cm_event(__entry->event), __entry->status)
);

/*
 * State transitions of kverbs_ep_change_state(), under ep->lock.
 */
DECLARE_EVENT_CLASS(kverbs_ep_state_class,
		    TP_PROTO(const struct kverbs_ep *ep,
			     enum kverbs_ep_state from,
			     enum kverbs_ep_state to),
		    TP_ARGS(ep, from, to),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(u32, ep)
				     __field(u32, qpn)
				     __field(u32, from)
				     __field(u32, to)
				     __field(int, error)),
		    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
				   __entry->from = from;
				   __entry->to = to;
				   __entry->error = READ_ONCE(ep->error);),
		    TP_printk("%s ep%u qpn=%u %s -> %s error=%d",
			      __entry->dom, __entry->ep, __entry->qpn,
			      kverbs_show_ep_state(__entry->from),
			      kverbs_show_ep_state(__entry->to),
			      __entry->error)
);

/* The state changed. */
DEFINE_EVENT(kverbs_ep_state_class, kverbs_ep_state,
	     TP_PROTO(const struct kverbs_ep *ep,
		      enum kverbs_ep_state from, enum kverbs_ep_state to),
	     TP_ARGS(ep, from, to));

/* The table refused the transition; the state stays @from. */
DEFINE_EVENT(kverbs_ep_state_class, kverbs_ep_state_refused,
	     TP_PROTO(const struct kverbs_ep *ep,
		      enum kverbs_ep_state from, enum kverbs_ep_state to),
	     TP_ARGS(ep, from, to));

/* Connection set-up of an endpoint, with its peer. */
DECLARE_EVENT_CLASS(kverbs_conn_class,
		    TP_PROTO(const struct kverbs_ep *ep, int err),
		    TP_ARGS(ep, err),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(u32, ep)
				     __field(u32, qpn)
				     __field(u32, peer_node)
				     __field(int, err)
				     __array(u8, peer, KVERBS_TRACE_ADDR_LEN)),
		    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
				   __entry->peer_node = ep->peer_node;
				   __entry->err = err;
				   memcpy(__entry->peer, &ep->peer_addr,
					  KVERBS_TRACE_ADDR_LEN);),
		    TP_printk("%s ep%u peer %pISpc node %u err=%d",
			      __entry->dom, __entry->ep, __entry->peer,
			      __entry->peer_node, __entry->err)
);

/* kverbs_ep_connect() starts resolving @peer; err is 0. */
DEFINE_EVENT(kverbs_conn_class, kverbs_ep_connect,
	     TP_PROTO(const struct kverbs_ep *ep, int err),
	     TP_ARGS(ep, err));

/* kverbs_ep_connect() returns: connected (0) or its error. */
DEFINE_EVENT(kverbs_conn_class, kverbs_ep_connect_done,
	     TP_PROTO(const struct kverbs_ep *ep, int err),
	     TP_ARGS(ep, err));

/* Passive side: rdma_accept() sent the accept (0) or failed. */
DEFINE_EVENT(kverbs_conn_class, kverbs_ep_accept,
	     TP_PROTO(const struct kverbs_ep *ep, int err),
	     TP_ARGS(ep, err));

/*
 * Authentication of a peer in a keyed domain: "authenticated" (err 0) or
 * why it failed (the endpoint is then closed with err).
 */
TRACE_EVENT(kverbs_auth,
	    TP_PROTO(const struct kverbs_ep *ep, const char *what, int err),
	    TP_ARGS(ep, what, err),
	    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
			     __field(u32, ep)
			     __field(u32, qpn)
			     __field(u32, peer_node)
			     __field(int, err)
			     __array(u8, peer, KVERBS_TRACE_ADDR_LEN)
			     __array(char, what, 40)),
	    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
			   __entry->peer_node = ep->peer_node;
			   __entry->err = err;
			   memcpy(__entry->peer, &ep->peer_addr,
				  KVERBS_TRACE_ADDR_LEN);
			   strscpy_pad(__entry->what, what,
				       sizeof(__entry->what));),
	    TP_printk("%s ep%u qpn=%u peer %pISpc node %u: %s err=%d",
		      __entry->dom, __entry->ep, __entry->qpn, __entry->peer,
		      __entry->peer_node, __entry->what, __entry->err)
);

/*
 * A refused connection, with the kverbs reason.  @ep is 0 when no
 * endpoint was created for it.
 */
DECLARE_EVENT_CLASS(kverbs_reject_class,
		    TP_PROTO(const struct kverbs_domain *dom, u32 ep,
			     const struct sockaddr_storage *peer,
			     const char *reason, int status),
		    TP_ARGS(dom, ep, peer, reason, status),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(u32, ep)
				     __field(int, status)
				     __array(u8, peer, KVERBS_TRACE_ADDR_LEN)
				     __array(char, reason, 40)),
		    TP_fast_assign(strscpy_pad(__entry->dom, dom->name,
					       KVERBS_NAME_LEN);
				   __entry->ep = ep;
				   __entry->status = status;
				   memcpy(__entry->peer, peer,
					  KVERBS_TRACE_ADDR_LEN);
				   strscpy_pad(__entry->reason, reason,
					       sizeof(__entry->reason));),
		    TP_printk("%s ep%u peer %pISpc: %s status=%d",
			      __entry->dom, __entry->ep, __entry->peer,
			      __entry->reason, __entry->status)
);

/* We refused a peer's request; status is rdma_reject()'s result. */
DEFINE_EVENT(kverbs_reject_class, kverbs_reject,
	     TP_PROTO(const struct kverbs_domain *dom, u32 ep,
		      const struct sockaddr_storage *peer,
		      const char *reason, int status),
	     TP_ARGS(dom, ep, peer, reason, status));

/* The peer refused our request; status is the CM's. */
DEFINE_EVENT(kverbs_reject_class, kverbs_rejected,
	     TP_PROTO(const struct kverbs_domain *dom, u32 ep,
		      const struct sockaddr_storage *peer,
		      const char *reason, int status),
	     TP_ARGS(dom, ep, peer, reason, status));

/* A listener on an address, across the removal of its device. */
DECLARE_EVENT_CLASS(kverbs_listener_class,
		    TP_PROTO(const struct kverbs_listener *l, int err),
		    TP_ARGS(l, err),
		    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
				     __field(int, err)
				     __array(u8, addr, KVERBS_TRACE_ADDR_LEN)),
		    TP_fast_assign(strscpy_pad(__entry->dom, l->dom->name,
					       KVERBS_NAME_LEN);
				   __entry->err = err;
				   memcpy(__entry->addr, &l->addr,
					  KVERBS_TRACE_ADDR_LEN);),
		    TP_printk("%s listener %pISpc err=%d", __entry->dom,
			      __entry->addr, __entry->err)
);

/* DEVICE_REMOVAL reached the listener's id; err is 0. */
DEFINE_EVENT(kverbs_listener_class, kverbs_listener_removal,
	     TP_PROTO(const struct kverbs_listener *l, int err),
	     TP_ARGS(l, err));

/* The old id is destroyed; the listener waits for a device; err is 0. */
DEFINE_EVENT(kverbs_listener_class, kverbs_listener_dormant,
	     TP_PROTO(const struct kverbs_listener *l, int err),
	     TP_ARGS(l, err));

/* A dormant listener listens again (0) or could not yet (its error). */
DEFINE_EVENT(kverbs_listener_class, kverbs_listener_relisten,
	     TP_PROTO(const struct kverbs_listener *l, int err),
	     TP_ARGS(l, err));

/*
 * A grant's invalidation of @nmr keys was still pending after
 * KVERBS_NUDGE_AFTER on rxe: kverbs_sq_nudge() posted a zero-length write
 * (@err 0) or did not (-EBUSY: one is posted; -EAGAIN: no slot; else the
 * endpoint is going down).
 */
TRACE_EVENT(kverbs_nudge,
	    TP_PROTO(const struct kverbs_ep *ep, unsigned int nmr, int err),
	    TP_ARGS(ep, nmr, err),
	    TP_STRUCT__entry(__array(char, dom, KVERBS_NAME_LEN)
			     __field(u32, ep)
			     __field(u32, qpn)
			     __field(u32, nmr)
			     __field(int, err)),
	    TP_fast_assign(KVERBS_TRACE_EP_ASSIGN(ep);
			   __entry->nmr = nmr;
			   __entry->err = err;),
	    TP_printk("%s ep%u qpn=%u invalidation of %u keys late err=%d",
		      __entry->dom, __entry->ep, __entry->qpn, __entry->nmr,
		      __entry->err)
);

#endif /* _KVERBS_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE kverbs_trace
#include <trace/define_trace.h>
