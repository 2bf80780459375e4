// SPDX-License-Identifier: GPL-2.0-only
//
// libudsm's effector: samples/kdsm/engine.c's job in user space.  It
// feeds the events (a peer's message, a fault of this node's thread, a
// message this node sent itself) to the transitions of the kernel's
// samples/kdsm/proto.c, compiled unchanged, and carries out the actions
// they return: sends and page data through the transport, protection
// changes of the application view through the access control.  The
// kernel-kind locks and barriers of samples/kdsm/sync.c are sync.cpp.
//
// This header does not include proto.h: its kernel types need the shim
// (tools/udsm/shim), which system <linux/...> headers must not meet.
#pragma once

#include "config.hpp"
#include "stats.hpp"
#include "transport.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace udsm {

// Protections of a page in the application view, as enum kdsm_prot.
enum class prot : std::uint8_t { none, read, rw };

// The application view's access control (segv: mprotect; uffd:
// userfaultfd).  set() runs under the engine's lock, in event order per
// page; it also wakes a thread waiting in the kernel for the page (uffd).
class protector {
public:
    virtual void set(std::uint32_t page, prot p) = 0;

protected:
    ~protector() = default;
};

struct core;

class engine final : public sink {
public:
    engine(const config &c, transport &t, protector &p, stats &st);
    ~engine();
    engine(const engine &) = delete;
    engine &operator=(const engine &) = delete;

    // The faulting thread: request @page (@write: for writing) and sleep
    // until the page's protection allows the access.
    void fault(std::uint32_t page, bool write);
    // The fault of a thread that waits in the kernel (uffd), read by the
    // progress thread: send the request, or, when the protection allows
    // the access already, set() it again; never sleeps.
    void fault_async(std::uint32_t page, bool write);
    // this node's protection of @page now (for a fault whose kind the
    // signal does not tell)
    prot current(std::uint32_t page);

    void deliver(unsigned from, const std::uint8_t *msg) override;
    [[noreturn]] void lost(unsigned node, const std::string &why) override;

    // Kernel-kind locks and barriers (sync.cpp): 0 or an errno as the
    // kernel's ioctls return (EBUSY, EPERM, EINVAL).
    int lock(std::uint32_t id);
    int unlock(std::uint32_t id);
    int barrier();
    // The queue lock on the transport's compare-and-swap (qlock.cpp): as
    // the kernel's KDSM_LOCK_ATOMIC (EBUSY, EPERM, EOPNOTSUPP).
    int qlock(std::uint32_t id);
    int qunlock(std::uint32_t id);
    void cas_done(std::uint32_t id, bool px, std::uint64_t raw) override;
    // Before leaving: until no queue lock of this node has a CAS, NEXT or
    // PASS still to come or go (a release returns before them), bounded.
    void quiesce();

private:
    std::unique_ptr<core> c_;
};

}  // namespace udsm
