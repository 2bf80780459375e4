// SPDX-License-Identifier: GPL-2.0-only
/* <kunit/visibility.h> (VISIBLE_IF_KUNIT, EXPORT_SYMBOL_IF_KUNIT) is 6.3+. */
#include <kunit/visibility.h>

#ifndef EXPORT_SYMBOL_IF_KUNIT
#error "no EXPORT_SYMBOL_IF_KUNIT"
#endif
