# SPDX-License-Identifier: GPL-2.0-only
"""Sphinx configuration: kverbs' documentation rendered as the kernel's
`make htmldocs` renders its own, with the kernel's kernel-doc extension.

Two paths come from the environment (``./kvlab docs`` and the ``style``
suite set them; see Documentation/testbed.rst):

KVERBS_SPHINX_EXT
    the kernel's ``Documentation/sphinx`` (kerneldoc.py, kernellog.py),
    from the linux-source tree the harness unpacks;
KVERBS_KERNEL_DOC
    a ``scripts/kernel-doc`` that knows ``EXPORT_SYMBOL_NS_GPL`` (6.12's,
    from linux-kbuild), so ``:export:`` finds our exports.
"""
import os
import sys

project = "kverbs"
copyright = "the kverbs authors; GPL-2.0-only"
master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
primary_domain = "c"
highlight_language = "none"

_ext = os.environ.get("KVERBS_SPHINX_EXT")
_kdoc = os.environ.get("KVERBS_KERNEL_DOC")
if not _ext or not _kdoc:
    raise RuntimeError("set KVERBS_SPHINX_EXT (the kernel's "
                       "Documentation/sphinx) and KVERBS_KERNEL_DOC (its "
                       "scripts/kernel-doc), or run ./kvlab docs")
sys.path.insert(0, _ext)
extensions = ["kerneldoc"]
kerneldoc_bin = _kdoc
kerneldoc_srctree = os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                 ".."))
# Attributes in our declarations that Sphinx's C parser must skip, as the
# kernel's own conf.py lists them.
c_id_attributes = ["__must_check", "__printf", "__always_inline",
                   "__maybe_unused", "__init", "__exit", "__cold",
                   "__user", "__rcu", "__percpu", "__iomem", "noinline"]
c_paren_attributes = ["__printf", "__aligned", "__section", "__cleanup"]
