// SPDX-License-Identifier: GPL-2.0-only
//
// A managed kvmem region seen from user space (/dev/kvmem): RAII over
// the region's file descriptor and its one mapping.
#pragma once

#include <kverbs/kvmem.h>

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace kvmem {

inline std::size_t page_size()
{
    return static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

class Region {
public:
    Region(std::uint32_t npages, std::uint32_t policy, std::uint32_t prot)
        : npages_(npages)
    {
        const int dev = ::open("/dev/kvmem", O_RDWR | O_CLOEXEC);
        if (dev < 0)
            throw std::system_error(errno, std::generic_category(), "open /dev/kvmem");
        kvmem_create c{npages, policy, prot, 0};
        fd_ = ::ioctl(dev, KVMEM_IOC_CREATE, &c);
        const int err = errno;
        ::close(dev);
        if (fd_ < 0)
            throw std::system_error(err, std::generic_category(), "KVMEM_IOC_CREATE");
    }
    Region(const Region &) = delete;
    Region &operator=(const Region &) = delete;
    ~Region()
    {
        unmap();
        if (fd_ >= 0)
            ::close(fd_);
    }

    // Maps the whole region shared; throws on failure.
    volatile std::uint8_t *map()
    {
        void *p = ::mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
        if (p == MAP_FAILED)
            throw std::system_error(errno, std::generic_category(), "mmap");
        base_ = static_cast<volatile std::uint8_t *>(p);
        return base_;
    }
    void unmap()
    {
        if (base_ != nullptr)
            ::munmap(const_cast<std::uint8_t *>(base_), bytes());
        base_ = nullptr;
    }
    // 0 or the errno of KVMEM_IOC_PROTECT.
    int protect(const std::vector<kvmem_range> &r, std::uint32_t prot, std::uint32_t flags = 0,
                std::uint64_t reserved = 0)
    {
        kvmem_protect p{};
        p.ranges = reinterpret_cast<std::uintptr_t>(r.data());
        p.nr = static_cast<std::uint32_t>(r.size());
        p.prot = prot;
        p.flags = flags;
        p.reserved = reserved;
        return ::ioctl(fd_, KVMEM_IOC_PROTECT, &p) == 0 ? 0 : errno;
    }
    // In-kernel nanoseconds of one revoke to prot and one grant back.
    std::pair<std::uint64_t, std::uint64_t> kernel_bench(const std::vector<kvmem_range> &r,
                                                         std::uint32_t prot)
    {
        kvmem_protect p{};
        p.ranges = reinterpret_cast<std::uintptr_t>(r.data());
        p.nr = static_cast<std::uint32_t>(r.size());
        p.prot = prot;
        p.reps = 1;
        if (::ioctl(fd_, KVMEM_IOC_BENCH, &p) != 0)
            throw std::system_error(errno, std::generic_category(), "KVMEM_IOC_BENCH");
        return {p.ns, p.ns_grant};
    }
    kvmem_stats stats() const
    {
        kvmem_stats s{};
        if (::ioctl(fd_, KVMEM_IOC_STATS, &s) != 0)
            throw std::system_error(errno, std::generic_category(), "KVMEM_IOC_STATS");
        return s;
    }
    int destroy() { return ::ioctl(fd_, KVMEM_IOC_DESTROY) == 0 ? 0 : errno; }

    [[nodiscard]] int fd() const noexcept { return fd_; }
    [[nodiscard]] std::size_t bytes() const noexcept { return npages_ * page_size(); }
    [[nodiscard]] volatile std::uint8_t *page(std::size_t i) const noexcept
    {
        return base_ + i * page_size();
    }

private:
    std::uint32_t npages_;
    int fd_ = -1;
    volatile std::uint8_t *base_ = nullptr;
};

} // namespace kvmem
