// SPDX-License-Identifier: GPL-2.0-only
//
// The page protocol's effector; see engine.hpp.  Unlike the kernel's, it
// never defers: every event runs to its end where it arrives (the
// progress thread for a peer's message, the faulting thread for a fault),
// under core::mu, waiting where the kernel's softirq could not (a send
// that finds the socket or the send queue full waits for room).  Per-page
// order, all the protocol needs, follows: one thread delivers a peer's
// messages in arrival order, and every event of a page completes under
// the lock before the next starts.
#include "engine-pri.hpp"

#include "futex.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace udsm {

static_assert(int(UDSM_HELLO) == int(KDSM_HELLO) && int(UDSM_BYE) == int(KDSM_CTL_END));
static_assert(msg_len == KDSM_MSG_LEN);

std::uint64_t now_ns()
{
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now().time_since_epoch()).count());
}

core::core(const config &c, transport &t, protector &p, stats &s)
    : tr(t), pr(p), st(s), pg(c.npages), home(c.npages), homeq(c.npages),
      homeq_len(c.npages), fault_t0(c.npages),
      grant_word(std::make_unique<std::atomic<std::uint32_t>[]>(c.npages)),
      lw(KDSM_MAX_LOCKS), lm(KDSM_MAX_LOCKS), qls(KDSM_MAX_LOCKS)
{
    geo.self = static_cast<u8>(c.node);
    geo.nnodes = static_cast<u8>(c.nnodes());
    geo.block = c.block;
    geo.fetch = false;  // KDSM_OPT_FETCH_READ is not offered
    geo.npages = c.npages;
    // every page starts at its home, owned, RW (the kernel's create)
    for (std::uint32_t p = 0; p < c.npages; p++) {
        const u8 h = kdsm_home_of(&geo, p);
        home[p].owner = h;
        if (h == geo.self)
            pg[p] = kdsm_page{.prot = KDSM_RW, .owner = true, .pending = 0, .fetching = false,
                              .reply_seen = false, .acks_needed = 0, .acks_seen = 0};
    }
}

void core::die(const std::string &why)
{
    std::fprintf(stderr, "udsm: node %u: %s\n", geo.self, why.c_str());
    std::fflush(stderr);
    std::_Exit(3);
}

namespace {

kdsm_msg wire(u8 type, std::uint32_t page, u8 node, u8 acks, u8 flags)
{
    kdsm_msg m{};
    m.type = type;
    m.flags = flags;
    m.page = __builtin_bswap32(page);
    m.node = node;
    m.acks = acks;
    return m;
}

std::uint32_t page_of(const kdsm_msg &m) { return __builtin_bswap32(m.page); }

void self_push(core &k, event &ev, u8 from, const kdsm_msg &m)
{
    if (ev.nself - ev.iself >= ev.self.size())
        k.die("an event sent itself more than one message at once");
    if (ev.iself == ev.nself)
        ev.iself = ev.nself = 0;
    ev.self[ev.nself++] = {from, m};
}

// Apply @m from @from to the page's state; the actions land in @ev.
int transition(core &k, event &ev, u8 from, const kdsm_msg &m)
{
    const std::uint32_t page = page_of(m);
    int n;
    switch (m.type) {
    case KDSM_READ_REQ:
    case KDSM_WRITE_REQ:
        n = kdsm_home_request(&k.geo, &k.home[page], from, m.type == KDSM_WRITE_REQ, ev.acts);
        break;
    case KDSM_DONE:
        n = kdsm_home_done(&k.geo, &k.home[page], from, ev.acts);
        break;
    default:
        n = kdsm_page_event(&k.geo, &k.pg[page], page, from, &m, ev.acts);
        if (n >= 0 && m.type == KDSM_INV)
            k.st.add(KDSM_STAT_INVALIDATIONS);
    }
    if (n < 0)
        return n;
    ev.page = page;
    ev.nacts = n;
    ev.iact = 0;
    return 0;
}

// The home's request queue: a node has one request per page outstanding.
int home_queue(core &k, std::uint32_t page, const kdsm_act &a)
{
    const u8 len = k.homeq_len[page];
    for (u8 i = 0; i < len; i++)
        if ((k.homeq[page][i] & 0xf) == a.node)
            return -EPROTO;
    if (len >= k.geo.nnodes)
        return -EPROTO;
    k.homeq[page][len] = static_cast<u8>(a.node | a.type << 4);
    k.homeq_len[page] = len + 1;
    return 0;
}

// The home's next queued request becomes a message to itself.
void home_next(core &k, event &ev)
{
    const std::uint32_t page = ev.page;
    if (!k.homeq_len[page])
        return;
    const u8 q = k.homeq[page][0];
    std::memmove(k.homeq[page].data(), k.homeq[page].data() + 1, --k.homeq_len[page]);
    self_push(k, ev, q & 0xf, wire(q >> 4, page, 0, 0, 0));
}

prot to_prot(u8 p) { return p == KDSM_RW ? prot::rw : p == KDSM_READ ? prot::read : prot::none; }

// Carry out one action; a peer request that overflows the home's queue
// returns -EPROTO.
int act(core &k, event &ev, const kdsm_act &a)
{
    switch (a.kind) {
    case KDSM_ACT_SEND: {
        const kdsm_msg m = wire(a.type, ev.page, a.node, a.acks, a.flags);
        if (a.to == k.geo.self)
            self_push(k, ev, k.geo.self, m);
        else
            k.tr.send(a.to, &m);
        return 0;
    }
    case KDSM_ACT_DATA:
        k.tr.write_page(a.to, ev.page);
        return 0;
    case KDSM_ACT_FETCH:
        k.die("page " + std::to_string(ev.page) + ": a fetch without the fetch option");
    case KDSM_ACT_REVOKE:
        k.pr.set(ev.page, to_prot(a.prot));
        return 0;
    case KDSM_ACT_GRANT:
        k.pr.set(ev.page, to_prot(a.prot));
        if (k.fault_t0[ev.page]) {
            k.st.fault_done(now_ns() - k.fault_t0[ev.page]);
            k.fault_t0[ev.page] = 0;
        }
        k.grant_word[ev.page].fetch_add(1, std::memory_order_release);
        futex_wake_all(&k.grant_word[ev.page]);
        return 0;
    case KDSM_ACT_QUEUE:
        return home_queue(k, ev.page, a);
    case KDSM_ACT_NEXT:
        home_next(k, ev);
        return 0;
    }
    k.die("unknown action " + std::to_string(a.kind));
}

// Run @ev's actions, then its messages to itself, to the end.
int run(core &k, event &ev)
{
    for (;;) {
        while (ev.iact < ev.nacts) {
            const int ret = act(k, ev, ev.acts[ev.iact]);
            if (ret)
                return ret;
            ev.iact++;
        }
        if (ev.iself == ev.nself)
            return 0;
        const event::self_msg s = ev.self[ev.iself++];
        if (transition(k, ev, s.from, s.m))
            k.die("page " + std::to_string(page_of(s.m)) + ": our own message of type " +
                  std::to_string(s.m.type) + " does not fit");
    }
}

}  // namespace

