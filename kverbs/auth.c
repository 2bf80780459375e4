// SPDX-License-Identifier: GPL-2.0-only
/*
 * Peer authentication: a pre-shared key from the kernel keyring, the
 * proofs of uapi/kverbs/cm.h, and an accepting endpoint's bounded wait
 * for its peer's proof.
 *
 * The exchange (Documentation/security.rst):
 *
 *   1. request: the client's nonce Nc
 *   2. accept: the server's nonce Ns and its proof P(server)
 *   3. the client checks P(server) before its ->connected, then sends
 *      P(client) as its first message (KVMSG_TYPE_AUTH)
 *   4. the server checks P(client) before its ->connected; until then no
 *      message of the peer reaches a handler
 *
 * The key is a "logon" key (user space can set it, never read it back),
 * found when the domain is created, in the keyrings of the task that
 * creates it, as request_key(2) finds keys, without an upcall.  Its
 * payload keys one HMAC-SHA256 transform per domain; the key itself is
 * not kept, so a changed or revoked key applies to domains created after.
 *
 * Locking: the transform is set once, before any endpoint exists, and only
 * read after; one shash transform serves any number of descriptors at
 * once, so proofs are computed in any context without a lock.  The
 * endpoint's @auth fields are written before the endpoint is reachable
 * from a completion (nonces, our proof) or under ep->lock (the flags).
 */
#include <crypto/algapi.h>	/* crypto_memneq(), on 6.1 and 6.12 */
#include <crypto/hash.h>
#include <crypto/sha2.h>
#include <keys/user-type.h>
#include <linux/key.h>
#include <linux/random.h>
#include <net/ipv6.h>

#include "kverbs-pri.h"
#include "kverbs_trace.h"

static const char kverbs_auth_label_server[] = "kverbs-auth-1 server";
static const char kverbs_auth_label_client[] = "kverbs-auth-1 client";

/**
 * kverbs_auth_tfm_new - an HMAC-SHA256 transform keyed with @secret
 * @secret: key bytes
 * @len: KVERBS_AUTH_KEY_MIN..KVERBS_AUTH_KEY_MAX
 *
 * Context: process.
 * Return: the transform, or ERR_PTR: -EINVAL for a bad length, or the
 * crypto API's error (-ENOENT: no hmac(sha256) in this kernel).
 */
struct crypto_shash *kverbs_auth_tfm_new(const u8 *secret, unsigned int len)
{
	struct crypto_shash *tfm;
	int ret;

	if (len < KVERBS_AUTH_KEY_MIN || len > KVERBS_AUTH_KEY_MAX)
		return ERR_PTR(-EINVAL);
	tfm = crypto_alloc_shash("hmac(sha256)", 0, 0);
	if (IS_ERR(tfm))
		return tfm;
	ret = crypto_shash_setkey(tfm, secret, len);
	if (ret) {
		crypto_free_shash(tfm);
		return ERR_PTR(ret);
	}
	return tfm;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_auth_tfm_new);

/**
 * kverbs_auth_addr - an address as the proofs take it
 * @sa: AF_INET or AF_INET6 address with port
 * @out: KVERBS_AUTH_ADDR_LEN bytes: the IPv6 address (IPv4 as v4-mapped)
 *	then the port, both in network byte order
 *
 * Context: any.
 */
void kverbs_auth_addr(const struct sockaddr *sa, u8 *out)
{
	const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
	const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
	struct in6_addr a;
	__be16 port;

	memset(&a, 0, sizeof(a));
	port = 0;
	if (sa->sa_family == AF_INET) {
		ipv6_addr_set_v4mapped(in->sin_addr.s_addr, &a);
		port = in->sin_port;
	} else if (sa->sa_family == AF_INET6) {
		a = in6->sin6_addr;
		port = in6->sin6_port;
	}
	memcpy(out, &a, sizeof(a));
	memcpy(out + sizeof(a), &port, sizeof(port));
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_auth_addr);

