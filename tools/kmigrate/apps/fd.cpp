// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate-fd [ADDR[:PORT]]: migrate() with a file open must fail with
// -EBADF before anything moves, and say which descriptor.  Exits 0 if so.
#include <kmigrate/kmigrate.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace {

int work(int argc, char **argv)
{
    char path[] = "/tmp/kmigrate-fd.XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0) {
        std::perror("kmigrate-fd: mkstemp");
        return 1;
    }
    const int r = kmigrate::migrate(argc > 1 ? argv[1] : "127.0.0.1");
    std::printf("kmigrate-fd: ret=%d error=%s\n", r, kmigrate::last_error().c_str());
    ::close(fd);
    ::unlink(path);
    return r == -EBADF ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv)
{
    return kmigrate::run(argc, argv, work);
}
