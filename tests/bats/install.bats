#!/usr/bin/env bats
# make install (issue 16): PREFIX and DESTDIR put the binary, the man
# pages and the bash completion where they belong; the completion,
# sourced in bash, completes commands, options, socket names and pids
# (driven here as bash does: COMP_WORDS and COMP_CWORD, then _memvisor).

load helpers
bats_require_minimum_version 1.5.0

# make install of this build into DESTDIR, without rebuilding anything
# (-o: the binary is taken as it is).
install_to() { # DESTDIR [MAKE-ARGS...]
	local dest=$1
	shift
	make -s -C "$ROOT" BUILD="$MEMVISOR_BUILD" -o "$MEMVISOR_BUILD/memvisor" \
		DESTDIR="$dest" "$@" install
}

# What the completion offers for the words given (the last one is the
# word being completed), one per line, sorted.
complete_words() { # WORD...
	bash --norc --noprofile -c '
		source "$1"
		shift
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		_memvisor
		printf "%s\n" "${COMPREPLY[@]}" | sort
	' bash "$COMPLETION" "$@"
}

setup() {
	setup_tmp
	DEST=$TMP/root
	install_to "$DEST" PREFIX=/usr >/dev/null
	COMPLETION=$DEST/usr/share/bash-completion/completions/memvisor
	export PATH=$DEST/usr/bin:$PATH
}