/**
 * kverbs_auth_proof - one side's proof for a connection
 * @tfm: the domain's keyed transform
 * @server: the accepting side's proof (else the connecting side's)
 * @in: both nonces, both announcements and both addresses, each side's
 *	own view; the two views of one connection are equal
 * @proof: KVERBS_CM_PROOF_LEN bytes of output
 *
 * Context: any.
 * Return: 0 or the crypto API's error (@proof is then zero).
 */
int kverbs_auth_proof(struct crypto_shash *tfm, bool server,
		      const struct kverbs_auth_input *in, u8 *proof)
{
	SHASH_DESC_ON_STACK(desc, tfm);
	u8 digest[SHA256_DIGEST_SIZE];
	const char *label = server ? kverbs_auth_label_server :
				     kverbs_auth_label_client;
	int ret;

	desc->tfm = tfm;
	ret = crypto_shash_init(desc) ?:
	      crypto_shash_update(desc, label, strlen(label)) ?:
	      crypto_shash_update(desc, (const u8 *)in, sizeof(*in)) ?:
	      crypto_shash_final(desc, digest);
	shash_desc_zero(desc);
	if (ret)
		memset(proof, 0, KVERBS_CM_PROOF_LEN);
	else
		memcpy(proof, digest, KVERBS_CM_PROOF_LEN);
	memzero_explicit(digest, sizeof(digest));
	return ret;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_auth_proof);

/**
 * kverbs_auth_verify - is @got the proof the other side owes?
 * @tfm: the domain's keyed transform
 * @server: whose proof @got claims to be
 * @in: this side's view of the connection (kverbs_auth_proof())
 * @got: KVERBS_CM_PROOF_LEN bytes as received
 *
 * Compared in constant time.
 *
 * Context: any.
 * Return: true if it is.
 */
bool kverbs_auth_verify(struct crypto_shash *tfm, bool server,
			const struct kverbs_auth_input *in, const u8 *got)
{
	u8 want[KVERBS_CM_PROOF_LEN];
	bool ok;

	ok = !kverbs_auth_proof(tfm, server, in, want) &&
	     !crypto_memneq(want, got, sizeof(want));
	memzero_explicit(want, sizeof(want));
	return ok;
}
EXPORT_SYMBOL_IF_KUNIT(kverbs_auth_verify);

/**
 * kverbs_auth_init - key a new domain with the logon key @desc
 * @dom: domain being created, no endpoint yet
 * @desc: the key's description ("kverbs:<name>"), or NULL for none
 *
 * Context: process; the calling task's keyrings are searched.
 * Return: 0, -ENOKEY (no such key the caller may search), -EKEYREVOKED,
 * -EKEYEXPIRED, -EKEYREJECTED (payload outside KVERBS_AUTH_KEY_MIN..MAX
 * bytes) or the crypto API's error.
 */
int kverbs_auth_init(struct kverbs_domain *dom, const char *desc)
{
	const struct user_key_payload *payload;
	struct crypto_shash *tfm;
	struct key *key;
	int ret;

	if (!desc)
		return 0;
	key = request_key(&key_type_logon, desc, NULL);
	if (IS_ERR(key))
		return PTR_ERR(key);
	down_read(&key->sem);
	ret = key_validate(key);
	payload = ret ? NULL : user_key_payload_locked(key);
	if (!ret && !payload)
		ret = -EKEYREVOKED;
	if (!ret) {
		tfm = kverbs_auth_tfm_new(payload->data, payload->datalen);
		if (IS_ERR(tfm))
			ret = PTR_ERR(tfm) == -EINVAL ? -EKEYREJECTED :
			      PTR_ERR(tfm);
		else
			dom->auth_tfm = tfm;
	}
	dom->auth_serial = key_serial(key);
	up_read(&key->sem);
	key_put(key);
	return ret;
}
ALLOW_ERROR_INJECTION(kverbs_auth_init, ERRNO);

