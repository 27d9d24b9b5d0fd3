# memvisor — plain Makefile. Build output goes to build/ only.
#
#   make deps     install build and test dependencies (apt-get; sudo when not root)
#   make          build build/memvisor, the workloads and the unit tests
#   make demo     run a small program under memvisor and query it over the socket
#   make check    every test tier; ends with "N passed, N failed"
#   make soak     the storms for 60 s each, every fault point at several calls,
#                 the churn tier (evict/reload under real programs) for 35 min,
#                 and the evict, live and checkpoint repetitions, longer
#   make bench    benchmarks (bench/README.md)
#   make asan     ASan/UBSan build, then the bats suite against it
#   make fuzz     libFuzzer harnesses (tests/fuzz), each run FUZZ_SECONDS
#   make lint     cppcheck and clang-format
#   make install  the binary, the man pages and the bash completion under
#                 $(DESTDIR)$(PREFIX) (PREFIX=/usr/local); make uninstall
#   make clean

CC      ?= cc
BUILD   ?= build
VERSION := $(shell cat VERSION 2>/dev/null || echo 0.0.0)

CSTD     := -std=gnu11
WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wmissing-prototypes -Wstrict-prototypes
OPT      ?= -O2 -g
CPPFLAGS += -I. -D_GNU_SOURCE -DMV_VERSION=\"$(VERSION)\"
CFLAGS   += $(CSTD) $(WARN) $(OPT) -fno-strict-aliasing -MMD -MP
LDLIBS   := -lseccomp -lev -ljansson -lpthread -lm
SANITIZE ?=

DEPS_PKGS := build-essential pkg-config libseccomp-dev libev-dev libjansson-dev \
	     bats bats-support bats-assert python3 perl sqlite3 git \
	     clang libclang-rt-14-dev python3-prometheus-client groff-base \
	     runc crun busybox-static liburing-dev bash-completion zsh fish \
	     python3-yaml systemd

# Pure code (no event loop): linked into the binary and into unit tests.
CORE_SRC := $(wildcard common/*.c policy/*.c state/*.c tracee/*.c)
SUP_SRC  := $(wildcard supervisor/*/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/obj/%.o)
SUP_OBJ  := $(SUP_SRC:%.c=$(BUILD)/obj/%.o)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)