@test "install: PREFIX and DESTDIR put the binary, the man pages and the completion in place" {
	for f in usr/bin/memvisor usr/share/man/man1/memvisor.1 usr/share/man/man1/memvisor-run.1 \
		usr/share/man/man1/memvisor-ctl.1 usr/share/man/man1/memvisor-image.1 \
		usr/share/man/man1/memvisor-agent.1 \
		usr/share/man/man5/memvisor-policy.5 usr/share/bash-completion/completions/memvisor \
		usr/share/zsh/vendor-completions/_memvisor usr/share/fish/vendor_completions.d/memvisor.fish; do
		[ -f "$DEST/$f" ] || { echo "missing: $f"; false; }
	done
	# The example policies, each as in the tree.
	local p n=0
	for p in "$ROOT"/policy/examples/*.json; do
		cmp "$p" "$DEST/usr/share/memvisor/policy/${p##*/}"
		n=$((n + 1))
	done
	[ "$n" -ge 6 ]
	"$DEST/usr/bin/memvisor" policy check "$DEST"/usr/share/memvisor/policy/*.json >/dev/null
	# zsh's completion runs the bash one installed beside it.
	grep -qx "source /usr/share/bash-completion/completions/memvisor" \
		"$DEST/usr/share/zsh/vendor-completions/_memvisor"
	[ "$(stat -c %a "$DEST/usr/bin/memvisor")" = 755 ]
	[ "$(stat -c %a "$DEST/usr/share/man/man5/memvisor-policy.5")" = 644 ]
	[ "$("$DEST/usr/bin/memvisor" --version)" = "memvisor $(cat "$ROOT/VERSION")" ]
	# Nothing else: every file installed is one of those.
	[ "$(find "$DEST" -type f | wc -l)" = $((10 + n)) ]
	# man finds the pages by name in the installed tree.
	if command -v man >/dev/null; then
		MANWIDTH=80 man -M "$DEST/usr/share/man" 5 memvisor-policy | grep -q "the policy language of memvisor"
	fi
	# The default PREFIX is /usr/local; uninstall takes everything away.
	install_to "$TMP/root2"
	[ -x "$TMP/root2/usr/local/bin/memvisor" ]
	[ -f "$TMP/root2/usr/local/share/bash-completion/completions/memvisor" ]
	[ -f "$TMP/root2/usr/local/share/man/man1/memvisor-ctl.1" ]
	[ -f "$TMP/root2/usr/local/share/zsh/site-functions/_memvisor" ]
	[ -f "$TMP/root2/usr/local/share/fish/vendor_completions.d/memvisor.fish" ]
	[ -f "$TMP/root2/usr/local/share/memvisor/policy/sandbox.json" ]
	make -s -C "$ROOT" DESTDIR="$TMP/root2" uninstall
	[ -z "$(find "$TMP/root2" -type f)" ]
}

@test "completion: sourced in bash, memvisor completes; commands and their words" {
	run bash --norc --noprofile -c 'source "$1" && complete -p memvisor' bash "$COMPLETION"
	assert_success
	assert_output "complete -F _memvisor memvisor"
	[ "$(complete_words memvisor ct)" = ctl ]
	run complete_words memvisor ''
	assert_output "$(printf '%s\n' --help --version agent check ctl image oci-profile policy run)"
	[ "$(complete_words memvisor ctl check)" = checkpoint ]
	[ "$(complete_words memvisor ctl policy '')" = set ]
	[ "$(complete_words memvisor ctl me)" = metrics ]
	[ "$(complete_words memvisor image '')" = "$(printf 'info\nverify')" ]
	[ "$(complete_words memvisor policy '')" = check ]
	[ "$(complete_words memvisor run -- ech)" = echo ]
	[ "$(complete_words memvisor run sleep 1 "$TMP/ro")" = "$TMP/root" ]
}

@test "completion: options from each command's --help, and their values" {
	[ "$(complete_words memvisor run --pol)" = --policy ]
	[ "$(complete_words memvisor run --metrics-f)" = --metrics-file ]
	[ "$(complete_words memvisor run --log-level '')" = "$(printf 'debug\nerror\ninfo\nwarn')" ]
	[ "$(complete_words memvisor ctl checkpoint --ev)" = --evict ]
	[ "$(complete_words memvisor ctl regions --so)" = "$(printf -- '--socket\n--source')" ]
	[ "$(complete_words memvisor ctl regions --source '')" = "$(printf 'auto\nmaps\nprocmap_query')" ]
	[ "$(complete_words memvisor ctl --ti)" = --timeout ]
	[ "$(complete_words memvisor check --j)" = --json ]
	[ "$(complete_words memvisor image info --)" = "$(printf -- '--help\n--json')" ]
	# Every option of run --help is offered.
	run complete_words memvisor run --
	assert_output "$(memvisor run --help | grep -oE '^ +(-[a-zA-Z], )?--[a-z-]+' | grep -oE -- '--[a-z-]+' | sort)"
}

@test "completion: socket names under the runtime directory and the pids of ctl ps" {
	mkfifo "$TMP/go"
	memvisor run -- sh -c "read x <'$TMP/go'" </dev/null &
	MVPID=$!
	remember_pid $MVPID
	sock=$XDG_RUNTIME_DIR/memvisor/$MVPID.sock
	wait_for 10 test -S "$sock"
	run complete_words memvisor ctl --socket "$XDG_RUNTIME_DIR/memvisor/"
	assert_line "$sock"
	# And by name: a named supervisor's, and an unnamed one's pid.
	mkfifo "$TMP/go2"
	memvisor run --name "compl-$$" -- sh -c "read x <'$TMP/go2'" </dev/null &
	named=$!
	remember_pid $named
	wait_for 10 test -S "$XDG_RUNTIME_DIR/memvisor/compl-$$.sock"
	run complete_words memvisor ctl --name compl
	assert_output "compl-$$"
	run complete_words memvisor ctl -n ''
	assert_line "compl-$$"
	assert_line "$MVPID"
	run complete_words memvisor run --name ''
	assert_output ''
	# The pids ctl ps lists, on the socket of the line.
	SOCK=$sock
	wait_for 10 ctl_has '^ *[0-9]' ps
	pids=$(ctl ps | awk '$1 ~ /^[0-9]+$/ {print $1}' | sort)
	[ -n "$pids" ]
	[ "$(complete_words memvisor ctl --socket "$sock" regions '')" = "$pids" ]
	[ "$(complete_words memvisor ctl --socket="$sock" stats '')" = "$pids" ]
	[ "$(complete_words memvisor ctl -s "$sock" checkpoint --pid '')" = "$pids" ]
	# Or ctl's own choice of socket ($MEMVISOR_SOCKET here: a root test
	# cannot know that /run/memvisor has no other).
	[ "$(MEMVISOR_SOCKET=$sock complete_words memvisor ctl stats '')" = "$pids" ]
	echo go >"$TMP/go"
	echo go >"$TMP/go2"
	wait $MVPID
	wait $named
}

@test "completion in zsh (the bash completion through bashcompinit) and in fish" {
	command -v zsh >/dev/null || skip "zsh is not installed"
	command -v fish >/dev/null || skip "fish is not installed"
	# zsh: the installed file loads, and the bash function it sources
	# answers in zsh's sh emulation as compsys calls it.
	run zsh -fc '
		autoload -U compinit && compinit -u -D
		autoload -U +X bashcompinit && bashcompinit
		source "$1"
		emulate -L sh
		setopt kshglob noshglob braceexpand
		COMP_WORDS=(memvisor ctl policy "")
		COMP_CWORD=3
		_memvisor
		print -l -- "${COMPREPLY[@]}"' zsh "$COMPLETION"
	assert_success
	assert_output set
	zsh -fn "$DEST/usr/share/zsh/vendor-completions/_memvisor"
	# fish: complete -C answers as at a prompt.
	local fishc=$DEST/usr/share/fish/vendor_completions.d/memvisor.fish
	fc() { fish --no-config -c 'source $argv[1]; complete -C $argv[2]' "$fishc" "$1"; }
	run fc "memvisor "
	assert_output "$(printf '%s\n' agent check ctl image oci-profile policy run)"
	run fc "memvisor ctl policy "
	assert_output set
	run fc "memvisor ctl job "
	assert_output "$(printf '%s\n' cancel unthrottle)"
	run fc "memvisor ctl checkpoint --ev"
	assert_output --partial --evict
	run fc "memvisor image "
	assert_output "$(printf '%s\n' info verify)"
	run fc "memvisor run --kill-d"
	assert_output --partial --kill-descendants
}
