// SPDX-License-Identifier: GPL-2.0-only
//
// Access control by userfaultfd.  The application view is mapped RW and
// registered for minor faults (a memfd page present in the page cache,
// which the engine view populated, but not mapped here) and for
// write-protect faults.  What a page's protection allows is what is
// mapped: nothing (NONE), the page write-protected (READ), the page
// writable (RW):
//
//   grant or re-allow READ   UFFDIO_CONTINUE with UFFDIO_CONTINUE_MODE_WP,
//                            or UFFDIO_WRITEPROTECT on a writable mapping
//   grant or re-allow RW     UFFDIO_CONTINUE, or UFFDIO_WRITEPROTECT off
//   revoke to NONE           MADV_DONTNEED: the mapping goes (the TLB
//                            flushed before it returns), the page stays
//
// A grant wakes the threads waiting in the kernel on the page:
// UFFDIO_CONTINUE and UFFDIO_WRITEPROTECT off wake them, and setting WP
// (which wakes nobody) is followed by UFFDIO_WAKE.  A revoke to NONE
// (MADV_DONTNEED) wakes nobody, and need not: a thread waiting on the
// page is woken by the grant that ends its fault.
// The faulting threads never run libudsm code: the progress thread reads
// the faults (poll() on the descriptor in block mode, a non-blocking
// read every turn in poll mode) and hands them to engine::fault_async().
// @mapped_ is what this file did to each page, corrected by what a fault
// reports (a minor fault: not mapped; a write-protect one: mapped
// write-protected); the progress thread alone touches it, as every
// engine event that calls set() runs there in this variant.
#include "node.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// the uapi value (Linux 6.5), for C library headers older than the kernel
#ifndef UFFDIO_CONTINUE_MODE_WP
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)
#endif

namespace udsm {

namespace {

[[noreturn]] void refuse(const std::string &why)
{
    std::fprintf(stderr, "udsm: UDSM_ACCESS=uffd: %s\n", why.c_str());
    std::exit(77);
}

[[noreturn]] void fail(const char *what, std::uint32_t page)
{
    std::fprintf(stderr, "udsm: %s of page %u: %s\n", what, page, std::strerror(errno));
    std::_Exit(3);
}

enum class mapping : std::uint8_t { none, wp, rw };

class uffd_access final : public access {
public:
    uffd_access(std::uint8_t *app, std::size_t page_size, std::uint32_t npages);
    ~uffd_access() override { ::close(fd_); }

    void attach(engine &e) override { eng_ = &e; }
    int fault_fd() const override { return fd_; }
    void read_faults() override;
    void set(std::uint32_t page, prot p) override;

private:
    uffdio_range range(std::uint32_t page) const
    {
        return {reinterpret_cast<std::uintptr_t>(app_ + std::size_t(page) * ps_), ps_};
    }
    // UFFDIO_CONTINUE; false: mapped already (EEXIST)
    bool cont(std::uint32_t page, bool wp);
    void protect(std::uint32_t page, bool wp);