# Workloads: every tests/workloads/NAME.c becomes build/workloads/NAME;
# names ending in _static are linked statically.
WL_SRC   := $(wildcard tests/workloads/*.c)
WL_BIN   := $(WL_SRC:tests/workloads/%.c=$(BUILD)/workloads/%)

BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

# Fuzz harnesses: every tests/fuzz/fuzz_NAME.c becomes build/fuzz/fuzz_NAME,
# linked with the whole program (but main) built by clang with ASan/UBSan
# and libFuzzer's coverage. Built by check only where clang has libFuzzer.
FUZZ_CC      ?= clang
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_SECONDS ?= 60
FUZZ_SRC     := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN     := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_OBJ     := $(filter-out %/supervisor/cli/main.o,$(CORE_SRC:%.c=$(BUILD)/fuzz/obj/%.o) \
		  $(SUP_SRC:%.c=$(BUILD)/fuzz/obj/%.o))
HAVE_FUZZER  = $(shell printf 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' | \
		 $(FUZZ_CC) -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null && echo yes)

.PHONY: all deps demo check unit bats soak bench asan lint format clean fuzz fuzz-build

all: $(BUILD)/memvisor $(WL_BIN) $(UNIT_BIN) $(BENCH_BIN)

$(BUILD)/memvisor: $(CORE_OBJ) $(SUP_OBJ)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(SANITIZE) -c -o $@ $<

# Unit tests of supervisor code that needs no event loop.
$(BUILD)/unit/test_pagemap: $(BUILD)/obj/supervisor/kernel/pagemap.o \
	$(BUILD)/obj/supervisor/kernel/procfs.o
$(BUILD)/unit/test_rollback: $(BUILD)/obj/supervisor/rollback/layout.o

$(BUILD)/unit/%: tests/unit/%.c $(CORE_OBJ)
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CPPFLAGS) $(CFLAGS) $(SANITIZE) -o $@ $^ $(LDFLAGS) $(LDLIBS)

$(BUILD)/workloads/%_static: tests/workloads/%_static.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CPPFLAGS) $(CSTD) $(WARN) -O2 -g -static -pthread -o $@ $<

$(BUILD)/workloads/%: tests/workloads/%.c
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CPPFLAGS) $(CSTD) $(WARN) -O2 -g -pthread -o $@ $< $(WL_LIBS)

# Workloads that link a library of their own.
$(BUILD)/workloads/kheld: WL_LIBS := -luring
$(BUILD)/workloads/churn_uring: WL_LIBS := -luring

$(BUILD)/bench/%: bench/%.c bench/timing.h
	@mkdir -p $(dir $@)
	@echo "  CC      $@"
	@$(CC) $(CPPFLAGS) $(CSTD) $(WARN) -O2 -g -pthread -o $@ $< -lseccomp -lm

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	@echo "  FUZZCC  $<"
	@$(FUZZ_CC) $(CPPFLAGS) $(CSTD) $(WARN) -O1 -g -MMD -MP -fsanitize=fuzzer-no-link $(FUZZ_SAN) -c -o $@ $<

$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@echo "  FUZZLD  $@"
	@$(FUZZ_CC) $(CPPFLAGS) $(CSTD) $(WARN) -O1 -g -fsanitize=fuzzer $(FUZZ_SAN) -o $@ $^ $(LDLIBS)

.SECONDARY: $(FUZZ_OBJ)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

deps:
	@missing=$$(for p in $(DEPS_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		echo "installing:" $$missing; \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

demo: deps all
	@tests/demo.sh $(BUILD)

check: all $(if $(HAVE_FUZZER),fuzz-build)
	@tests/run.sh $(BUILD)

unit: $(UNIT_BIN)
	@tests/run.sh $(BUILD) unit

bats: all
	@tests/run.sh $(BUILD) bats

# churn.bats: 15 programs and modes for CHURN_SECONDS each (8 in check) and
# 2 SIGKILL tests for half of it, about 35 minutes with the native runs;
# the repetitions make check keeps short (SHM_CYCLES, LIVE_TRIES,
# EXEC_CHECKPOINTS) run longer here.
SOAK_CHURN_SECONDS ?= 120
soak: all
	@STORM_SECONDS=60 STORM_THREADS=64 STORM_PROCS=200 STORM_CLIENTS=100 FAULT_NTH="1 2 5" \
		CHURN_SECONDS=$(SOAK_CHURN_SECONDS) SHM_CYCLES=300 LIVE_TRIES=20 EXEC_CHECKPOINTS=100 \
		EVICT_STACK_RUNS=5 UFFD_STRESS_SECONDS=60 ROLLBACK_ITERS=5000 ROLLBACK_UNTIL_ITERS=20000 TREE_UNTIL_ITERS=2000 \
		AGENT_RESTARTS=200 \
		BATS_FILES="storm faults death churn shm_evict live checkpoint kernel_held evict_safety rollback rollback_until agent" \
		BATS_OPTS=--show-output-of-passing-tests tests/run.sh $(BUILD) bats

bench: all
	@bench/run.sh $(BUILD)

# Every report memvisor writes goes to build/asan/reports/; the run fails
# when there is one (tests/run.sh's last line), even if no test noticed.
# clang when present: GCC 12's UBSan, linked with ASan, ignores log_path.
ASAN_REPORTS := $(CURDIR)/build/asan/reports
ASAN_CC      ?= $(if $(shell command -v clang),clang,$(CC))
asan:
	$(MAKE) BUILD=build/asan CC=$(ASAN_CC) SANITIZE="-fsanitize=address,undefined -fno-omit-frame-pointer" OPT="-O1 -g" all
	@rm -rf $(ASAN_REPORTS) && mkdir -p $(ASAN_REPORTS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=99:log_path=$(ASAN_REPORTS)/asan \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_REPORTS)/ubsan \
		SANITIZER_REPORTS=$(ASAN_REPORTS) tests/run.sh build/asan bats

lint:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability,performance \
		--inline-suppr --suppress=missingIncludeSystem -I. -D_GNU_SOURCE \
		"-Djson_array_foreach(a,i,v)=for(i=0;(v=json_array_get(a,i));i++)" \
		"-Djson_object_foreach(o,k,v)=for(k=0,v=0;k;)" \
		common policy state tracee supervisor tests/fuzz
	clang-format --dry-run --Werror $(CORE_SRC) $(SUP_SRC) $(wildcard */*.h supervisor/*/*.h)

format:
	clang-format -i $(CORE_SRC) $(SUP_SRC) $(wildcard */*.h supervisor/*/*.h)

clean:
	rm -rf build

# Where make install puts things: $(DESTDIR)$(PREFIX)/bin/memvisor, the
# man pages (man/) under share/man, the example policies under
# share/memvisor/policy, the bash completion (completion/) where
# bash-completion loads it on demand, the zsh one (which runs the bash one
# through bashcompinit) where zsh's fpath has it for that prefix, and the
# fish one in fish's vendor directory.
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
POLICYDIR   ?= $(PREFIX)/share/memvisor/policy
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/share/zsh/vendor-completions,$(PREFIX)/share/zsh/site-functions)
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
POLICIES    := $(wildcard policy/examples/*.json)
MAN1        := $(wildcard man/*.1)
MAN5        := $(wildcard man/*.5)

.PHONY: install uninstall
install: $(BUILD)/memvisor
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(POLICYDIR) $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) \
		$(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(BUILD)/memvisor $(DESTDIR)$(BINDIR)/memvisor
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(POLICIES) $(DESTDIR)$(POLICYDIR)/
	install -m 0644 completion/memvisor $(DESTDIR)$(BASHCOMPDIR)/memvisor
	sed 's|@BASHCOMP@|$(BASHCOMPDIR)/memvisor|' completion/_memvisor.in \
		>$(DESTDIR)$(ZSHCOMPDIR)/_memvisor
	chmod 0644 $(DESTDIR)$(ZSHCOMPDIR)/_memvisor
	install -m 0644 completion/memvisor.fish $(DESTDIR)$(FISHCOMPDIR)/memvisor.fish

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/memvisor $(DESTDIR)$(BASHCOMPDIR)/memvisor \
		$(DESTDIR)$(ZSHCOMPDIR)/_memvisor $(DESTDIR)$(FISHCOMPDIR)/memvisor.fish \
		$(addprefix $(DESTDIR)$(POLICYDIR)/,$(notdir $(POLICIES))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5)))
	-rmdir $(DESTDIR)$(POLICYDIR) $(DESTDIR)$(PREFIX)/share/memvisor 2>/dev/null

-include $(CORE_OBJ:.o=.d) $(SUP_OBJ:.o=.d) $(FUZZ_OBJ:.o=.d)
