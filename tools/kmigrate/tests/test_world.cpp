// SPDX-License-Identifier: GPL-2.0-only
//
// Worlds and the context switch.  Built with -fstack-protector-all, the
// library's world.cpp too: every function here checks its canary on
// return, across switches between stacks whose worlds have different
// canaries.
#include "world.hpp"

#include <gtest/gtest.h>
#include <execinfo.h>
#include <sys/mman.h>

#include <cerrno>
#include <cfenv>
#include <cstring>
#include <stdexcept>

namespace {

using namespace kmigrate::detail;

class stack {
public:
    stack()
    {
        mem_ = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem_ == MAP_FAILED)
            throw std::runtime_error("mmap");
    }
    ~stack() { ::munmap(mem_, bytes); }
    stack(const stack &) = delete;
    stack &operator=(const stack &) = delete;
    void *top() const { return static_cast<char *>(mem_) + bytes; }
    bool holds(std::uintptr_t sp) const
    {
        const auto lo = reinterpret_cast<std::uintptr_t>(mem_);
        return sp >= lo && sp < lo + bytes;
    }

private:
    static constexpr std::size_t bytes = 512 << 10;
    void *mem_;
};

// A canary no process has: glibc's always end in a zero byte.
std::uint64_t other_canary()
{
    return current_canary() ^ 0x5a5a5a5a5a5a5a00ULL;
}

__attribute__((noinline)) int deep(int n)
{
    volatile char buf[200];
    std::memset(const_cast<char *>(buf), n, sizeof(buf));
    return n ? deep(n - 1) + buf[7] : 0;
}

TEST(Context, SaveReturnsZeroThenTheJumpsValue)
{
    regs r;
    volatile int passes = 0;
    const long v = kmigrate_ctx_save(&r);
    passes = passes + 1;
    if (!v)
        kmigrate_ctx_jump(&r, 42);
    EXPECT_EQ(v, 42);
    EXPECT_EQ(passes, 2);
}

const stack *running_on;
bool was_on_stack;
std::uint64_t canary_seen;

int on_stack(void *)
{
    was_on_stack = running_on->holds(current_sp());
    canary_seen = current_canary();
    return deep(300);
}

TEST(World, RunsOnItsStackWithItsCanary)
{
    stack s;
    running_on = &s;
    const std::uint64_t native = current_canary();
    const std::uint64_t other = other_canary();
    EXPECT_EQ(run_on_stack(s.top(), other, on_stack, nullptr), deep(300));
    EXPECT_TRUE(was_on_stack);
    EXPECT_EQ(canary_seen, other);
    EXPECT_EQ(current_canary(), native);
    EXPECT_EQ(native_canary(), native);
}

int throws(void *)
{
    deep(10);
    throw std::runtime_error("from the world");
}

TEST(World, AnExceptionLeavingFnIsRethrownOutside)
{
    stack s;
    EXPECT_THROW(run_on_stack(s.top(), other_canary(), throws, nullptr), std::runtime_error);
    EXPECT_EQ(run_on_stack(s.top(), other_canary(), on_stack, nullptr), deep(300));
}

int backtraces(void *)
{
    void *frames[256];
    return ::backtrace(frames, 256);
}

TEST(World, UnwindersStopAtTheWorldsBottom)
{
    stack s;
    const int n = run_on_stack(s.top(), current_canary(), backtraces, nullptr);
    EXPECT_GT(n, 1);
    EXPECT_LT(n, 10);  // backtraces, world_main, the trampoline
}

// A migration without the kernel: fn leaves its world; the "kernel" keeps
// the context; the source either resumes it (the migration failed) or
// ends, and the "destination" adopts the context.
regs carried;        // what the kernel would carry
regs source_end;     // where the source "exits" to
enum class outcome { fails, moves };
int natives;
std::uint64_t native_side_canary;
int rounding_in_native;

void native_part(void *arg)
{
    natives++;
    native_side_canary = current_canary();
    rounding_in_native = std::fegetround();
    std::fesetround(FE_UPWARD);  // must not leak into the world
    deep(50);
    if (*static_cast<const outcome *>(arg) == outcome::fails)
        kmigrate_ctx_jump(&carried, 2 + EHOSTDOWN);
    kmigrate_ctx_jump(&source_end, 1);
}

int migrating(void *arg)
{
    std::uint64_t locals[64];
    for (unsigned i = 0; i < 64; i++)
        locals[i] = i * 0x9e3779b97f4a7c15ULL;
    asm volatile("" : : "r"(locals) : "memory");
    std::fesetround(FE_DOWNWARD);
    const long v = leave(&carried, native_part, arg);
    asm volatile("" : : "r"(locals) : "memory");
    for (unsigned i = 0; i < 64; i++)
        if (locals[i] != i * 0x9e3779b97f4a7c15ULL)
            return -1;
    if (std::fegetround() != FE_DOWNWARD)
        return -2;
    std::fesetround(FE_TONEAREST);
    return static_cast<int>(v) + deep(20);
}

TEST(World, LeaveThenResumeOnTheSource)
{
    stack s;
    outcome o = outcome::fails;
    natives = 0;
    const std::uint64_t native = current_canary();
    const int r = run_on_stack(s.top(), other_canary(), migrating, &o);
    EXPECT_EQ(r, 2 + EHOSTDOWN + deep(20));
    EXPECT_EQ(natives, 1);
    EXPECT_EQ(native_side_canary, native);   // the native side ran with its own
    EXPECT_EQ(rounding_in_native, FE_DOWNWARD);  // call_on keeps the control words
    EXPECT_EQ(std::fegetround(), FE_TONEAREST);  // the native context's again
    EXPECT_EQ(current_canary(), native);
}

TEST(World, LeaveThenAdoptElsewhere)
{
    stack s;
    outcome o = outcome::moves;
    natives = 0;
    const std::uint64_t native = current_canary();
    const std::uint64_t world = other_canary();
    volatile bool source_ended = false;
    if (!kmigrate_ctx_save(&source_end)) {
        run_on_stack(s.top(), world, migrating, &o);
        FAIL() << "the source's run_on_stack() returned";
    }
    source_ended = true;
    EXPECT_EQ(current_canary(), native);
    EXPECT_EQ(std::fegetround(), FE_TONEAREST);
    // what the destination's process does with the carried context
    const regs copy = carried;
    EXPECT_EQ(copy.canary, world);
    EXPECT_TRUE(s.holds(copy.rsp));
    const int r = adopt(&copy, 1);
    EXPECT_TRUE(source_ended);
    EXPECT_EQ(r, 1 + deep(20));
    EXPECT_EQ(natives, 1);
    EXPECT_EQ(current_canary(), native);
}

}  // namespace
