// SPDX-License-Identifier: GPL-2.0-only
/*
 * Admission: how many accepted endpoints a domain lets its peers hold.
 *
 * An accepted endpoint holds a QP, its rings and its share of the
 * domain's CQ from the connection request until it leaves the domain's
 * list, whatever its state: a failed or closing one keeps them until its
 * teardown ends (which may wait 5 s for the CM).  Opening one costs the
 * peer nothing, and /dev/infiniband/rdma_cm lets every local account of
 * every host open them.  So the budget real clients and the node's own
 * dialed endpoints need is capped per kind of holder:
 *
 * 1. accepted endpoints in all, at most @max_accepted (the rest of
 *    @max_eps stays for endpoints the node dials itself);
 * 2. accepted endpoints from one address, at most @max_per_host;
 * 3. in a keyed domain, accepted endpoints whose peer has not proven the
 *    key yet: half of @max_eps in all, and a quarter (at most
 *    KVERBS_AUTH_PENDING_PER_ADDR) per host, an IPv4 address or an IPv6
 *    /64 (a host may take any source address of its prefix).
 *
 * Cap 2 counts addresses, not /64s: proven peers of one IPv6 LAN share a
 * prefix, and must not share a host's share.  The caps bound what one
 * address or host can hold, not who it is: on RoCE an address can be
 * spoofed, and only the key proves a peer.
 *
 * Locking: the counts are taken where the new endpoint joins dom->eps,
 * under dom->lock, so they are exact.
 */
#include <net/ipv6.h>

#include "kverbs-pri.h"

/*
 * Does @ep hold an endpoint for a peer that has not proven the key?  From
 * its creation until it leaves the domain's list, whatever its state.
 */
static bool kverbs_ep_unproven(struct kverbs_ep *ep)
{
	return !test_bit(KVERBS_EP_F_AUTH_PASSED, &ep->flags);
}

/* @a and @b as kverbs_auth_addr() gives them: the same host? */
static bool kverbs_same_host(const u8 *a, const u8 *b)
{
	bool a4 = ipv6_addr_v4mapped((const struct in6_addr *)a);
	bool b4 = ipv6_addr_v4mapped((const struct in6_addr *)b);

	if (a4 != b4)
		return false;
	return !memcmp(a, b, a4 ? sizeof(struct in6_addr) : 8);
}

/* Accepted endpoints: in all, from one address, unproven (and per host). */
struct kverbs_admit_count {
	unsigned int all;
	unsigned int host;
	unsigned int unproven;
	unsigned int unproven_host;
};

/**
 * kverbs_admit_locked - may @src have one more accepted endpoint?
 * @dom: domain
 * @src: the requesting peer's address (its port is not compared)
 *
 * Applies the caps above.  A refusal is counted (debugfs accept_busy, or
 * auth_busy for the cap on unproven peers) and logged, rate-limited.
 *
 * Context: process (the listener's CM handler), under dom->lock.
 * Return: true if @src may have another endpoint.
 */
bool kverbs_admit_locked(struct kverbs_domain *dom, const struct sockaddr *src)
{
	u8 want[KVERBS_AUTH_ADDR_LEN], have[KVERBS_AUTH_ADDR_LEN];
	struct kverbs_admit_count n = {};
	unsigned int total, per_host;
	struct kverbs_ep *ep;
	bool same, same_addr;

	lockdep_assert_held(&dom->lock);
	kverbs_auth_addr(src, want);
	list_for_each_entry(ep, &dom->eps, dom_node) {
		if (!test_bit(KVERBS_EP_F_ACCEPTED, &ep->flags))
			continue;
		kverbs_auth_addr((struct sockaddr *)&ep->peer_addr, have);
		same = kverbs_same_host(want, have);
		same_addr = !memcmp(want, have, sizeof(struct in6_addr));
		n.all++;
		n.host += same_addr;
		if (dom->auth_tfm && kverbs_ep_unproven(ep)) {
			n.unproven++;
			n.unproven_host += same;
		}
	}

	if (n.all >= dom->max_accepted ||
	    (dom->max_per_host && n.host >= dom->max_per_host)) {
		atomic64_inc(&dom->accept_busy);
		kverbs_dom_log(warn, dom,
			       "refusing a connection from %pISc: that address holds %u and all peers %u endpoints (caps %u and %u)\n",
			       src, n.host, n.all, dom->max_per_host,
			       dom->max_accepted);
		return false;
	}
	if (!dom->auth_tfm)
		return true;
	total = max(1U, dom->max_eps / 2);
	per_host = clamp(total / 2, 1U,
			 (unsigned int)KVERBS_AUTH_PENDING_PER_ADDR);
	if (n.unproven_host < per_host && n.unproven < total)
		return true;
	atomic64_inc(&dom->auth_busy);
	kverbs_dom_log(warn, dom,
		       "refusing a connection from %pISc: %u from that host and %u in all await their proof (caps %u and %u)\n",
		       src, n.unproven_host, n.unproven, per_host, total);
	return false;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_admit_locked);
