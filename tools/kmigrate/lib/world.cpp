// SPDX-License-Identifier: GPL-2.0-only
//
// Worlds (see world.hpp): the context switch and the bookkeeping of the
// native side.
#include "world.hpp"

#include <exception>

// Offsets: struct regs.  endbr64 is a no-op where indirect branch tracking
// is off, and lets jumps through pointers land here where it is on.
asm(R"(
	.pushsection .text
	.globl	kmigrate_ctx_save
	.hidden	kmigrate_ctx_save
	.type	kmigrate_ctx_save, @function
	.p2align 4
kmigrate_ctx_save:
	.cfi_startproc
	endbr64
	movq	%rbx, 0(%rdi)
	movq	%rbp, 8(%rdi)
	movq	%r12, 16(%rdi)
	movq	%r13, 24(%rdi)
	movq	%r14, 32(%rdi)
	movq	%r15, 40(%rdi)
	leaq	8(%rsp), %rdx
	movq	%rdx, 48(%rdi)
	movq	(%rsp), %rdx
	movq	%rdx, 56(%rdi)
	stmxcsr	64(%rdi)
	fnstcw	68(%rdi)
	movq	%fs:0x28, %rdx
	movq	%rdx, 72(%rdi)
	xorl	%eax, %eax
	ret
	.cfi_endproc
	.size	kmigrate_ctx_save, .-kmigrate_ctx_save

	.globl	kmigrate_ctx_jump
	.hidden	kmigrate_ctx_jump
	.type	kmigrate_ctx_jump, @function
	.p2align 4
kmigrate_ctx_jump:
	.cfi_startproc
	endbr64
	movq	72(%rdi), %rdx
	movq	%rdx, %fs:0x28
	ldmxcsr	64(%rdi)
	fldcw	68(%rdi)
	movq	0(%rdi), %rbx
	movq	8(%rdi), %rbp
	movq	16(%rdi), %r12
	movq	24(%rdi), %r13
	movq	32(%rdi), %r14
	movq	40(%rdi), %r15
	movq	48(%rdi), %rsp
	movq	%rsi, %rax
	jmpq	*56(%rdi)
	.cfi_endproc
	.size	kmigrate_ctx_jump, .-kmigrate_ctx_jump

	.globl	kmigrate_ctx_call_on
	.hidden	kmigrate_ctx_call_on
	.type	kmigrate_ctx_call_on, @function
	.p2align 4
kmigrate_ctx_call_on:
	.cfi_startproc
	.cfi_undefined rip
	endbr64
	movq	%rcx, %fs:0x28
	movq	%rdi, %rsp
	xorl	%ebp, %ebp
	movq	%rdx, %rdi
	callq	*%rsi
	ud2
	.cfi_endproc
	.size	kmigrate_ctx_call_on, .-kmigrate_ctx_call_on
	.popsection
)");

namespace kmigrate::detail {

namespace {

// This process's side of the world it runs: where to return when the
// world's function returns.  Process globals: they do not migrate, and a
// process that adopts a world sets its own.
regs native;
bool native_saved;
int (*world_fn)(void *);
void *world_arg;
int world_result;
std::exception_ptr world_exception;

[[noreturn]] void world_main(void *)
{
    try {
        world_result = world_fn(world_arg);
    } catch (...) {
        world_exception = std::current_exception();
    }
    kmigrate_ctx_jump(&native, 1);
}

int world_returned()
{
    if (world_exception) {
        std::exception_ptr e = world_exception;
        world_exception = nullptr;
        std::rethrow_exception(e);
    }
    return world_result;
}

}  // namespace

std::uint64_t current_canary()
{
    std::uint64_t v;
    asm volatile("movq %%fs:0x28, %0" : "=r"(v));
    return v;
}

__attribute__((noinline)) std::uintptr_t current_sp()
{
    std::uintptr_t sp;
    asm volatile("movq %%rsp, %0" : "=r"(sp));
    return sp;
}

std::uint64_t native_canary()
{
    return native_saved ? native.canary : 0;
}

__attribute__((noinline)) int run_on_stack(void *top, std::uint64_t canary,
                                           int (*fn)(void *), void *arg)
{
    world_fn = fn;
    world_arg = arg;
    native_saved = true;
    if (!kmigrate_ctx_save(&native)) {
        const auto sp = reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t(15);
        kmigrate_ctx_call_on(reinterpret_cast<void *>(sp), world_main, nullptr, canary);
    }
    return world_returned();
}

__attribute__((noinline)) long leave(regs *r, void (*fn)(void *), void *arg)
{
    const long v = kmigrate_ctx_save(r);
    if (!v) {
        // Below the suspended run_on_stack()/adopt() frame, past a red zone.
        const std::uintptr_t sp = (native.rsp - 256) & ~std::uintptr_t(15);
        kmigrate_ctx_call_on(reinterpret_cast<void *>(sp), fn, arg, native.canary);
    }
    return v;
}

__attribute__((noinline)) int adopt(const regs *r, long v)
{
    native_saved = true;
    if (!kmigrate_ctx_save(&native))
        kmigrate_ctx_jump(r, v);
    return world_returned();
}

}  // namespace kmigrate::detail
