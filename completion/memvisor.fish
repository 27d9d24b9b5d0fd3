# fish completion for memvisor
#
# Installed as share/fish/vendor_completions.d/memvisor.fish (make
# install). As the bash completion does, commands and options are read
# from the --help of the memvisor being completed, so they follow the
# binary; a ctl command's options from `memvisor ctl COMMAND --help`.

# The memvisor on the command line, and its words after it that are not
# options (nor the value of one that takes a value).
function __memvisor_bin
    set -l t (commandline -opc)
    echo $t[1]
end

function __memvisor_words
    set -l t (commandline -opc)
    set -e t[1]
    set -l skip 0
    for w in $t
        if test $skip = 1
            set skip 0
            continue
        end
        switch $w
            case -s --socket -p --policy -l --log -L --log-level -u --user -n --name -t \
                --timeout -c --container --pid --tree --source --buffer --stop-timeout --rate --until \
                --syscall --type --stats-json --metrics-file --metrics-interval --kill-grace \
                --listen -b --base -m --metadata
                set skip 1
            case '--'
                return
            case '-*'
            case '*'
                echo $w
        end
    end
end

# Rows of a --help: the command names of its Commands section, or its
# options.
function __memvisor_commands
    set -l bin (__memvisor_bin)
    $bin $argv --help 2>/dev/null | sed -nE '/^Commands:/,/^$/{s/^  ([a-z][a-z-]*( [a-z]+)*)( .*|$)/\1/p}'
end

function __memvisor_options
    set -l bin (__memvisor_bin)
    $bin $argv --help 2>/dev/null | sed -nE 's/^ +(-[A-Za-z0-9]), (--[a-z0-9-]+).*/\1\n\2/p; s/^ +(--[a-z0-9-]+).*/\1/p'
end

# What to offer for the word being typed.
function __memvisor_complete
    set -l w (__memvisor_words)
    set -l cur (commandline -ct)
    if test (count $w) -eq 0
        if string match -q -- '-*' $cur
            printf '%s\n' --help --version
        else
            __memvisor_commands
        end
        return
    end
    switch $w[1]
        case ctl
            # The ctl command typed so far: the longest name the words
            # begin with.
            set -l have (string join ' ' $w[2..-1])
            set -l known
            for name in (__memvisor_commands ctl)
                if test "$have" = "$name"; or string match -q -- "$name *" "$have"
                    if test (string length -- "$name") -gt (string length -- "$known")
                        set known $name
                    end
                end
            end
            if string match -q -- '-*' $cur
                __memvisor_options ctl (string split ' ' -- $known)
                return
            end
            # The next word of each name the words begin (or the first
            # word of each), then the operand of a whole name.
            for name in (__memvisor_commands ctl)
                if test -z "$have"
                    string replace -r ' .*' '' -- $name
                else if string match -q -- "$have *" "$name"
                    string replace -- "$have " '' $name | string replace -r ' .*' ''
                end
            end
            if test -n "$known"; and test "$known" = "$have"
                switch $known
                    case checkpoint reload
                        __fish_complete_directories $cur
                    case 'policy set'
                        __fish_complete_path $cur
                end
            end
        case run
            if string match -q -- '-*' $cur; and test (count $w) -eq 1
                __memvisor_options run
            else
                __fish_complete_subcommand --fcs-skip=(math (count (commandline -opc)) - (count $w) + 2)
            end
        case image
            if string match -q -- '-*' $cur
                __memvisor_options image
            else if test (count $w) -eq 1
                printf '%s\n' info verify
            else
                __fish_complete_directories $cur
            end
        case policy
            if string match -q -- '-*' $cur
                __memvisor_options policy
            else if test (count $w) -eq 1
                echo check
            else
                __fish_complete_path $cur
            end
        case '*'
            string match -q -- '-*' $cur; and __memvisor_options $w[1]
    end
end

complete -c memvisor -f -a '(__memvisor_complete)'