/**
 * kverbs_auth_free - forget a domain's key
 * @dom: domain
 *
 * Context: process.
 */
void kverbs_auth_free(struct kverbs_domain *dom)
{
	crypto_free_shash(dom->auth_tfm);	/* NULL-safe */
	dom->auth_tfm = NULL;
}

#ifdef KVERBS_TESTING
/*
 * Test builds: break our outgoing proof as kverbs_test_auth_mask says.
 * The previous proof is kept for a replay; concurrent connects share it,
 * which a test that connects once at a time does not mind.
 */
static u8 kverbs_test_last_proof[KVERBS_CM_PROOF_LEN];

static void kverbs_test_auth_tamper(u8 *proof)
{
	u8 fresh[KVERBS_CM_PROOF_LEN];

	memcpy(fresh, proof, sizeof(fresh));
	if (kverbs_test_auth(KVERBS_TEST_AUTH_REPLAY))
		memcpy(proof, kverbs_test_last_proof, sizeof(fresh));
	if (kverbs_test_auth(KVERBS_TEST_AUTH_CORRUPT))
		proof[0] ^= 1;
	memcpy(kverbs_test_last_proof, fresh, sizeof(fresh));
}
#else
static void kverbs_test_auth_tamper(u8 *proof)
{
}
#endif

/*
 * Count, trace and log (rate limited) one failed authentication; the
 * caller set KVERBS_EP_F_AUTH_FAILED first, so each endpoint counts once.
 */
static void kverbs_auth_record(struct kverbs_ep *ep, const char *why, int err)
{
	atomic64_inc(&ep->dom->auth_failures);
	trace_kverbs_auth(ep, why, err);
	kverbs_ep_log(warn, ep, "node %u at %pISpc failed authentication: %s (%d)\n",
		      ep->peer_node, &ep->peer_addr, why, err);
}

/*
 * A peer failed authentication: record it once and close the endpoint.
 * Nothing of the domain's client ran for it, and nothing will.  FAILED is
 * set under ep->lock, where kverbs_ep_auth_check() and the deadline decide.
 */
static void kverbs_auth_fail(struct kverbs_ep *ep, const char *why, int err)
{
	bool first;

	spin_lock_bh(&ep->lock);
	first = !test_and_set_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags);
	spin_unlock_bh(&ep->lock);
	if (first)
		kverbs_auth_record(ep, why, err);
	kverbs_ep_fail(ep, err);
}

/**
 * kverbs_ep_auth_teardown - an accepted endpoint closes before its proof
 * @ep: endpoint in teardown, its auth work cancelled
 *
 * A peer that disconnects, or refuses our accept, without proving the key
 * (it found our proof wrong, or never had the key) failed too: it is
 * counted like the others.  One whose refusal said so (KVERBS_CM_EAUTH)
 * was counted when it came (-EACCES).
 *
 * Context: process (teardown).
 */
void kverbs_ep_auth_teardown(struct kverbs_ep *ep)
{
	/* Our own closes (destroy, device removal) are not the peer's. */
	if (!kverbs_ep_auth_pending(ep) ||
	    (ep->error != -ECONNRESET && ep->error != -ECONNREFUSED) ||
	    test_and_set_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags))
		return;
	kverbs_auth_record(ep, "closed before its proof", ep->error);
}

/**
 * kverbs_ep_auth_request - an active endpoint's request: a fresh nonce
 * @ep: endpoint of a keyed domain, route resolved, before its connect
 * @priv: our announcement as the request carries it
 * @auth: the request's authentication part
 *
 * Records our view of the connection for the proofs.
 *
 * Context: process.
 */
void kverbs_ep_auth_request(struct kverbs_ep *ep,
			    const struct kverbs_cm_priv *priv,
			    struct kverbs_cm_auth *auth)
{
	struct kverbs_auth_input *in = &ep->auth.in;
	struct rdma_addr *ra = &ep->cm_id->route.addr;

