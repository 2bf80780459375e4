// SPDX-License-Identifier: GPL-2.0-only
//
// Which pages of the arena a migration moves.
#include "internal.hpp"

namespace kmigrate::detail {

range_list used_ranges(std::uintptr_t va, std::uintptr_t heap_begin, std::uintptr_t heap_top,
                       std::uintptr_t sp, std::uintptr_t stack_lo, std::uintptr_t stack_hi)
{
    auto page_down = [va](std::uintptr_t a) { return static_cast<std::uint32_t>((a - va) / page_size); };
    auto page_up = [va](std::uintptr_t a) {
        return static_cast<std::uint32_t>((a - va + page_size - 1) / page_size);
    };
    // the red zone below sp may hold a leaf function's data
    std::uintptr_t live = sp - 128;
    if (live < stack_lo)
        live = stack_lo;
    const std::uint32_t want[3][2] = {
        {0, 1},
        {page_down(heap_begin), page_up(heap_top)},
        {page_down(live), page_up(stack_hi)},
    };
    range_list out;
    for (const auto &w : want) {
        if (w[1] <= w[0])
            continue;
        if (out.n) {
            kmigrate_range &last = out.r[out.n - 1];
            if (w[0] <= last.first + last.count) {   // touching or overlapping
                if (w[1] > last.first + last.count)
                    last.count = w[1] - last.first;
                continue;
            }
        }
        out.r[out.n++] = {w[0], w[1] - w[0]};
    }
    return out;
}

}  // namespace kmigrate::detail
