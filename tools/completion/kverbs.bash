# SPDX-License-Identifier: GPL-2.0-only
# bash completion for kverbs' tools: kdsmctl, kfcachectl, kmigrate, kvping.
#
# The words come from the tool's own --help (kvcli's usage text), so the
# completion follows the tool: the subcommands are the second word of the
# usage lines; a subcommand's options are the --options and -x switches of
# its usage lines (a line that starts with the tool begins a subcommand's,
# an indented line continues it); a tool without subcommands (kvping)
# offers every --option.  Installed once per tool name, as bash-completion
# loads completions by command name.

# _kverbs_words TOOL [SUBCOMMAND]: the words to offer
_kverbs_words()
{
    "$1" --help 2>/dev/null | awk -v tool="${1##*/}" -v cmd="$2" '
        {
            line = $0
            sub(/^usage:/, "", line)
            n = split(line, w, " ")
            if (n == 0)
                next
            if (w[1] == tool) {
                cur = w[2]
                if (cmd == "" && cur ~ /^[a-z][a-z-]*$/) {
                    print cur
                    subs = 1
                }
                start = 3
            } else if (line ~ /^ +[-[]/) {
                start = 1
            } else {
                next
            }
            for (i = start; i <= n; i++) {
                t = w[i]
                gsub(/[][|]/, " ", t)
                m = split(t, o, " ")
                for (j = 1; j <= m; j++)
                    if (o[j] ~ /^--?[a-zA-Z][-a-zA-Z]*[,;]?$/ &&
                        (cmd != "" ? cur == cmd : !subs))
                        opts[o[j]] = 1
            }
        }
        END {
            for (x in opts) {
                sub(/[,;]$/, "", x)
                print x
            }
        }'
}

_kverbs_complete()
{
    local tool=${COMP_WORDS[0]} cur=${COMP_WORDS[COMP_CWORD]}
    local prev=${COMP_WORDS[COMP_CWORD - 1]} sub=
    COMPREPLY=()
    case $prev in
    --defer-to) COMPREPLY=($(compgen -W "highpri normal fifo" -- "$cur")); return ;;
    --mode) COMPREPLY=($(compgen -W "K T S" -- "$cur")); return ;;
    --policy | --key-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    --log-dir) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    esac
    if [ "$COMP_CWORD" -gt 1 ]; then
        sub=${COMP_WORDS[1]}
    fi
    if [ "${tool##*/}" = kvping ]; then
        COMPREPLY=($(compgen -W "$(_kverbs_words "$tool" "")" -- "$cur"))
    elif [ -z "$sub" ]; then
        COMPREPLY=($(compgen -W "$(_kverbs_words "$tool" "") -h --help -V --version" -- "$cur"))
    elif [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$(_kverbs_words "$tool" "$sub")" -- "$cur"))
    elif [ "${tool##*/}" = kfcachectl ] && [ "$sub" = export ] && [ "$COMP_CWORD" -eq 3 ]; then
        COMPREPLY=($(compgen -d -- "$cur"))
    elif [ "${tool##*/}" = kfcachectl ] && [ "$sub" = load ]; then
        COMPREPLY=($(compgen -f -- "$cur"))
    elif [ "${tool##*/}" = kmigrate ] && [ "$sub" = run ]; then
        COMPREPLY=($(compgen -c -- "$cur"))
    fi
}

complete -F _kverbs_complete kdsmctl kfcachectl kmigrate kvping
