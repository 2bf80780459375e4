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
    explicit region(std::size_t bytes);
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

// Access control by SIGSEGV (access_segv.cpp): protection by mprotect of
// the application view; a fault's handler runs engine::fault() in the
// faulting thread.  One per process.
class segv_access final : public protector {
public:
    segv_access(std::uint8_t *app, std::size_t page_size, std::uint32_t npages);
    ~segv_access();
    // the engine faults go to, once it exists; the handler is installed
    void attach(engine &e);
    void set(std::uint32_t page, prot p) override;

private:
    std::uint8_t *app_;
    std::size_t ps_;
};

// UDSM_ACCESS=uffd (access_uffd.cpp): checks what the kernel offers;
// refuses (exit status 77) with the missing feature named.
[[noreturn]] void uffd_refuse();

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
    std::unique_ptr<segv_access> acc_;
    std::unique_ptr<engine> eng_;
    std::jthread progress_;
};

}  // namespace udsm
