// SPDX-License-Identifier: GPL-2.0-only
//
// kmigrate-thread ADDR[:PORT]: migrate() while a second thread runs must
// fail with -EBUSY (the kernel moves single-threaded processes only), and
// the process goes on here.  Exits 0 if so.
#include <kmigrate/kmigrate.hpp>

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <thread>

namespace {

int work(int argc, char **argv)
{
    std::atomic<bool> stop{false};
    std::thread t([&stop] {
        while (!stop.load())
            ::usleep(1000);
    });
    const int r = kmigrate::migrate(argc > 1 ? argv[1] : "127.0.0.1");
    std::printf("kmigrate-thread: ret=%d error=%s\n", r, kmigrate::last_error().c_str());
    stop = true;
    t.join();
    return r == -EBUSY ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv)
{
    return kmigrate::run(argc, argv, work);
}
