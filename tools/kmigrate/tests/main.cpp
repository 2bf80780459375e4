// SPDX-License-Identifier: GPL-2.0-only
//
// The unit tests' main.  With KMIGRATE_TEST_PRINT_FP set it prints this
// process's fingerprint in hex instead: the fingerprint tests compare
// those of fresh processes.
#include "internal.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv)
{
    if (std::getenv("KMIGRATE_TEST_PRINT_FP")) {
        std::uint8_t fp[KMIGRATE_FP_MAX];
        const std::size_t n = kmigrate::detail::fingerprint(fp);
        for (std::size_t i = 0; i < n; i++)
            std::printf("%02x", fp[i]);
        std::printf("\n");
        return 0;
    }
    ::testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
