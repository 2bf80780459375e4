// SPDX-License-Identifier: GPL-2.0-only
// Summary statistics shared by the benchmark programs.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kvbench {

struct Stat {
    double median_us, p99_us;
};

// Median (mean of the middle two for even counts) and nearest-rank p99.
inline Stat summarize(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    const double median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    const std::size_t rank = (n * 99 + 99) / 100;      // ceil(0.99 n), >= 1
    return {median, v[rank - 1]};
}

} // namespace kvbench
