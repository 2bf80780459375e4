// SPDX-License-Identifier: GPL-2.0-only
//
// The queue lock (lock_kind::atomic): samples/kdsm/qlock.c's effector for
// the transitions of samples/kdsm/qproto.c, compiled unchanged.  Lock
// @id's word is word @id / nnodes of the lock words at its manager, node
// @id % nnodes + 1; it holds the queue's tail and only compare-and-swap
// touches it: the transport's (an RDMA atomic on verbs; on the unix
// transport the manager's progress thread runs it, so all of a word's
// CASes are still serialised at the word's node).  The manager's own
// CAS goes through its helper (kdsm_q_helper(), QL_CAS / QL_CAS_DONE), as
// an endpoint does not reach its own node.  NEXT and PASS move the lock
// along the queue; Documentation/kdsm-design.rst, "The queue lock".
//
// Unlike the kernel's, an action never finds the transport without
// room (a send waits for it), so nothing is left for a retry worker: each
// transition is followed by its action at once, under core::mu.  Waiters
// sleep on sync_cv.  Sequential consistency as in qlock.c: a critical
// section's accesses are performed before unlock is called, and the
// PASS or the freeing CAS leaves after that.
#include "engine-pri.hpp"

#include <chrono>
#include <cstring>

namespace udsm {

namespace {

// ql::px_state: the one CAS on the manager's word it asked us, its helper,
// for: POST it, BUSY in flight, REPLY with its result
enum px_state : std::uint8_t { px_idle, px_post, px_busy, px_reply };

void ql_send(core &k, u8 to, u8 type, std::uint32_t id, u8 code, u8 node)
{
    kdsm_sig s{};
    s.type = type;
    s.code = code;
    s.node = node;
    s.id = __builtin_bswap32(id);
    k.tr.send(to, &s);
}

// CAS lock @id's word at its manager, into our slot @px; false: no
// atomics on the way.
bool ql_cas(core &k, std::uint32_t id, bool px, u8 cmp, u8 swap)
{
    if (!k.tr.cas(kdsm_lock_mgr_of(&k.geo, id), id, px, cmp, swap))
        return false;
    k.st.add(KDSM_STAT_ATOMIC_OPS);
    return true;
}

// Lock @id's next action, if any.
void ql_act(core &k, std::uint32_t id)
{
    ql &l = k.qls[id];
    const u8 self = k.geo.self, mgr = kdsm_lock_mgr_of(&k.geo, id);
    kdsm_qact_arg a{};
    const int act = kdsm_q_action(&k.geo, &l.q, &a);
    switch (act) {
    case KDSM_QA_NONE:
        return;
    case KDSM_QA_CAS:
        if (mgr == self) {
            ql_send(k, kdsm_q_helper(&k.geo, self), KDSM_QL_CAS, id, a.cmp, a.swap);
        } else if (!ql_cas(k, id, false, a.cmp, a.swap)) {
            // before this node is in the queue, the thread may hear why
            if (!kdsm_q_unsupported(&l.q)) {
                l.err = EOPNOTSUPP;
                return;
            }
            k.die("lock " + std::to_string(id) + ": no atomics to node " + std::to_string(mgr));
        }
        break;
    case KDSM_QA_NEXT:
        ql_send(k, a.to, KDSM_QL_NEXT, id, 0, 0);
        break;
    default:
        ql_send(k, a.to, KDSM_QL_PASS, id, 0, 0);
        break;
    }
    kdsm_q_performed(&l.q, act);
}

// As the manager's helper: its CAS on its word, or the answer.
void ql_px_act(core &k, std::uint32_t id)
{
    ql &l = k.qls[id];
    const u8 mgr = kdsm_lock_mgr_of(&k.geo, id);
    if (l.px_state == px_post) {
        if (ql_cas(k, id, true, l.px_cmp, l.px_swap)) {
            l.px_state = px_busy;
            return;
        }
        l.px_code = KDSM_QL_NO_ATOMICS;
        l.px_old = 0;
        l.px_state = px_reply;
    }
    if (l.px_state == px_reply) {
        ql_send(k, mgr, KDSM_QL_CAS_DONE, id, l.px_code, l.px_old);
        l.px_state = px_idle;
    }
}

// Run lock @id's action (@px: the helper's); wake the threads, whose
// lock may have changed.
void ql_kick(core &k, std::uint32_t id, bool px)
{
    if (px)
        ql_px_act(k, id);
    else
        ql_act(k, id);
    k.sync_cv.notify_all();
}

// Our CAS on lock @id's word returned tail @old (or -EPROTO).
int ql_result(core &k, std::uint32_t id, int old)
{
    const int ret = old < 0 ? old : kdsm_q_cas_result(&k.geo, &k.qls[id].q, u8(old));
    if (ret < 0)
        return ret;
    if (ret & KDSM_Q_RETRY)
        k.st.add(KDSM_STAT_CAS_RETRIES);
    if (ret & KDSM_Q_GRANTED)
        k.st.add(KDSM_STAT_ATOMIC_LOCKS);
    ql_kick(k, id, false);
    return 0;
}

}  // namespace

bool core::qlock_busy(std::uint32_t id) const
{
    return qls[id].q.state != KDSM_Q_IDLE || qls[id].q.waiter;
}

// A CAS of ours completed (the progress thread): @raw the word before.
void core::cas_done(std::uint32_t id, bool px, std::uint64_t raw)
{
    ql &l = qls[id];
    const int old = kdsm_q_word(&geo, raw);
    if (px) {
        if (old < 0 || l.px_state != px_busy)
            die("lock " + std::to_string(id) + ": the CAS for node " +
                std::to_string(kdsm_lock_mgr_of(&geo, id)) + " does not fit");
        l.px_old = u8(old);
        l.px_code = 0;
        l.px_state = px_reply;
        ql_kick(*this, id, true);
    } else if (ql_result(*this, id, old)) {
        die("lock " + std::to_string(id) + ": our CAS's result does not fit");
    }
}

int core::qlock_recv(std::uint8_t from, const kdsm_sig &s)
{
    if (kdsm_q_check(&geo, &s, from))
        return -EPROTO;
    const std::uint32_t id = __builtin_bswap32(s.id);
    ql &l = qls[id];
    int ret;
    switch (s.type) {
    case KDSM_QL_NEXT:
        ret = kdsm_q_next(&geo, &l.q, from);
        if (!ret)
            ql_kick(*this, id, false);
        return ret;
    case KDSM_QL_PASS:
        ret = kdsm_q_pass(&l.q, from);
        if (ret > 0)
            st.add(KDSM_STAT_ATOMIC_LOCKS);
        if (ret < 0)
            return ret;
        ql_kick(*this, id, false);
        return 0;
    case KDSM_QL_CAS:
        if (l.px_state != px_idle)
            return -EPROTO;
        l.px_cmp = s.code;
        l.px_swap = s.node;
        l.px_state = px_post;
        ql_kick(*this, id, true);
        return 0;
    default:  // KDSM_QL_CAS_DONE
        if (!l.q.cas_busy)
            return -EPROTO;
        if (s.code) {  // only the first CAS can meet this
            ret = kdsm_q_unsupported(&l.q);
            if (!ret) {
                l.err = EOPNOTSUPP;
                sync_cv.notify_all();
            }
            return ret;
        }
        return ql_result(*this, id, s.node);
    }
}

int engine::qlock(std::uint32_t id)
{
    core &k = *c_;
    if (id >= KDSM_MAX_LOCKS)
        return EINVAL;
    std::unique_lock l(k.mu);
    ql &q = k.qls[id];
    if (k.lw[id].waiting || k.lw[id].held || kdsm_q_busy(&q.q))
        return EBUSY;
    // our last turn may still be ending (a release's CAS or PASS)
    k.sync_cv.wait(l, [&] { return q.q.state == KDSM_Q_IDLE; });
    kdsm_q_acquire(&q.q);
    q.err = 0;
    ql_kick(k, id, false);
    k.sync_cv.wait(l, [&] { return kdsm_q_settled(&q.q); });
    if (!kdsm_q_collect(&q.q))  // never got in
        return q.err ? q.err : EIO;
    return 0;
}

int engine::qunlock(std::uint32_t id)
{
    core &k = *c_;
    if (id >= KDSM_MAX_LOCKS)
        return EINVAL;
    std::lock_guard l(k.mu);
    const int ret = kdsm_q_release(&k.qls[id].q);
    if (ret)
        return -ret;
    ql_kick(k, id, false);
    return 0;
}

void engine::quiesce()
{
    core &k = *c_;
    std::unique_lock l(k.mu);
    k.sync_cv.wait_for(l, std::chrono::seconds(10), [&] {
        for (const ql &q : k.qls)
            if (q.q.state != KDSM_Q_IDLE || q.px_state != px_idle)
                return false;
        return true;
    });
}

void engine::cas_done(std::uint32_t id, bool px, std::uint64_t raw)
{
    core &k = *c_;
    const std::uint64_t t0 = now_ns();
    {
        std::lock_guard l(k.mu);
        k.cas_done(id, px, raw);
    }
    k.st.add(KDSM_STAT_EV_DEFER_MODE);
    k.st.add(KDSM_STAT_DEFER_NS, now_ns() - t0);
}

}  // namespace udsm