	get_random_bytes(in->nc, sizeof(in->nc));
	in->client = *priv;
	kverbs_auth_addr((struct sockaddr *)&ra->src_addr, in->client_addr);
	kverbs_auth_addr((struct sockaddr *)&ra->dst_addr, in->server_addr);
	memcpy(auth->nonce, in->nc, sizeof(auth->nonce));
	memset(auth->proof, 0, sizeof(auth->proof));
}

/**
 * kverbs_ep_auth_accept - a passive endpoint's answer: nonce and proof
 * @ep: accepted endpoint of a keyed domain; kverbs_ep_auth_peer() took the
 *	request's part
 * @priv: our announcement as the accept carries it
 * @auth: the accept's authentication part
 *
 * Arms the wait for the peer's proof: kverbs_ep_connected() then leaves
 * ->connected to kverbs_ep_auth_work().
 *
 * Context: process (the endpoint's CM handler).
 * Return: 0 or the crypto API's error.
 */
int kverbs_ep_auth_accept(struct kverbs_ep *ep,
			  const struct kverbs_cm_priv *priv,
			  struct kverbs_cm_auth *auth)
{
	struct kverbs_auth_input *in = &ep->auth.in;
	int ret;

	get_random_bytes(in->ns, sizeof(in->ns));
	in->server = *priv;
	memcpy(auth->nonce, in->ns, sizeof(auth->nonce));
	ret = kverbs_auth_proof(ep->dom->auth_tfm, true, in, auth->proof);
	if (!ret)
		set_bit(KVERBS_EP_F_AUTH_WAIT, &ep->flags);
	return ret;
}

/**
 * kverbs_ep_auth_peer - an accepted endpoint keeps the request's part
 * @ep: endpoint just created for a request to a keyed domain
 * @data: the request's private data, its announcement first
 * @auth: the request's authentication part
 *
 * Records the peer's nonce and announcement and this side's view of the
 * addresses (the peer's is the same connection seen from the other end).
 *
 * Context: process (the listener's CM handler).
 */
void kverbs_ep_auth_peer(struct kverbs_ep *ep, const void *data,
			 const struct kverbs_cm_auth *auth)
{
	struct kverbs_auth_input *in = &ep->auth.in;
	struct rdma_addr *ra = &ep->cm_id->route.addr;

	memcpy(in->nc, auth->nonce, sizeof(in->nc));
	memcpy(&in->client, data, sizeof(in->client));
	kverbs_auth_addr((struct sockaddr *)&ra->dst_addr, in->client_addr);
	kverbs_auth_addr((struct sockaddr *)&ra->src_addr, in->server_addr);
}

/**
 * kverbs_ep_auth_established - an active endpoint checks the accept
 * @ep: endpoint of a keyed domain, the accept's announcement parsed
 * @data: the accept's private data, its announcement first
 * @auth: the accept's authentication part
 *
 * On success our proof waits in @ep for kvmsg to send first.
 *
 * Context: process (the endpoint's CM handler).
 * Return: 0, or -EACCES after failing the endpoint.
 */
int kverbs_ep_auth_established(struct kverbs_ep *ep, const void *data,
			       const struct kverbs_cm_auth *auth)
{
	struct kverbs_domain *dom = ep->dom;
	struct kverbs_auth_input *in = &ep->auth.in;

	memcpy(in->ns, auth->nonce, sizeof(in->ns));
	memcpy(&in->server, data, sizeof(in->server));
	if (!kverbs_auth_verify(dom->auth_tfm, true, in, auth->proof)) {
		kverbs_auth_fail(ep, "the accept's proof is wrong", -EACCES);
		return -EACCES;
	}
	if (kverbs_auth_proof(dom->auth_tfm, false, in, ep->auth.proof)) {
		kverbs_auth_fail(ep, "cannot compute our proof", -EACCES);
		return -EACCES;
	}
	kverbs_test_auth_tamper(ep->auth.proof);
	set_bit(KVERBS_EP_F_AUTH_SEND, &ep->flags);
	return 0;
}

