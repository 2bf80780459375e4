// SPDX-License-Identifier: GPL-2.0-only
/*
 * KUnit: peer authentication (kverbs/auth.c) and the authentication part
 * of the connection private data (kverbs/cm.c).
 *
 * The known answers were computed outside the kernel (Python's hmac and
 * hashlib) from the construction uapi/kverbs/cm.h documents, so a change
 * of label, order or cut shows here, not only between two kernels.
 */
#include <crypto/hash.h>
#include <kunit/test.h>
#include <linux/string.h>
#include <net/ipv6.h>

#include "../kverbs/kverbs-pri.h"

static const u8 key32[32] = {
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
	0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
	0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
};

static const u8 nc[KVERBS_CM_NONCE_LEN] = {
	0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
	0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf,
};

static const u8 ns[KVERBS_CM_NONCE_LEN] = {
	0xb0, 0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7,
	0xb8, 0xb9, 0xba, 0xbb, 0xbc, 0xbd, 0xbe, 0xbf,
};

/*
 * HMAC-SHA256(key32, label | the 108-byte input of in_fill()), first 16
 * bytes: client node 7 (depth 16, max_msg 4096) at 10.77.0.2:40000,
 * server node 9 (depth 32, max_msg 8192) at 10.77.0.1:18515, both
 * announcing KVERBS_CM_F_AUTH.
 */
static const u8 kat_server[KVERBS_CM_PROOF_LEN] = {
	0x59, 0x64, 0x09, 0xe4, 0x98, 0x8c, 0xf3, 0xb8,
	0xc6, 0x18, 0x1e, 0xec, 0x04, 0x74, 0xb1, 0xaf,
};

static const u8 kat_client[KVERBS_CM_PROOF_LEN] = {
	0x9c, 0x5a, 0x03, 0x6d, 0x6c, 0x8b, 0x9c, 0x1c,
	0x54, 0x53, 0xdd, 0x23, 0x52, 0xa0, 0xbd, 0xee,
};

static void in_addr4(u8 *out, u8 last, u16 port)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(0x0a4d0000 | last),	/* 10.77.0.x */
		.sin_port = htons(port),
	};

	kverbs_auth_addr((struct sockaddr *)&sin, out);
}

static void in_fill(struct kverbs_auth_input *in)
{
	memset(in, 0, sizeof(*in));
	memcpy(in->nc, nc, sizeof(nc));
	memcpy(in->ns, ns, sizeof(ns));
	kverbs_cm_priv_fill(&in->client, 7, 16, 4096);
	in->client.flags = cpu_to_be16(KVERBS_CM_F_AUTH);
	kverbs_cm_priv_fill(&in->server, 9, 32, 8192);
	in->server.flags = cpu_to_be16(KVERBS_CM_F_AUTH);
	in_addr4(in->client_addr, 2, 40000);
	in_addr4(in->server_addr, 1, 18515);
}

/* KUNIT_EXPECT_MEMEQ() is 6.2's; the KUnit kernel is 6.1. */
static struct crypto_shash *tfm_or_fail(struct kunit *test, const u8 *k,
					unsigned int len)
{
	struct crypto_shash *tfm = kverbs_auth_tfm_new(k, len);

	KUNIT_ASSERT_FALSE_MSG(test, IS_ERR(tfm),
			       "hmac(sha256) transform: %ld", PTR_ERR(tfm));
	return tfm;
}

static void kverbs_auth_known_answer(struct kunit *test)
{
	struct crypto_shash *tfm = tfm_or_fail(test, key32, sizeof(key32));
	struct kverbs_auth_input in;
	u8 p[KVERBS_CM_PROOF_LEN];

	KUNIT_EXPECT_EQ(test, sizeof(in), (size_t)108);
	in_fill(&in);
	KUNIT_ASSERT_EQ(test, kverbs_auth_proof(tfm, true, &in, p), 0);
	KUNIT_EXPECT_EQ(test, memcmp(p, kat_server, sizeof(p)), 0);
	KUNIT_ASSERT_EQ(test, kverbs_auth_proof(tfm, false, &in, p), 0);
	KUNIT_EXPECT_EQ(test, memcmp(p, kat_client, sizeof(p)), 0);
	KUNIT_EXPECT_TRUE(test, kverbs_auth_verify(tfm, true, &in, kat_server));
	KUNIT_EXPECT_TRUE(test, kverbs_auth_verify(tfm, false, &in, kat_client));
	crypto_free_shash(tfm);
}

