// SPDX-License-Identifier: GPL-2.0-only
//
// JSON output of the tools' status commands (-j/--json), with
// nlohmann-json: one object per run, keys in the order the tool adds
// them, bytes that are not UTF-8 (a path, a kernel-provided name)
// replaced rather than thrown on.
#pragma once

#include <cstdio>

#include <nlohmann/json.hpp>

namespace kvcli {

using json = nlohmann::ordered_json;

inline void print_json(const json &j)
{
    std::puts(j.dump(2, ' ', false, json::error_handler_t::replace).c_str());
}

} // namespace kvcli
