// SPDX-License-Identifier: GPL-2.0-only
/*
 * Connection private data: what each side announces and how a peer's
 * announcement is validated.  Pure functions, so KUnit drives them directly.
 */
#include <linux/kernel.h>
#include <linux/string.h>

#include "kverbs-pri.h"

static const char * const kverbs_cm_reasons[KVERBS_CM_REASON_MAX] = {
	[KVERBS_CM_OK]		= "ok",
	[KVERBS_CM_ESHORT]	= "private data too short",
	[KVERBS_CM_EMAGIC]	= "bad magic (not a kverbs peer)",
	[KVERBS_CM_EVERSION]	= "unsupported protocol version",
	[KVERBS_CM_EFLAGS]	= "unknown flags or reserved bits set",
	[KVERBS_CM_ENODE]	= "node id 0",
	[KVERBS_CM_EDEPTH]	= "receive depth out of bounds",
	[KVERBS_CM_EMSG]	= "max message size out of bounds",
	[KVERBS_CM_EBUSY]	= "no resources to accept",
	[KVERBS_CM_ENOLISTEN]	= "not accepting connections",
	[KVERBS_CM_EREFUSED]	= "refused by the listener's client",
	[KVERBS_CM_EAUTH]	= "authentication asked for by one side only",
};

/**
 * kverbs_cm_reason_str - human-readable text of a reject reason
 * @r: reason, possibly received from a peer and out of range
 *
 * Context: any.
 * Return: a static string, never NULL.
 */
const char *kverbs_cm_reason_str(enum kverbs_cm_reason r)
{
	if ((unsigned int)r >= KVERBS_CM_REASON_MAX)
		return "unknown reason";
	return kverbs_cm_reasons[r];
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_cm_reason_str);

/**
 * kverbs_cm_priv_fill - build this side's announcement
 * @p: output
 * @node_id: our node id
 * @depth: receives we post per connection
 * @max_msg: largest message we accept
 *
 * Context: any.
 */
void kverbs_cm_priv_fill(struct kverbs_cm_priv *p, u32 node_id, u16 depth,
			 u32 max_msg)
{
	memset(p, 0, sizeof(*p));
	p->magic = cpu_to_be32(KVERBS_CM_MAGIC);
	p->version = cpu_to_be16(KVERBS_CM_VERSION);
	p->node_id = cpu_to_be32(node_id);
	p->depth = cpu_to_be16(depth);
	p->max_msg = cpu_to_be32(max_msg);
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_cm_priv_fill);

/**
 * kverbs_cm_priv_parse - validate a peer's announcement
 * @data: private data as received; may be NULL when @len is 0
 * @len: its length; transports pad, so bytes past the header are ignored
 * @node_id: peer's node id, written only on success
 * @depth: peer's receive depth, written only on success
 * @max_msg: peer's largest message, written only on success
 *
 * Every field is checked before anything is written, so a malformed
 * announcement leaves the outputs untouched.
 *
 * Context: any.
 * Return: KVERBS_CM_OK, or the first reason the announcement is refused.
 */
enum kverbs_cm_reason kverbs_cm_priv_parse(const void *data, unsigned int len,
					   u32 *node_id, u16 *depth,
					   u32 *max_msg)
{
	struct kverbs_cm_priv p;
	u32 node, msg;
	u16 d;

	if (!data || len < sizeof(p))
		return KVERBS_CM_ESHORT;
	memcpy(&p, data, sizeof(p));
	if (be32_to_cpu(p.magic) != KVERBS_CM_MAGIC)
		return KVERBS_CM_EMAGIC;
	if (be16_to_cpu(p.version) != KVERBS_CM_VERSION)
		return KVERBS_CM_EVERSION;
	if ((be16_to_cpu(p.flags) & ~KVERBS_CM_F_AUTH) || p.reserved)
		return KVERBS_CM_EFLAGS;
	node = be32_to_cpu(p.node_id);
	if (!node)
		return KVERBS_CM_ENODE;
	d = be16_to_cpu(p.depth);
	if (d < KVERBS_CM_MIN_DEPTH || d > KVERBS_CM_MAX_DEPTH)
		return KVERBS_CM_EDEPTH;
	msg = be32_to_cpu(p.max_msg);
	if (msg < KVERBS_CM_MIN_MSG || msg > KVERBS_CM_MAX_MSG)
		return KVERBS_CM_EMSG;

	*node_id = node;
	*depth = d;
	*max_msg = msg;
	return KVERBS_CM_OK;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_cm_priv_parse);

/**
 * kverbs_cm_auth_parse - the authentication part of a valid announcement
 * @data: private data that kverbs_cm_priv_parse() accepted
 * @len: its length
 * @want: this side authenticates its peers
 * @auth: the peer's nonce and proof, written only on success with @want
 *
 * Both sides must agree: a keyed side refuses a peer that does not
 * authenticate, and a side without a key cannot answer one that does.
 *
 * Context: any.
 * Return: KVERBS_CM_OK, KVERBS_CM_EAUTH when the sides disagree, or
 * KVERBS_CM_ESHORT when the part is cut short.
 */
enum kverbs_cm_reason kverbs_cm_auth_parse(const void *data, unsigned int len,
					   bool want,
					   struct kverbs_cm_auth *auth)
{
	struct kverbs_cm_wire w;
	bool has;

	if (!data || len < sizeof(w.priv))
		return KVERBS_CM_ESHORT;
	memcpy(&w.priv, data, sizeof(w.priv));
	has = be16_to_cpu(w.priv.flags) & KVERBS_CM_F_AUTH;
	if (has != want)
		return KVERBS_CM_EAUTH;
	if (!has)
		return KVERBS_CM_OK;
	if (len < sizeof(w))
		return KVERBS_CM_ESHORT;
	memcpy(auth, (const u8 *)data + sizeof(w.priv), sizeof(*auth));
	return KVERBS_CM_OK;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_cm_auth_parse);

/**
 * kverbs_cm_rej_parse - extract the reason from a kverbs reject
 * @data: reject private data; may be NULL
 * @len: its length
 *
 * Context: any.
 * Return: the peer's reason, or KVERBS_CM_REASON_MAX when the reject did not
 * come from kverbs (no or foreign private data).
 */
enum kverbs_cm_reason kverbs_cm_rej_parse(const void *data, unsigned int len)
{
	struct kverbs_cm_rej rej;

	if (!data || len < sizeof(rej))
		return KVERBS_CM_REASON_MAX;
	memcpy(&rej, data, sizeof(rej));
	if (be32_to_cpu(rej.magic) != KVERBS_CM_MAGIC ||
	    be16_to_cpu(rej.version) != KVERBS_CM_VERSION)
		return KVERBS_CM_REASON_MAX;
	return be16_to_cpu(rej.reason);
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_cm_rej_parse);