    std::uint8_t *app_;
    std::size_t ps_;
    int fd_ = -1;
    engine *eng_ = nullptr;
    std::vector<mapping> mapped_;
};

uffd_access::uffd_access(std::uint8_t *app, std::size_t page_size, std::uint32_t npages)
    : app_(app), ps_(page_size), mapped_(npages, mapping::none)
{
    fd_ = int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    if (fd_ < 0)
        refuse(std::string("userfaultfd: ") + std::strerror(errno));
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = 0;  // what there is
    if (::ioctl(fd_, UFFDIO_API, &api))
        refuse(std::string("UFFDIO_API: ") + std::strerror(errno));
    static const struct {
        std::uint64_t bit;
        const char *name;
    } need[] = {
        {UFFD_FEATURE_MINOR_SHMEM, "UFFD_FEATURE_MINOR_SHMEM (minor faults on shmem)"},
        {UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
         "UFFD_FEATURE_WP_HUGETLBFS_SHMEM (write-protect on shmem)"},
    };
    std::uint64_t want = 0;
    for (const auto &f : need) {
        if (!(api.features & f.bit))
            refuse("the kernel lacks " + std::string(f.name));
        want |= f.bit;
    }
    // the API handshake is once per descriptor: a new one asks for them
    ::close(fd_);
    fd_ = int(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
    api = uffdio_api{};
    api.api = UFFD_API;
    api.features = want;
    if (fd_ < 0 || ::ioctl(fd_, UFFDIO_API, &api))
        refuse(std::string("UFFDIO_API with the features: ") + std::strerror(errno));
    uffdio_register reg{};
    reg.range = {reinterpret_cast<std::uintptr_t>(app), std::size_t(npages) * page_size};
    reg.mode = UFFDIO_REGISTER_MODE_MINOR | UFFDIO_REGISTER_MODE_WP;
    if (::ioctl(fd_, UFFDIO_REGISTER, &reg))
        refuse(std::string("UFFDIO_REGISTER (minor and write-protect on shmem): ") +
               std::strerror(errno));
    if (!(reg.ioctls & (1ull << _UFFDIO_CONTINUE)) ||
        !(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT)))
        refuse("the kernel lacks UFFDIO_CONTINUE or UFFDIO_WRITEPROTECT on shmem");
    // UFFDIO_CONTINUE_MODE_WP has no feature bit: try it on page 0, then
    // unmap it again
    uffdio_continue c{};
    c.range = range(0);
    c.mode = UFFDIO_CONTINUE_MODE_WP;
    if (::ioctl(fd_, UFFDIO_CONTINUE, &c))
        refuse(errno == EINVAL ? "the kernel lacks UFFDIO_CONTINUE_MODE_WP"
                               : std::string("UFFDIO_CONTINUE: ") + std::strerror(errno));
    if (::madvise(app_, ps_, MADV_DONTNEED))
        fail("MADV_DONTNEED", 0);
}

bool uffd_access::cont(std::uint32_t page, bool wp)
{
    uffdio_continue c{};
    c.range = range(page);
    c.mode = wp ? UFFDIO_CONTINUE_MODE_WP : 0;
    if (::ioctl(fd_, UFFDIO_CONTINUE, &c) == 0)
        return true;
    if (errno == EEXIST)
        return false;
    fail("UFFDIO_CONTINUE", page);
}

void uffd_access::protect(std::uint32_t page, bool wp)
{
    uffdio_writeprotect w{};
    w.range = range(page);
    w.mode = wp ? UFFDIO_WRITEPROTECT_MODE_WP : 0;
    if (::ioctl(fd_, UFFDIO_WRITEPROTECT, &w))
        fail("UFFDIO_WRITEPROTECT", page);
    if (wp) {  // setting it wakes nobody
        uffdio_range r = range(page);
        ::ioctl(fd_, UFFDIO_WAKE, &r);
    }
}

void uffd_access::set(std::uint32_t page, prot p)
{
    mapping &m = mapped_[page];
    if (p == prot::none) {
        if (m != mapping::none && ::madvise(app_ + std::size_t(page) * ps_, ps_, MADV_DONTNEED))
            fail("MADV_DONTNEED", page);
        m = mapping::none;
        return;
    }
    const bool wp = p == prot::read;
    if (m == mapping::none && cont(page, wp)) {
        m = wp ? mapping::wp : mapping::rw;
        return;
    }
    // mapped (or found so): change the write-protection, which wakes
    protect(page, wp);
    m = wp ? mapping::wp : mapping::rw;
}

void uffd_access::read_faults()
{
    uffd_msg msgs[16];
    for (;;) {
        const ssize_t n = ::read(fd_, msgs, sizeof(msgs));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;  // EAGAIN: none left
        for (ssize_t i = 0; i < n / ssize_t(sizeof(uffd_msg)); i++) {
            const uffd_msg &m = msgs[i];
            if (m.event != UFFD_EVENT_PAGEFAULT || !eng_)
                continue;
            const auto page = std::uint32_t(
                (m.arg.pagefault.address - reinterpret_cast<std::uintptr_t>(app_)) / ps_);
            if (page >= mapped_.size())
                continue;
            const std::uint64_t f = m.arg.pagefault.flags;
            if (f & UFFD_PAGEFAULT_FLAG_MINOR)
                mapped_[page] = mapping::none;
            else if (f & UFFD_PAGEFAULT_FLAG_WP)
                mapped_[page] = mapping::wp;
            eng_->fault_async(page, f & UFFD_PAGEFAULT_FLAG_WRITE);
        }
    }
}

}  // namespace

std::unique_ptr<access> make_uffd_access(std::uint8_t *app, std::size_t page_size,
                                         std::uint32_t npages)
{
    return std::make_unique<uffd_access>(app, page_size, npages);
}

}  // namespace udsm
