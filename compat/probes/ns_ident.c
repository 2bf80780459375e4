// SPDX-License-Identifier: GPL-2.0-only
/*
 * Symbol namespaces are bare identifiers up to 6.12 and string literals from
 * 6.13 on.  MODULE_IMPORT_NS(<identifier>) only compiles with the former.
 */
#include <linux/module.h>

MODULE_IMPORT_NS(KVERBS_PROBE);