engine::engine(const config &c, transport &t, protector &p, stats &st)
    : c_(std::make_unique<core>(c, t, p, st))
{
}

engine::~engine() = default;

prot engine::current(std::uint32_t page)
{
    std::lock_guard l(c_->mu);
    return to_prot(c_->pg[page].prot);
}

namespace {

// Count a fault and send its request.
void request(core &k, std::uint32_t page, bool write)
{
    // one request per page until its grant, as kvmem calls kdsm
    k.st.add(write ? KDSM_STAT_WRITE_FAULTS : KDSM_STAT_READ_FAULTS);
    if (write && k.pg[page].prot == KDSM_READ)
        k.st.add(KDSM_STAT_UPGRADES);
    k.fault_t0[page] = now_ns();
    event ev;
    ev.page = page;
    ev.nacts = kdsm_fault(&k.geo, &k.pg[page], page, write, ev.acts);
    if (ev.nacts < 0 || run(k, ev))
        k.die("fault on page " + std::to_string(page) + ": protocol error");
}

}  // namespace

void engine::fault_async(std::uint32_t page, bool write)
{
    core &k = *c_;
    std::lock_guard l(k.mu);
    if (k.pg[page].prot >= (write ? KDSM_RW : KDSM_READ))
        k.pr.set(page, to_prot(k.pg[page].prot));
    else if (!k.pg[page].pending)
        request(k, page, write);
    // else: the pending request's grant wakes the thread; it faults again
}

void engine::fault(std::uint32_t page, bool write)
{
    core &k = *c_;
    const u8 need = write ? KDSM_RW : KDSM_READ;
    std::unique_lock l(k.mu);
    while (k.pg[page].prot < need) {
        if (!k.pg[page].pending) {
            request(k, page, write);
            continue;  // at its own home it may be granted already
        }
        const std::uint32_t w = k.grant_word[page].load(std::memory_order_acquire);
        l.unlock();
        futex_wait(&k.grant_word[page], w);
        l.lock();
    }
}

void engine::deliver(unsigned from, const std::uint8_t *raw)
{
    core &k = *c_;
    const std::uint64_t t0 = now_ns();
    // without the lock: a sender that found the peer gone holds it
    if (raw[0] == KDSM_ABORT) {
        std::fprintf(stderr, "udsm: node %u lost node %u (node %u lost it)\n", k.geo.self,
                     raw[2], from);
        std::_Exit(3);
    }
    std::unique_lock l(k.mu);
    if (raw[0] >= KDSM_WIRE_CTL_FIRST) {
        kdsm_sig s;
        std::memcpy(&s, raw, sizeof(s));
        const bool q = s.type >= KDSM_QL_NEXT && s.type <= KDSM_QL_CAS_DONE;
        if (q ? k.qlock_recv(static_cast<u8>(from), s) : k.sync_apply(static_cast<u8>(from), s))
            k.die("node " + std::to_string(from) + "'s lock or barrier message of type " +
                  std::to_string(raw[0]) + " is malformed or out of turn");
    } else {
        kdsm_msg m;
        std::memcpy(&m, raw, sizeof(m));
        event ev;
        if (kdsm_msg_check(&k.geo, &m, msg_len, static_cast<u8>(from)) ||
            transition(k, ev, static_cast<u8>(from), m) || run(k, ev)) {
            k.st.add(KDSM_STAT_MALFORMED);
            k.die("node " + std::to_string(from) + "'s message of type " +
                  std::to_string(m.type) + " for page " + std::to_string(page_of(m)) +
                  " does not fit");
        }
    }
    l.unlock();
    k.st.add(KDSM_STAT_EV_DEFER_MODE);
    k.st.add(KDSM_STAT_DEFER_NS, now_ns() - t0);
}

void engine::lost(unsigned node, const std::string &why)
{
    std::fprintf(stderr, "udsm: node %u lost node %u (%s)\n", c_->geo.self, node, why.c_str());
    std::fflush(stderr);
    // the others fail on the same node, not on this one's exit (cluster.c)
    kdsm_sig s{};
    s.type = KDSM_ABORT;
    s.node = static_cast<u8>(node);
    c_->tr.abort_all(&s);
    // every waiting thread ends with the process: none sleeps on
    std::_Exit(3);
}

}  // namespace udsm
