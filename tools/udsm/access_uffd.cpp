// SPDX-License-Identifier: GPL-2.0-only
//
// UDSM_ACCESS=uffd: userfaultfd on the application view instead of
// SIGSEGV.  Shared memory needs minor faults (a page present in the
// memfd but not mapped: UFFDIO_REGISTER_MODE_MINOR, resolved by
// UFFDIO_CONTINUE) and write-protection of shmem (UFFDIO_REGISTER_MODE_WP,
// UFFD_FEATURE_WP_HUGETLBFS_SHMEM).  This build checks what the kernel
// offers and refuses with the missing feature named (exit status 77);
// the access variant itself is not implemented yet, and says so.
#include "node.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace udsm {

void uffd_refuse()
{
    const int fd = int(::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
    if (fd < 0) {
        std::fprintf(stderr, "udsm: UDSM_ACCESS=uffd: userfaultfd: %s\n", std::strerror(errno));
        std::exit(77);
    }
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = 0;  // ask what there is
    const int r = ::ioctl(fd, UFFDIO_API, &api);
    ::close(fd);
    if (r) {
        std::fprintf(stderr, "udsm: UDSM_ACCESS=uffd: UFFDIO_API: %s\n", std::strerror(errno));
        std::exit(77);
    }
    static const struct {
        std::uint64_t bit;
        const char *name;
    } need[] = {
        {UFFD_FEATURE_MINOR_SHMEM, "UFFD_FEATURE_MINOR_SHMEM (minor faults on shmem)"},
        {UFFD_FEATURE_WP_HUGETLBFS_SHMEM, "UFFD_FEATURE_WP_HUGETLBFS_SHMEM (write-protect on shmem)"},
    };
    for (const auto &f : need)
        if (!(api.features & f.bit)) {
            std::fprintf(stderr, "udsm: UDSM_ACCESS=uffd: the kernel lacks %s\n", f.name);
            std::exit(77);
        }
    std::fprintf(stderr, "udsm: UDSM_ACCESS=uffd: the kernel has the features, but this build "
                         "does not implement the uffd access variant yet; use UDSM_ACCESS=segv\n");
    std::exit(77);
}

}  // namespace udsm
