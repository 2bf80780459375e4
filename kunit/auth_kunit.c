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

/* HMAC-SHA256(key32, label | nc | ns | be32 7 | be32 9), first 16 bytes */
static const u8 kat_server[KVERBS_CM_PROOF_LEN] = {
	0x05, 0x94, 0xf1, 0xc2, 0xcc, 0x33, 0x9d, 0x75,
	0x21, 0x51, 0xe2, 0x9b, 0xd7, 0xb0, 0x41, 0xca,
};

static const u8 kat_client[KVERBS_CM_PROOF_LEN] = {
	0xd2, 0xd5, 0xa5, 0xaa, 0xe0, 0xe7, 0x66, 0x3b,
	0x62, 0x06, 0xf0, 0xa0, 0x3d, 0xad, 0x97, 0x05,
};

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
	u8 p[KVERBS_CM_PROOF_LEN];

	KUNIT_ASSERT_EQ(test, kverbs_auth_proof(tfm, true, nc, ns, 7, 9, p), 0);
	KUNIT_EXPECT_EQ(test, memcmp(p, kat_server, sizeof(p)), 0);
	KUNIT_ASSERT_EQ(test, kverbs_auth_proof(tfm, false, nc, ns, 7, 9, p), 0);
	KUNIT_EXPECT_EQ(test, memcmp(p, kat_client, sizeof(p)), 0);
	KUNIT_EXPECT_TRUE(test, kverbs_auth_verify(tfm, true, nc, ns, 7, 9,
						   kat_server));
	KUNIT_EXPECT_TRUE(test, kverbs_auth_verify(tfm, false, nc, ns, 7, 9,
						   kat_client));
	crypto_free_shash(tfm);
}

/*
 * Every input is bound: a proof checks only with the same key, label,
 * nonces and node ids.  A replay is a recorded proof met by a fresh
 * nonce; a reflection is one side's proof offered as the other's.
 */
static void kverbs_auth_bound(struct kunit *test)
{
	struct crypto_shash *tfm = tfm_or_fail(test, key32, sizeof(key32));
	struct crypto_shash *other;
	u8 k2[32], n2[KVERBS_CM_NONCE_LEN];

	memcpy(k2, key32, sizeof(k2));
	k2[31] ^= 1;
	other = tfm_or_fail(test, k2, sizeof(k2));
	memcpy(n2, ns, sizeof(n2));
	n2[0] ^= 0x80;

	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(other, false, nc, ns, 7,
							9, kat_client),
			       "another key");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, nc, n2, 7,
							9, kat_client),
			       "replay: the server's nonce is fresh");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, true, n2, ns, 7,
							9, kat_server),
			       "replay: the client's nonce is fresh");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, nc, ns, 7,
							9, kat_server),
			       "reflection: the server's proof as the client's");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, nc, ns, 8,
							9, kat_client),
			       "another client node id");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, nc, ns, 9,
							7, kat_client),
			       "node ids swapped");
	KUNIT_EXPECT_FALSE_MSG(test, kverbs_auth_verify(tfm, false, ns, nc, 7,
							9, kat_client),
			       "nonces swapped");
	crypto_free_shash(other);
	crypto_free_shash(tfm);
}

/* A proof that differs in any one bit is refused. */
static void kverbs_auth_every_bit(struct kunit *test)
{
	struct crypto_shash *tfm = tfm_or_fail(test, key32, sizeof(key32));
	u8 p[KVERBS_CM_PROOF_LEN];
	unsigned int bit, accepted = 0;

	for (bit = 0; bit < 8 * sizeof(p); bit++) {
		memcpy(p, kat_client, sizeof(p));
		p[bit / 8] ^= 1 << (bit % 8);
		accepted += kverbs_auth_verify(tfm, false, nc, ns, 7, 9, p);
	}
	KUNIT_EXPECT_EQ(test, accepted, 0U);
	crypto_free_shash(tfm);
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

static struct kunit_case kverbs_auth_cases[] = {
	KUNIT_CASE(kverbs_auth_known_answer),
	KUNIT_CASE(kverbs_auth_bound),
	KUNIT_CASE(kverbs_auth_every_bit),
	KUNIT_CASE(kverbs_auth_key_length),
	KUNIT_CASE(kverbs_cm_auth_part),
	{}
};

static struct kunit_suite kverbs_auth_suite = {
	.name = "kverbs_auth",
	.test_cases = kverbs_auth_cases,
};

kunit_test_suite(kverbs_auth_suite);