/*
 * Every input is bound: a proof checks only with the same key, label and
 * view of the connection.  A replay is a recorded proof met by a fresh
 * nonce; a reflection is one side's proof offered as the other's; a relay
 * splices two connections, so one side sees another address.
 */
struct kverbs_auth_bound_case {
	const char *what;
	void (*change)(struct kverbs_auth_input *in);
};

static void ch_ns(struct kverbs_auth_input *in)
{
	in->ns[0] ^= 0x80;
}

static void ch_nc(struct kverbs_auth_input *in)
{
	in->nc[15] ^= 1;
}

static void ch_nonces_swapped(struct kverbs_auth_input *in)
{
	u8 t[KVERBS_CM_NONCE_LEN];

	memcpy(t, in->nc, sizeof(t));
	memcpy(in->nc, in->ns, sizeof(t));
	memcpy(in->ns, t, sizeof(t));
}

static void ch_client_node(struct kverbs_auth_input *in)
{
	in->client.node_id = cpu_to_be32(8);
}

static void ch_server_depth(struct kverbs_auth_input *in)
{
	in->server.depth = cpu_to_be16(16);
}

static void ch_client_addr(struct kverbs_auth_input *in)
{
	in_addr4(in->client_addr, 3, 40000);	/* a relay's address */
}

static void ch_server_port(struct kverbs_auth_input *in)
{
	in_addr4(in->server_addr, 1, 18516);
}

static const struct kverbs_auth_bound_case bound_cases[] = {
	{ "replay: the server's nonce is fresh", ch_ns },
	{ "replay: the client's nonce is fresh", ch_nc },
	{ "nonces swapped", ch_nonces_swapped },
	{ "another client node id", ch_client_node },
	{ "another server announcement", ch_server_depth },
	{ "relay: another client address", ch_client_addr },
	{ "another server port", ch_server_port },
};

static void kverbs_auth_bound(struct kunit *test)
{
	struct crypto_shash *tfm = tfm_or_fail(test, key32, sizeof(key32));
	struct kverbs_auth_input in;
	unsigned int i;
	u8 k2[32];

	for (i = 0; i < ARRAY_SIZE(bound_cases); i++) {
		in_fill(&in);
		bound_cases[i].change(&in);
		KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, &in,
								kat_client),
				       "%s", bound_cases[i].what);
		KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, true, &in,
								kat_server),
				       "%s", bound_cases[i].what);
	}
	in_fill(&in);
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, &in,
							kat_server),
			       "reflection: the server's proof as the client's");
	crypto_free_shash(tfm);

	memcpy(k2, key32, sizeof(k2));
	k2[31] ^= 1;
	tfm = tfm_or_fail(test, k2, sizeof(k2));
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, &in,
							kat_client),
			       "another key");
	crypto_free_shash(tfm);
}

/* A proof that differs in any one bit is refused. */
static void kverbs_auth_every_bit(struct kunit *test)
{
	struct crypto_shash *tfm = tfm_or_fail(test, key32, sizeof(key32));
	struct kverbs_auth_input in;
	u8 p[KVERBS_CM_PROOF_LEN];
	unsigned int bit, accepted = 0;

	in_fill(&in);
	for (bit = 0; bit < 8 * sizeof(p); bit++) {
		memcpy(p, kat_client, sizeof(p));
		p[bit / 8] ^= 1 << (bit % 8);
		accepted += kverbs_auth_verify(tfm, false, &in, p);
	}
	KUNIT_EXPECT_EQ(test, accepted, 0U);
	crypto_free_shash(tfm);
}

