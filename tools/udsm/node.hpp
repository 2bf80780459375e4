// SPDX-License-Identifier: GPL-2.0-only
//
// One node of a udsm cluster in this process: the region, the transport,
// the engine, the access control of the application view and the
// progress thread.
//
// The region is a memfd mapped twice: the application view, whose
// protection follows the protocol's (PROT_NONE invalid, PROT_READ a READ
// copy, RW a WRITE one), and the engine view, always RW, through which
// page data moves (the verbs MR covers it).  Both are MADV_DONTFORK.
#pragma once

#include "config.hpp"
#include "engine.hpp"
#include "stats.hpp"
#include "transport.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

namespace udsm {

// The region's two views of one memfd.
class region {
public:
    // @app_open: the application view RW (its access control is not
    // the mapping's protection: uffd), else PROT_NONE
    region(std::size_t bytes, bool app_open);
    ~region();
    region(const region &) = delete;
    region &operator=(const region &) = delete;

    std::uint8_t *app() const { return app_; }
    std::uint8_t *eng() const { return eng_; }
    std::size_t bytes() const { return bytes_; }

private:
    int fd_ = -1;
    std::size_t bytes_;
    std::uint8_t *app_ = nullptr, *eng_ = nullptr;
};

// The application view's access control: the protector the engine
// drives, and where the faults come from.  One per process.
class access : public protector {
public:
    virtual ~access() = default;
    // Faults go to @e from now on.
    virtual void attach(engine &e) = 0;
    // uffd: the descriptor the progress thread reads faults from (-1:
    // none), and the reading, without blocking
    virtual int fault_fd() const { return -1; }
    virtual void read_faults() {}
};

// SIGSEGV (access_segv.cpp): mprotect of the application view; the
// handler runs engine::fault() in the faulting thread.
std::unique_ptr<access> make_segv_access(std::uint8_t *app, std::size_t page_size,
                                         std::uint32_t npages);
// userfaultfd (access_uffd.cpp): minor faults and write-protection of the
// application view, the faults read by the progress thread; a kernel
// without a feature it needs ends the process (exit status 77) naming it.
std::unique_ptr<access> make_uffd_access(std::uint8_t *app, std::size_t page_size,
                                         std::uint32_t npages);

class node {
public:
    explicit node(const config &c);  // forms the cluster; throws
    ~node();                         // leaves: BYE, then the progress thread ends
    node(const node &) = delete;
    node &operator=(const node &) = delete;

    const config &cfg() const { return c_; }
    std::size_t page_size() const { return ps_; }
    std::uint8_t *base() const { return reg_.app(); }
    engine &eng() { return *eng_; }
    stats &counters() { return st_; }

private:
    const config c_;
    const std::size_t ps_;
    region reg_;
    stats st_;
    std::unique_ptr<transport> tr_;
    std::unique_ptr<access> acc_;
    std::unique_ptr<engine> eng_;
    std::jthread progress_;
};

}  // namespace udsm
