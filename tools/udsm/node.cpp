// SPDX-License-Identifier: GPL-2.0-only
//
// A node: its region, and the order in which its parts start and stop.
#include "node.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace udsm {

namespace {

std::runtime_error sys_error(const std::string &what)
{
    return std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

region::region(std::size_t bytes, bool app_open) : bytes_(bytes)
{
    fd_ = ::memfd_create("udsm", MFD_CLOEXEC);
    if (fd_ < 0)
        throw sys_error("memfd_create");
    if (::ftruncate(fd_, off_t(bytes)))
        throw sys_error("ftruncate the region");
    // segv: the application view starts with no access, the engine grants it
    void *a = ::mmap(nullptr, bytes, app_open ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_SHARED,
                     fd_, 0);
    void *e = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd_, 0);
    if (a == MAP_FAILED || e == MAP_FAILED)
        throw sys_error("mmap the region");
    app_ = static_cast<std::uint8_t *>(a);
    eng_ = static_cast<std::uint8_t *>(e);
    // a child would share the pages without the protocol
    if (::madvise(app_, bytes, MADV_DONTFORK) || ::madvise(eng_, bytes, MADV_DONTFORK))
        throw sys_error("madvise MADV_DONTFORK");
}

region::~region()
{
    if (app_)
        ::munmap(app_, bytes_);
    if (eng_)
        ::munmap(eng_, bytes_);
    if (fd_ >= 0)
        ::close(fd_);
}

node::node(const config &c)
    : c_(c), ps_(std::size_t(::sysconf(_SC_PAGESIZE))),
      reg_(std::size_t(c.npages) * ps_, c.access == access_kind::uffd)
{
    // first: a kernel without userfaultfd's features ends it (77) at once
    acc_ = c.access == access_kind::uffd ? make_uffd_access(reg_.app(), ps_, c.npages)
                                         : make_segv_access(reg_.app(), ps_, c.npages);
    tr_ = c.transport == transport_kind::unix_socket
              ? make_unix_transport(c_, reg_.eng(), ps_, st_)
              : make_verbs_transport(c_, reg_.eng(), ps_, st_);
    eng_ = std::make_unique<engine>(c_, *tr_, *acc_, st_);
    tr_->bind(*eng_);
    acc_->attach(*eng_);  // the home's pages open RW
    tr_->form();
    progress_ = std::jthread(
        [this] { tr_->run(*eng_, acc_->fault_fd(), [this] { acc_->read_faults(); }); });
}

node::~node()
{
    eng_->quiesce();
    tr_->leave();
    tr_->stop();
    progress_.join();
    // the SIGSEGV handler off (the.eng cleared) before the engine it
    // calls is destroyed: members go in reverse order, eng_ before acc_
    acc_.reset();
}

}  // namespace udsm