/* IPv4 is hashed as v4-mapped IPv6, so both families agree. */
static void kverbs_auth_addr_mapped(struct kunit *test)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6,
				     .sin6_port = htons(18515) };
	u8 a4[KVERBS_AUTH_ADDR_LEN], a6[KVERBS_AUTH_ADDR_LEN];

	ipv6_addr_set_v4mapped(htonl(0x0a4d0001), &sin6.sin6_addr);
	in_addr4(a4, 1, 18515);
	kverbs_auth_addr((struct sockaddr *)&sin6, a6);
	KUNIT_EXPECT_EQ(test, memcmp(a4, a6, sizeof(a4)), 0);
}

static void kverbs_auth_key_length(struct kunit *test)
{
	u8 k[KVERBS_AUTH_KEY_MAX + 1] = {};
	const unsigned int short_len = KVERBS_AUTH_KEY_MIN - 1;
	const unsigned int long_len = KVERBS_AUTH_KEY_MAX + 1;
	struct crypto_shash *tfm;

	KUNIT_EXPECT_EQ(test, PTR_ERR(kverbs_auth_tfm_new(k, 0)), -EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(kverbs_auth_tfm_new(k, short_len)),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, PTR_ERR(kverbs_auth_tfm_new(k, long_len)),
			-EINVAL);
	tfm = tfm_or_fail(test, k, KVERBS_AUTH_KEY_MIN);
	crypto_free_shash(tfm);
	tfm = tfm_or_fail(test, k, KVERBS_AUTH_KEY_MAX);
	crypto_free_shash(tfm);
}

static void fill(struct kverbs_cm_wire *w, bool auth)
{
	memset(w, 0, sizeof(*w));
	kverbs_cm_priv_fill(&w->priv, 7, 16, 4096);
	if (auth) {
		w->priv.flags = cpu_to_be16(KVERBS_CM_F_AUTH);
		memcpy(w->auth.nonce, nc, sizeof(nc));
		memcpy(w->auth.proof, kat_server, sizeof(kat_server));
	}
}

/* The wire part: both sides must agree, and the part must be whole. */
static void kverbs_cm_auth_part(struct kunit *test)
{
	struct kverbs_cm_auth out = {};
	struct kverbs_cm_wire w;
	u32 node, msg;
	u16 depth;

	KUNIT_EXPECT_LE(test, sizeof(w), (size_t)KVERBS_CM_PRIV_MAX);

	fill(&w, true);
	KUNIT_EXPECT_EQ(test, kverbs_cm_priv_parse(&w, sizeof(w), &node,
						   &depth, &msg),
			KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, kverbs_cm_auth_parse(&w, sizeof(w), true, &out),
			KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, memcmp(out.nonce, nc, sizeof(nc)), 0);
	KUNIT_EXPECT_EQ(test, memcmp(out.proof, kat_server, sizeof(kat_server)), 0);
	KUNIT_EXPECT_EQ(test, kverbs_cm_auth_parse(&w, sizeof(w), false, &out),
			KVERBS_CM_EAUTH);
	KUNIT_EXPECT_EQ(test, kverbs_cm_auth_parse(&w, sizeof(w) - 1, true,
						   &out),
			KVERBS_CM_ESHORT);

	fill(&w, false);
	KUNIT_EXPECT_EQ(test, kverbs_cm_auth_parse(&w, sizeof(w.priv), false,
						   &out),
			KVERBS_CM_OK);
	KUNIT_EXPECT_EQ(test, kverbs_cm_auth_parse(&w, sizeof(w.priv), true,
						   &out),
			KVERBS_CM_EAUTH);
	KUNIT_EXPECT_STREQ(test, kverbs_cm_reason_str(KVERBS_CM_EAUTH),
			   "authentication asked for by one side only");
}

/* An endpoint on @dom's list, accepted from @sa unless NULL (dialed). */
static void admit_ep(struct kverbs_domain *dom, struct kverbs_ep *ep,
		     const void *sa, size_t len)
{
	if (sa) {
		memcpy(&ep->peer_addr, sa, len);
		set_bit(KVERBS_EP_F_ACCEPTED, &ep->flags);
	}
	list_add_tail(&ep->dom_node, &dom->eps);
}

static bool admit(struct kverbs_domain *dom, const void *sa)
{
	bool ok;

	mutex_lock(&dom->lock);
	ok = kverbs_admit_locked(dom, sa);
	mutex_unlock(&dom->lock);
	return ok;
}

