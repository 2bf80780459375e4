// SPDX-License-Identifier: GPL-2.0-only
//
// Worlds: a function running on a stack of its own (the arena's), which a
// context switch can leave, resume, and continue in another process.
//
// A context holds what the SysV x86-64 ABI has a callee preserve (rbx,
// rbp, r12-r15, rsp, the MXCSR control bits and the x87 control word), the
// address to resume at, and the stack-protector canary (%fs:0x28) of the
// world it belongs to: every frame on a stack was entered with the canary
// of that stack's world, so jumping into a context restores its canary,
// and the frames' epilogues keep passing their checks in a process whose
// own canary differs.  setjmp/longjmp cannot do this: glibc mangles their
// pointers with a per-process guard.
#pragma once

#if !defined(__x86_64__)
#error "libkmigrate supports x86-64 only"
#endif

#include <cstddef>
#include <cstdint>

namespace kmigrate::detail {

struct regs {
    std::uint64_t rbx, rbp, r12, r13, r14, r15;
    std::uint64_t rsp;      // after the return from save
    std::uint64_t rip;      // save's return address
    std::uint32_t mxcsr;
    std::uint16_t fpucw;
    std::uint16_t pad;
    std::uint64_t canary;
};
static_assert(offsetof(regs, rsp) == 48 && offsetof(regs, mxcsr) == 64 &&
              offsetof(regs, fpucw) == 68 && offsetof(regs, canary) == 72 &&
              sizeof(regs) == 80, "the assembly in world.cpp uses these offsets");

extern "C" {
// 0 now, and v when kmigrate_ctx_jump(r, v) resumes it (v != 0).
__attribute__((returns_twice, visibility("hidden"))) long kmigrate_ctx_save(regs *r);
[[noreturn]] __attribute__((visibility("hidden"))) void kmigrate_ctx_jump(const regs *r, long v);
// fn(arg) with rsp = sp (16-byte aligned) and %fs:0x28 = canary; fn must
// not return.  Unwinders stop at its frame.
[[noreturn]] __attribute__((visibility("hidden"))) void
kmigrate_ctx_call_on(void *sp, void (*fn)(void *), void *arg, std::uint64_t canary);
}

std::uint64_t current_canary();
std::uintptr_t current_sp();

// Run fn(arg) in a world on the stack below top, its canary `canary`.
// Returns fn's value, or rethrows what left fn, once fn returns: in this
// process, or in one that adopt()ed the world.
int run_on_stack(void *top, std::uint64_t canary, int (*fn)(void *), void *arg);

// Inside a world: save its context in *r and run native(arg) on this
// process's own stack, below the frame of run_on_stack()/adopt().
// native() does not return: it exits, or resumes *r with
// kmigrate_ctx_jump(r, v), v >= 1, and leave() returns v.
long leave(regs *r, void (*native)(void *), void *arg);

// Continue a world left (leave()) in another process, from *r with v;
// returns like run_on_stack().
int adopt(const regs *r, long v);

// The canary of this process's own stack, once run_on_stack() or adopt()
// has begun; 0 before.
std::uint64_t native_canary();

}  // namespace kmigrate::detail
