// SPDX-License-Identifier: GPL-2.0-only
//
// Kernel-kind locks and barriers, samples/kdsm/sync.c's semantics on the
// same control messages (struct kdsm_sig: LOCK_REQ, LOCK_GRANT, UNLOCK,
// BAR_ENTER, BAR_GO):
//
// Lock @id's manager is node id % nnodes + 1; it grants in request order,
// one holder at a time.  A node asks once per lock at a time: libkdsm's
// mutex serialises its own threads first, and a second thread asking for
// a lock its node waits for or holds gets EBUSY; an unlock of a lock not
// held is EPERM.  A barrier is a generation: node 1 collects BAR_ENTER of
// generation g from every node (itself included) and sends BAR_GO g to
// all; one thread per node enters at a time (EBUSY otherwise).
//
// Sequential consistency as in the kernel: an access either has the
// page's protection or waits for its transaction, so what a thread wrote
// before an unlock or a barrier is performed when the message leaves.
//
// Sends never fail for want of a buffer here (the transport waits), so
// nothing is deferred; under core::mu throughout.
#include "engine-pri.hpp"

#include <cstring>

namespace udsm {

namespace {

u8 mgr_of(const core &k, std::uint32_t id) { return kdsm_lock_mgr_of(&k.geo, id); }

void granted(core &k, std::uint32_t id)
{
    k.lw[id].held = true;
    k.lw[id].waiting = false;
    k.st.add(KDSM_STAT_LOCKS);
    k.sync_cv.notify_all();
}

// Manager: @from asks for lock @id.
int mgr_request(core &k, std::uint32_t id, u8 from)
{
    lockmgr &m = k.lm[id];
    if (m.holder == from)
        return -EPROTO;
    for (u8 i = 0; i < m.nq; i++)
        if (m.q[i] == from)
            return -EPROTO;
    if (m.holder) {
        if (m.nq >= k.geo.nnodes)
            return -EPROTO;
        m.q[m.nq++] = from;
        return 0;
    }
    m.holder = from;
    if (from == k.geo.self)
        granted(k, id);
    else
        k.send_sig(from, KDSM_LOCK_GRANT, id, 0);
    return 0;
}

// Manager: @from releases lock @id; the next in line gets it.
int mgr_release(core &k, std::uint32_t id, u8 from)
{
    lockmgr &m = k.lm[id];
    if (m.holder != from)
        return -EPROTO;
    const u8 next = m.nq ? m.q[0] : 0;
    m.holder = next;
    if (!next)
        return 0;
    std::memmove(m.q.data(), m.q.data() + 1, --m.nq);
    if (next == k.geo.self)
        granted(k, id);
    else
        k.send_sig(next, KDSM_LOCK_GRANT, id, 0);
    return 0;
}

// Node 1, the barriers' manager: @from entered generation @gen.
int bar_enter(core &k, u8 from, std::uint32_t gen)
{
    if (k.geo.self != 1 || gen != k.mgr_gen + 1 || k.mgr_entered & (1u << (from - 1)))
        return -EPROTO;
    const u8 entered = static_cast<u8>(k.mgr_entered | 1u << (from - 1));
    if (__builtin_popcount(entered) < k.geo.nnodes) {
        k.mgr_entered = entered;
        return 0;
    }
    k.mgr_entered = 0;
    k.mgr_gen = gen;
    for (u8 n = 2; n <= k.geo.nnodes; n++)
        k.send_sig(n, KDSM_BAR_GO, 0, gen);
    k.bar_passed = gen;
    k.sync_cv.notify_all();
    return 0;
}

}  // namespace

void core::send_sig(std::uint8_t to, std::uint8_t type, std::uint32_t id, std::uint32_t gen)
{
    kdsm_sig s{};
    s.type = type;
    s.id = __builtin_bswap32(id);
    s.gen = __builtin_bswap32(gen);
    tr.send(to, &s);
}

int core::sync_apply(std::uint8_t from, const kdsm_sig &s)
{
    const std::uint32_t id = __builtin_bswap32(s.id), gen = __builtin_bswap32(s.gen);
    switch (s.type) {
    case KDSM_LOCK_REQ:
    case KDSM_LOCK_GRANT:
    case KDSM_UNLOCK:
        if (id >= KDSM_MAX_LOCKS || gen || s.code || s.node)
            return -EPROTO;
        break;
    case KDSM_BAR_ENTER:
    case KDSM_BAR_GO:
        if (id || s.code || s.node)
            return -EPROTO;
        break;
    default:
        return -EPROTO;
    }
    switch (s.type) {
    case KDSM_LOCK_REQ:
        return mgr_of(*this, id) == geo.self ? mgr_request(*this, id, from) : -EPROTO;
    case KDSM_UNLOCK:
        return mgr_of(*this, id) == geo.self ? mgr_release(*this, id, from) : -EPROTO;
    case KDSM_LOCK_GRANT:
        if (from != mgr_of(*this, id) || !lw[id].waiting)
            return -EPROTO;
        granted(*this, id);
        return 0;
    case KDSM_BAR_ENTER:
        return bar_enter(*this, from, gen);
    default:  // KDSM_BAR_GO
        if (from != 1 || gen != bar_passed + 1 || gen > bar_gen)
            return -EPROTO;
        bar_passed = gen;
        sync_cv.notify_all();
        return 0;
    }
}

int engine::lock(std::uint32_t id)
{
    core &k = *c_;
    if (id >= KDSM_MAX_LOCKS)
        return EINVAL;
    std::unique_lock l(k.mu);
    lockwait &w = k.lw[id];
    if (w.waiting || w.held || k.qlock_busy(id))
        return EBUSY;  // of either kind
    w.waiting = true;
    const u8 mgr = mgr_of(k, id);
    if (mgr == k.geo.self) {
        if (mgr_request(k, id, mgr))
            k.die("lock " + std::to_string(id) + ": our own request does not fit");
    } else {
        k.send_sig(mgr, KDSM_LOCK_REQ, id, 0);
    }
    k.sync_cv.wait(l, [&] { return w.held; });
    return 0;
}

int engine::unlock(std::uint32_t id)
{
    core &k = *c_;
    if (id >= KDSM_MAX_LOCKS)
        return EINVAL;
    std::lock_guard l(k.mu);
    if (!k.lw[id].held)
        return EPERM;  // two threads raced to unlock: one gives it back
    const u8 mgr = mgr_of(k, id);
    if (mgr == k.geo.self) {
        if (mgr_release(k, id, mgr))
            k.die("unlock " + std::to_string(id) + ": our own release does not fit");
    } else {
        k.send_sig(mgr, KDSM_UNLOCK, id, 0);
    }
    k.lw[id].held = false;
    return 0;
}

int engine::barrier()
{
    core &k = *c_;
    std::unique_lock l(k.mu);
    if (k.bar_busy)
        return EBUSY;
    const std::uint32_t gen = k.bar_gen + 1;
    k.bar_gen = gen;
    k.bar_busy = true;
    if (k.geo.self == 1) {
        if (bar_enter(k, 1, gen))
            k.die("barrier " + std::to_string(gen) + ": our own entry does not fit");
    } else {
        k.send_sig(1, KDSM_BAR_ENTER, 0, gen);
    }
    k.sync_cv.wait(l, [&] { return k.bar_passed >= gen; });
    k.bar_busy = false;
    k.st.add(KDSM_STAT_BARRIERS);
    return 0;
}

}  // namespace udsm
