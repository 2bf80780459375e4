"""Documentation checks and rendering: kernel-doc over our kernel sources
and Sphinx over Documentation/ with the kernel's kernel-doc extension, as
`make htmldocs` renders the kernel's API.

The extension (Documentation/sphinx/kerneldoc.py) comes from the
linux-source tree the KUnit builds unpack; scripts/kernel-doc from the 6.12
headers (linux-kbuild), whose `:export:` knows EXPORT_SYMBOL_NS_GPL."""
import os
import re
from pathlib import Path

from .common import REPO, HarnessError, build_dir, require_tool, run


def kernel_doc_script(kernel):
    """scripts/kernel-doc of @kernel's headers (a 6.12 one for
    EXPORT_SYMBOL_NS_GPL)."""
    p = Path(kernel.headers) / "scripts" / "kernel-doc"
    if not p.exists():
        raise HarnessError(f"no {p}", "install linux-headers of that kernel "
                           "(./kvlab setup does)")
    return p


def sphinx_ext_dir():
    """The kernel's Documentation/sphinx, from the unpacked linux-source."""
    from . import kunit
    d = kunit.source_tree() / "Documentation" / "sphinx"
    if not (d / "kerneldoc.py").exists():
        raise HarnessError(f"no kerneldoc.py in {d}",
                           "the linux-source tarball is incomplete; "
                           "reinstall linux-source-6.1")
    return d


def kernel_doc_problems(script, files, cwd=REPO):
    """Every warning `kernel-doc -none -Wall` prints for @files (a missing
    Return:, an undescribed parameter or member, a malformed comment)."""
    p = run(["perl", str(script), "-none", "-Wall"] + [str(f) for f in files],
            cwd=cwd, timeout=300, check=False)
    out = [l for l in (p.stdout or "").splitlines() if l.strip()]
    if p.returncode and not out:
        out = [f"kernel-doc exited {p.returncode}"]
    return out


def build_html(kernel, outdir=None, srcdir=None):
    """sphinx-build -W over @srcdir (Documentation/): (ok, output, outdir).
    Warnings are errors, as the style suite wants them."""
    sphinx = require_tool("sphinx-build", "python3-sphinx")
    srcdir = Path(srcdir or REPO / "Documentation")
    outdir = Path(outdir or build_dir() / "docs" / "html")
    env = dict(os.environ, KVERBS_SPHINX_EXT=str(sphinx_ext_dir()),
               KVERBS_KERNEL_DOC=str(kernel_doc_script(kernel)))
    p = run([sphinx, "-W", "--keep-going", "-q", "-E", "-b", "html",
             str(srcdir), str(outdir)], env=env, timeout=900, check=False)
    return p.returncode == 0, p.stdout or "", outdir


def rendered_functions(html):
    """C identifiers that the rendered page @html defines."""
    return set(re.findall(r'id="c\.([A-Za-z_][A-Za-z_0-9]*)"',
                          Path(html).read_text(errors="replace")))