/**
 * kverbs_ep_auth_check - the upper layer received the peer's first message
 * @ep: endpoint
 * @is_proof: it is a KVMSG_TYPE_AUTH message
 * @proof: its payload
 * @len: payload bytes
 *
 * Called for the first message on an endpoint that waits for a proof, and
 * for any proof message.  A good proof lets kverbs_ep_auth_work() call
 * ->connected now; anything else fails the endpoint.
 *
 * Context: softirq (receive completion).
 * Return: 0 if the proof is good, else -EACCES (the endpoint is failed).
 */
int kverbs_ep_auth_check(struct kverbs_ep *ep, bool is_proof,
			 const void *proof, u32 len)
{
	struct kverbs_domain *dom = ep->dom;
	bool waiting, ok;

	spin_lock_bh(&ep->lock);
	waiting = kverbs_ep_auth_pending(ep);
	spin_unlock_bh(&ep->lock);
	if (!waiting || !is_proof || len != KVERBS_CM_PROOF_LEN) {
		kverbs_auth_fail(ep, !waiting ? "a proof nobody asked for" :
				 !is_proof ? "a message before its proof" :
				 "a proof of the wrong length", -EACCES);
		return -EACCES;
	}
	ok = kverbs_auth_verify(dom->auth_tfm, false, &ep->auth.in, proof);
	if (!ok) {
		kverbs_auth_fail(ep, "wrong proof (another key, or a replay)",
				 -EACCES);
		return -EACCES;
	}
	/*
	 * The decision is made once, under ep->lock: a deadline that failed
	 * the endpoint meanwhile (FAILED) wins, and no ->connected follows.
	 */
	spin_lock_bh(&ep->lock);
	ok = !test_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags);
	if (ok) {
		set_bit(KVERBS_EP_F_AUTH_PASSED, &ep->flags);
		/* Connected already: ->connected may run now, else at connect. */
		if (ep->state == KVERBS_EP_CONNECTED)
			mod_delayed_work(dom->wq, &ep->auth_work, 0);
	}
	spin_unlock_bh(&ep->lock);
	if (!ok)
		return -EACCES;
	trace_kverbs_auth(ep, "authenticated", 0);
	return 0;
}

/**
 * kverbs_ep_auth_work - an accepted endpoint's proof arrived, or its time
 * @work: kverbs_ep.auth_work
 *
 * Queued when the endpoint connects (delayed by KVERBS_AUTH_TIMEOUT_MS) and
 * again, at once, when a good proof arrives; either order.  Teardown
 * cancels it, and waits for a running ->connected, before @disconnected.
 *
 * Context: process (the domain's workqueue).
 */
void kverbs_ep_auth_work(struct work_struct *work)
{
	struct kverbs_ep *ep = container_of(to_delayed_work(work),
					    struct kverbs_ep, auth_work);
	bool live, passed, notify;

	bool late;

	spin_lock_bh(&ep->lock);
	live = ep->state == KVERBS_EP_CONNECTED &&
	       !test_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags);
	passed = test_bit(KVERBS_EP_F_AUTH_PASSED, &ep->flags);
	notify = live && passed &&
		 !test_and_set_bit(KVERBS_EP_F_NOTIFIED, &ep->flags);
	/* Decided under the lock: a proof arriving now finds FAILED. */
	late = live && !passed &&
	       !test_and_set_bit(KVERBS_EP_F_AUTH_FAILED, &ep->flags);
	spin_unlock_bh(&ep->lock);
	if (notify) {
		kverbs_ep_notify(ep);
	} else if (late) {
		kverbs_auth_record(ep, "no proof in time", -ETIMEDOUT);
		kverbs_ep_fail(ep, -ETIMEDOUT);
	}
}