/*
 * The caps on connections awaiting their proof, for max_eps 8: 4 in all,
 * 2 per host (an IPv4 address, an IPv6 /64).  Dialed endpoints and proven
 * ones never count; failed ones do until they leave the list.
 */
static void kverbs_auth_admit_caps(struct kunit *test)
{
	struct kverbs_domain *dom = kunit_kzalloc(test, sizeof(*dom),
						  GFP_KERNEL);
	struct kverbs_ep *ep = kunit_kcalloc(test, 8, sizeof(*ep), GFP_KERNEL);
	struct sockaddr_in h1 = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(0x0a4d0002) };
	struct sockaddr_in h2 = h1, h3 = h1, h4 = h1;
	struct sockaddr_in6 v6a = { .sin6_family = AF_INET6 }, v6b, v6c;

	KUNIT_ASSERT_NOT_NULL(test, dom);
	KUNIT_ASSERT_NOT_NULL(test, ep);
	mutex_init(&dom->lock);
	INIT_LIST_HEAD(&dom->eps);
	dom->max_eps = 8;
	dom->max_accepted = 8;
	dom->auth_tfm = ERR_PTR(-ENOKEY);	/* keyed; never used here */
	h2.sin_addr.s_addr = htonl(0x0a4d0003);
	h3.sin_addr.s_addr = htonl(0x0a4d0004);
	h4.sin_addr.s_addr = htonl(0x0a4d0005);
	h1.sin_port = htons(1000);

	admit_ep(dom, &ep[0], NULL, 0);		/* dialed: never counts */
	admit_ep(dom, &ep[1], &h1, sizeof(h1));
	KUNIT_EXPECT_TRUE(test, admit(dom, &h1));
	admit_ep(dom, &ep[2], &h1, sizeof(h1));
	/* Another port of the same host is the same host. */
	h1.sin_port = htons(2000);
	KUNIT_EXPECT_FALSE(test, admit(dom, &h1));
	KUNIT_EXPECT_TRUE(test, admit(dom, &h2));
	KUNIT_EXPECT_EQ(test, atomic64_read(&dom->auth_busy), 1);
	/* A failed one still holds its QP; a proven one no longer counts. */
	set_bit(KVERBS_EP_F_AUTH_FAILED, &ep[2].flags);
	KUNIT_EXPECT_FALSE(test, admit(dom, &h1));
	set_bit(KVERBS_EP_F_AUTH_PASSED, &ep[2].flags);
	KUNIT_EXPECT_TRUE(test, admit(dom, &h1));

	/* 4 in all: h1 (1), h2 (1), h3 (2) leave no room for h4. */
	admit_ep(dom, &ep[3], &h2, sizeof(h2));
	admit_ep(dom, &ep[4], &h3, sizeof(h3));
	KUNIT_EXPECT_TRUE(test, admit(dom, &h4));
	admit_ep(dom, &ep[5], &h3, sizeof(h3));
	KUNIT_EXPECT_FALSE(test, admit(dom, &h4));

	/* IPv6: one /64 is one host, the next /64 another. */
	list_del(&ep[5].dom_node);
	list_del(&ep[4].dom_node);
	ipv6_addr_set(&v6a.sin6_addr, htonl(0x20010db8), 0, 0, htonl(1));
	v6b = v6a;
	v6b.sin6_addr.s6_addr32[3] = htonl(2);
	v6c = v6a;
	v6c.sin6_addr.s6_addr32[1] = htonl(1);
	admit_ep(dom, &ep[4], &v6a, sizeof(v6a));
	admit_ep(dom, &ep[5], &v6b, sizeof(v6b));
	KUNIT_EXPECT_FALSE(test, admit(dom, &v6c));	/* 4 in all */
	list_del(&ep[3].dom_node);			/* 3 in all */
	KUNIT_EXPECT_FALSE(test, admit(dom, &v6a));	/* its /64 has 2 */
	KUNIT_EXPECT_TRUE(test, admit(dom, &v6c));
}

/*
 * The caps on accepted endpoints, keyed or not: max_accepted in all,
 * max_per_host from one host; dialed endpoints never count, proven and
 * failed ones do until they leave the list.
 */
