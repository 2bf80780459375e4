#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only
"""The bash completion (tools/completion/kverbs.bash) against the built
tools: subcommands, a subcommand's options and an option's values, read
from each tool's --help.  Run by meson test:
    cli_completion.py SCRIPT KDSMCTL KFCACHECTL KMIGRATE KVPING"""
import subprocess
import sys


def complete(script, words):
    """COMPREPLY for the command line @words, the last being completed."""
    prog = (f"source {script}\nCOMP_WORDS=({' '.join(repr(w) for w in words)})\n"
            f"COMP_CWORD={len(words) - 1}\n_kverbs_complete\n"
            "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    p = subprocess.run(["bash", "--norc", "--noprofile", "-c", prog],
                       capture_output=True, text=True, timeout=30)
    return set(p.stdout.split()), p.stderr


def main():
    script, kdsmctl, kfcachectl, kmigrate, kvping = sys.argv[1:]
    cases = [
        ([kdsmctl, ""], {"create", "status", "delete", "monitor", "-h", "--help", "-V",
                         "--version"}),
        ([kdsmctl, "status", "-"], {"-s", "--stats", "-j", "--json"}),
        ([kdsmctl, "create", "--mode", ""], {"K", "T", "S"}),
        ([kdsmctl, "create", "--defer-to", "n"], {"normal"}),
        ([kfcachectl, ""], {"start", "load", "export", "unexport", "status", "stop",
                            "-h", "--help", "-V", "--version"}),
        ([kfcachectl, "start", "10.0.0.1", "--"], {"--port", "--key",
                                                   "--insecure"}),
        ([kfcachectl, "export", "--"], {"--client"}),
        ([kfcachectl, "start", "10.0.0.1", "--key-f"], {"--key-file"}),
        ([kmigrate, "st"], {"start", "stop", "status"}),
        ([kmigrate, "serve", "--"], {"--policy", "--log-dir", "--once",
                                     "--allow-root"}),
        ([kmigrate, "move", "1", "10.0.0.1", "--"], {"--precopy",
                                                     "--no-prefetch"}),
        ([kvping, "--s"], {"--server-addr", "--size"}),
        ([kvping, "-"], {"-h", "--help", "-V", "--version", "--count",
                         "--key-file"}),
    ]
    errors = []
    for words, want in cases:
        got, err = complete(script, words)
        # a bare - or -- is checked for containing @want; else exactly
        if (got != want) if words[-1] not in ("-", "--") else not want <= got:
            errors.append(f"{' '.join(words[1:])!r} ({words[0].split('/')[-1]}): "
                          f"got {sorted(got)}, want {sorted(want)} {err}")
    for e in errors:
        print(e)
    print(f"{len(cases) - len(errors)} of {len(cases)} completions right")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
