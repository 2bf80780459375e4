// SPDX-License-Identifier: GPL-2.0-only
//
// libkmigrate: process migration over RDMA (samples/kmigrate).
//
// A single-threaded program hands its work to kmigrate::run(), which
// creates the arena (one region of /dev/kmigrate, mapped at the same
// address on every node), moves malloc and operator new into it and runs
// the program's function on a stack inside it.  kmigrate::migrate() then
// moves the whole arena, and the running function with it, to another
// node: the call returns there.
//
//   int work(int argc, char **argv)
//   {
//       auto *v = new std::vector<int>(1000, 7);   // in the arena
//       if (kmigrate::migrate("10.0.0.2") < 0)      // returns 0 there
//           std::fprintf(stderr, "%s\n", kmigrate::last_error().c_str());
//       return (*v)[999] == 7 ? 0 : 1;              // on 10.0.0.2
//   }
//   int main(int argc, char **argv) { return kmigrate::run(argc, argv, work); }
//
// What migrates: the arena (heap and the stack of work()), the registers
// of work().  What does not: globals and static storage, thread-local
// storage, file descriptors (migrate() refuses while any beyond 0, 1, 2 is
// open), other threads (the kernel refuses), memory allocated before
// run(), jmp_bufs, the environment.  Both nodes must run the same
// executable with the same libraries; run() turns address space
// randomisation off (it re-executes the program once) so that code,
// libraries and the arena are at the same addresses everywhere.
#pragma once

#if !defined(__x86_64__)
#error "libkmigrate supports x86-64 only"
#endif

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace kmigrate {

struct options {
    // Arena size, heap and stack together; KMIGRATE_ARENA_MB overrides it.
    // At most 1 GiB (KMIGRATE_MAX_PAGES).
    std::size_t arena_bytes = 64UL << 20;
    // The stack that fn runs on, at the top of the arena.
    std::size_t stack_bytes = 1UL << 20;
    // Where the arena is mapped, on every node.
    std::uintptr_t va = 0x6b6d00000000UL;
};

enum class mode : std::uint32_t {
    postcopy = 0,   // KMIGRATE_MODE_POSTCOPY: resume at once, pages follow
    precopy = 1,    // KMIGRATE_MODE_PRECOPY: every page first, then resume
};

// Flags of migrate()
inline constexpr unsigned no_prefetch = 0x1;  // KMIGRATE_F_NO_PREFETCH

// Run fn(argc, argv) on the arena's stack and return its value, on the
// node where fn returns.  fn's argv is a copy in the arena, valid on every
// node.  An exception leaving fn is rethrown from run().  When the
// arena cannot be set up, run() prints why on stderr and returns 1
// without calling fn.  In a process started by `kmigrate serve`
// (KMIGRATE_INCOMING set) run() takes over the migrated fn instead, and
// exits with status 1 if that fails.
int run(int argc, char **argv, int (*fn)(int, char **), const options &o = {});

// Move this process to dest, "ADDR[:PORT]" ("[IPv6]:PORT" with a port):
// prepare(), wait for the destination, freeze and go.  Called from fn's
// stack.  0 on the destination (the source's process has exited); on the
// source -errno with last_error() saying why: -EINVAL (bad address, not
// on the arena's stack), -EBADF (a file descriptor is open), -EBUSY
// (another thread runs, or a migration is under way), -EHOSTDOWN (the
// destination failed after the freeze: the process resumes here as it
// was), or what the kernel said (the destination refused or was
// unreachable: nothing moved).
int migrate(const std::string &dest, mode m = mode::postcopy, unsigned flags = 0);

// Start getting dest ready in the background and return at once: the
// process runs on while the kernel connects and the destination starts
// its process, then poll() freezes and moves it (so the process stops
// only for the freeze).  0, or -errno as migrate().
int prepare(const std::string &dest, mode m = mode::postcopy, unsigned flags = 0);

// Call often from fn's stack; cheap (one flag) unless KMIGRATE_SIGNAL
// came.  It came when `kmigrate move` asked this process to go somewhere
// (poll() then prepare()s it) or when a preparation ended (poll() then
// moves the process, or says on stderr why the preparation failed).
// true when this call moved the process: it now runs on the destination.
bool poll();

// Whether KMIGRATE_SIGNAL came since the last poll(), without acting on
// it: a program that holds a descriptor open (a socket, say) closes it
// before poll() when this says so, since descriptors do not migrate.
bool pending();

// Why the last failed call failed.
const std::string &last_error();

// Whether the caller runs on the arena's stack.
bool on_arena();
// Bytes of arena heap in use, block headers included.
std::size_t heap_bytes();
// The arena, [begin, end); {0, 0} outside run().
std::pair<std::uintptr_t, std::uintptr_t> arena_range();
// The heap's used part, [begin, top): what migrate() sends besides the
// header page and the live stack.
std::pair<std::uintptr_t, std::uintptr_t> heap_range();
// How many times the arena has moved (counted in the arena).
unsigned migrations();

}  // namespace kmigrate