static void kverbs_admit_host_caps(struct kunit *test)
{
	struct kverbs_domain *dom = kunit_kzalloc(test, sizeof(*dom),
						  GFP_KERNEL);
	struct kverbs_ep *ep = kunit_kcalloc(test, 6, sizeof(*ep), GFP_KERNEL);
	struct sockaddr_in h1 = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(0x0a4d0002) };
	struct sockaddr_in h2 = h1, h3 = h1;

	KUNIT_ASSERT_NOT_NULL(test, dom);
	KUNIT_ASSERT_NOT_NULL(test, ep);
	mutex_init(&dom->lock);
	INIT_LIST_HEAD(&dom->eps);
	dom->max_eps = 8;
	dom->max_accepted = 4;
	dom->max_per_host = 2;
	h2.sin_addr.s_addr = htonl(0x0a4d0003);
	h3.sin_addr.s_addr = htonl(0x0a4d0004);

	admit_ep(dom, &ep[0], NULL, 0);		/* dialed: never counts */
	admit_ep(dom, &ep[1], &h1, sizeof(h1));
	set_bit(KVERBS_EP_F_AUTH_PASSED, &ep[1].flags);
	KUNIT_EXPECT_TRUE(test, admit(dom, &h1));
	admit_ep(dom, &ep[2], &h1, sizeof(h1));
	h1.sin_port = htons(2000);
	KUNIT_EXPECT_FALSE(test, admit(dom, &h1));	/* 2 from h1 */
	KUNIT_EXPECT_EQ(test, atomic64_read(&dom->accept_busy), 1);
	KUNIT_EXPECT_EQ(test, atomic64_read(&dom->auth_busy), 0);
	KUNIT_EXPECT_TRUE(test, admit(dom, &h2));
	admit_ep(dom, &ep[3], &h2, sizeof(h2));
	admit_ep(dom, &ep[4], &h2, sizeof(h2));
	KUNIT_EXPECT_FALSE(test, admit(dom, &h3));	/* 4 in all */
	list_del(&ep[2].dom_node);			/* h1's second left */
	KUNIT_EXPECT_TRUE(test, admit(dom, &h3));
	KUNIT_EXPECT_TRUE(test, admit(dom, &h1));
	/* Two addresses of one IPv6 /64 are two addresses here. */
	{
		struct sockaddr_in6 a = { .sin6_family = AF_INET6 }, b;

		list_del(&ep[3].dom_node);
		list_del(&ep[4].dom_node);
		ipv6_addr_set(&a.sin6_addr, htonl(0x20010db8), 0, 0, htonl(1));
		b = a;
		b.sin6_addr.s6_addr32[3] = htonl(2);
		admit_ep(dom, &ep[3], &a, sizeof(a));
		admit_ep(dom, &ep[4], &a, sizeof(a));
		KUNIT_EXPECT_FALSE(test, admit(dom, &a));
		KUNIT_EXPECT_TRUE(test, admit(dom, &b));
		list_del(&ep[4].dom_node);
		admit_ep(dom, &ep[4], &h2, sizeof(h2));
	}
	/* No per-host cap: one host may take every accepted slot. */
	dom->max_per_host = 0;
	KUNIT_EXPECT_TRUE(test, admit(dom, &h2));
	KUNIT_EXPECT_EQ(test, atomic64_read(&dom->accept_busy), 3);
}

static struct kunit_case kverbs_auth_cases[] = {
	KUNIT_CASE(kverbs_auth_known_answer),
	KUNIT_CASE(kverbs_auth_bound),
	KUNIT_CASE(kverbs_auth_every_bit),
	KUNIT_CASE(kverbs_auth_addr_mapped),
	KUNIT_CASE(kverbs_auth_key_length),
	KUNIT_CASE(kverbs_cm_auth_part),
	KUNIT_CASE(kverbs_auth_admit_caps),
	KUNIT_CASE(kverbs_admit_host_caps),
	{}
};

static struct kunit_suite kverbs_auth_suite = {
	.name = "kverbs_auth",
	.test_cases = kverbs_auth_cases,
};

kunit_test_suite(kverbs_auth_suite);
