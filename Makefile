# zklua — see README.md.  `make` builds the C core, the Lua 5.4 module (build/zklua/core.so)
# and the ./zklua runner; `make luajit` the LuaJIT module (build/luajit/zklua/core.so) from the
# same sources; `make test` installs what is missing and runs the spec suite under both.

CC       ?= cc
LUA_INC  ?= /usr/include/lua5.4
LUA_LIB  ?= -llua5.4
LUAJIT_INC ?= /usr/include/luajit-2.1
CFLAGS   ?= -O2 -g
# Always added, also to a CFLAGS given on the command line (as luarocks does).
ZKL_CFLAGS := -std=c11 -D_GNU_SOURCE -DTHREADED -Wall -Wextra -Werror -fPIC
# The ZooKeeper C client (libzookeeper_mt) zklua links:
#   ZK_CLIENT=source (default): Debian's own zookeeper source package built with TLS and SASL
#     into build/zookeeper-client (scripts/build-zookeeper-client, once; linked statically);
#   ZK_CLIENT=system: the installed libzookeeper-mt (luarocks, other distributions), with TLS
#     and SASL when that library has them (scripts/zookeeper-client-features checks by linking).
# ZK_CPPFLAGS then defines ZKL_HAVE_TLS / ZKL_HAVE_SASL / ZKL_HAVE_TLS_SASL, and for the source
# build ZKL_SET_WATCHES_IN_BATCHES, ZKL_HAVE_CONNECT_HOOK, ZKL_COMPLETION_ZXID and ZKL_MULTI_READ (its patches:
# scripts/zookeeper-client-patches) (features.h)
# and ZKL_HAVE_KRB5 (libkrb5: SASL GSSAPI's principal is checked, src/core/kerberos.c; and
# libgssapi_krb5: its tickets are fetched before the connection, src/core/kerberos_tickets.c).
ZK_CLIENT ?= source
ifeq ($(ZK_CLIENT),source)
ZK_DIR      := build/zookeeper-client
ZK_DEP      := $(ZK_DIR)/stamp
ZK_FEATURES := -I$(ZK_DIR)/include -DHAVE_OPENSSL_H -DHAVE_CYRUS_SASL_H -DZKL_HAVE_TLS \
               -DZKL_HAVE_SASL -DZKL_HAVE_TLS_SASL -DZKL_SET_WATCHES_IN_BATCHES -DZKL_HAVE_KRB5 \
               -DZKL_HAVE_CONNECT_HOOK -DZKL_COMPLETION_ZXID -DZKL_MULTI_READ
ZK_CPPFLAGS := $(ZK_FEATURES) -DZKL_ZK_BUILD='"Debian source package"'
ZK_LIBS     := $(ZK_DIR)/lib/libzookeeper_mt.a -lssl -lcrypto -lsasl2 -lgssapi_krb5 -lkrb5 -lrt
else ifeq ($(ZK_CLIENT),system)
ZK_DEP      :=
ZK_FEATURES := $(shell scripts/zookeeper-client-features "$(CC)" "$(CPPFLAGS)" "$(LDFLAGS)")
ZK_CPPFLAGS := $(ZK_FEATURES) -DZKL_ZK_BUILD='"system library"'
ZK_LIBS     := -lzookeeper_mt
else
$(error ZK_CLIENT must be source or system, not "$(ZK_CLIENT)")
endif
LDLIBS   += $(ZK_LIBS) -lpthread
PREFIX   ?= /usr/local
# Where `make install` puts things (luarocks passes its own: rockspec/zklua-scm-1.rockspec).
INST_LIBDIR ?= $(PREFIX)/lib/lua/5.4
INST_LUADIR ?= $(PREFIX)/share/lua/5.4
INST_BINDIR ?= $(PREFIX)/bin
# Where `make install-nginx` puts the LuaJIT module and the Lua files: the directories Debian's
# nginx (libnginx-mod-http-lua, OpenResty's LuaJIT) searches by default under /usr/local.
NGX_LIBDIR ?= $(PREFIX)/lib/lua/5.1
NGX_LUADIR ?= $(PREFIX)/share/lua/5.1

CORE_SRC := $(wildcard src/core/*.c src/recipes/*.c src/recipes/*/*.c)
LUA_SRC  := $(wildcard src/lua/*.c)
CORE_OBJ := $(CORE_SRC:src/%.c=build/obj/%.o)
LUA_OBJ  := $(LUA_SRC:src/%.c=build/obj/%.o)
LUAJIT_OBJ := $(LUA_SRC:src/%.c=build/luajit/obj/%.o)
HEADERS  := $(wildcard src/*/*.h src/*/*/*.h)

# The sanitized build (make asan): its own objects and runner under build/asan.
SAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SAN_OBJ   := $(patsubst src/%.c,build/asan/obj/%.o,$(CORE_SRC) $(LUA_SRC) src/cli/main.c)
# The bounded sanitizer run inside make test: the specs that drive the C code hardest.
SAN_QUICK := spec/crud_spec.lua spec/async_spec.lua spec/bad_input_spec.lua spec/fuzz_spec.lua \
             spec/lock_spec.lua spec/session_spec.lua spec/connection_retry_spec.lua \
             spec/counter_backoff_spec.lua spec/waker_spec.lua spec/service_discovery_spec.lua \
             spec/persistent_node_spec.lua spec/curator_semaphore_spec.lua spec/window_spec.lua \
             spec/sasl_spec.lua spec/batched_writes_spec.lua

.PHONY: all luajit install install-nginx clean test test-loaded test-lua54 test-luajit demo bench deps lint asan asan-quick \
        valgrind soak docs chaos test-fast test-scale test-repeat test-partition kazoo-parity curator-parity fuzz-long \
        bench-scale

all: build/zklua/core.so zklua

build/obj/%.o: src/%.c $(HEADERS) $(ZK_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(ZK_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(ZKL_CFLAGS) -I$(LUA_INC) -c $< -o $@

# The C client built from Debian's source package (ZK_CLIENT=source), kept across builds.
build/zookeeper-client/stamp: scripts/build-zookeeper-client $(wildcard scripts/zookeeper-client-patches/*.patch)
	scripts/build-zookeeper-client

build/libzklua_core.a: $(CORE_OBJ)
	ar rcs $@ $^

build/zklua/core.so: $(LUA_OBJ) build/libzklua_core.a
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $(LUA_OBJ) build/libzklua_core.a $(LDLIBS)

# The LuaJIT (Lua 5.1 ABI) module: only the binding differs; it links no Lua library, the
# host (luajit, nginx) provides the API.
luajit: build/luajit/zklua/core.so

build/luajit/obj/%.o: src/%.c $(HEADERS) $(ZK_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(ZK_CPPFLAGS) $(CPPFLAGS) $(CFLAGS) $(ZKL_CFLAGS) -I$(LUAJIT_INC) -c $< -o $@

build/luajit/zklua/core.so: $(LUAJIT_OBJ) build/libzklua_core.a
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $(LUAJIT_OBJ) build/libzklua_core.a $(LDLIBS)

zklua: build/obj/cli/main.o $(LUA_OBJ) build/libzklua_core.a
	$(CC) $(LDFLAGS) -o $@ $^ $(LUA_LIB) $(LDLIBS) -lm -ldl -Wl,-E

# The Lua 5.4 module, every Lua file under lua/ and the zklua command.  The command finds the
# Lua files of a tree next to it (<bin>/../share/lua/5.4), or through LUA_PATH.
install: all
	install -d $(DESTDIR)$(INST_LIBDIR)/zklua $(DESTDIR)$(INST_BINDIR)
	install -m 755 build/zklua/core.so $(DESTDIR)$(INST_LIBDIR)/zklua/core.so
	cd lua && find zklua -name '*.lua' -exec install -D -m 644 {} $(DESTDIR)$(INST_LUADIR)/{} \;
	install -m 755 zklua $(DESTDIR)$(INST_BINDIR)/zklua

# For nginx: the LuaJIT module and every Lua file under lua/, where nginx's LuaJIT finds them
# with no lua_package_path (PREFIX /usr/local); another PREFIX needs the two lines README.md
# gives.  spec/nginx_spec.lua installs into a DESTDIR and runs nginx on what it installed.
install-nginx: luajit
	install -d $(DESTDIR)$(NGX_LIBDIR)/zklua
	install -m 755 build/luajit/zklua/core.so $(DESTDIR)$(NGX_LIBDIR)/zklua/core.so
	cd lua && find zklua -name '*.lua' -exec install -D -m 644 {} $(DESTDIR)$(NGX_LUADIR)/{} \;

# Installs missing Debian packages when run as root, or prints the apt-get line and stops.
deps:
	@scripts/ensure-deps

# The suite under Lua 5.4 and the same suite under LuaJIT (the module ngx_lua loads; the nginx
# spec needs it built either way), side by side (scripts/run-suites), and beside them a third
# stream: the bounded sanitizer run (make asan-quick), then SIDE_SPECS under Lua 5.4 and then
# under LuaJIT (the suites leave them out).  SIDE_SPECS are the longest spec files: run in the
# suites they made each suite's critical path longer than the sanitizer run, which waited.
# Every spec still runs under both interpreters; the side stream's output is printed after the
# suites'.  The suites must pass on a machine busier than that (make test-loaded), and the
# three mostly wait.  The last line adds up the runs (scripts/spec-total).
# The slowest spec files of the run are listed from build/spec-times (ZKLUA_SPEC_TIMES).
SPEC_ENV := ZKLUA_SPEC_TALLY=build/spec-tally ZKLUA_SPEC_TIMES=build/spec-times
# Measured in a loaded run (make test-loaded, 2 CPU hogs): the suites took 1780 s (Lua 5.4) and
# 1658 s (LuaJIT) with the first three here, the side stream 1083 s; nesting and chaos_load
# (about 200 and 180 s over both interpreters) even that out.
SIDE_SPECS := spec/curator_parity_spec.lua spec/tls_spec.lua spec/tls_faults_spec.lua \
              spec/nesting_spec.lua spec/chaos_load_spec.lua
test: deps all luajit lint build/asan/zklua
	@rm -f build/spec-tally build/spec-times
	@{ $(SPEC_ENV) $(MAKE) --no-print-directory asan-quick; a=$$?; \
	   $(SPEC_ENV) scripts/run-specs $(SIDE_SPECS); b=$$?; \
	   $(SPEC_ENV) scripts/run-specs --lua=luajit $(SIDE_SPECS); c=$$?; \
	   [ $$a -eq 0 ] && [ $$b -eq 0 ] && [ $$c -eq 0 ]; } > build/suite-side.log 2>&1 & side=$$!; \
	ZKLUA_SUITE_EXCLUDE="$(SIDE_SPECS)" $(SPEC_ENV) scripts/run-suites; suites=$$?; \
	wait $$side; side_rc=$$?; \
	echo "== make asan-quick, then $(SIDE_SPECS) under Lua 5.4 and LuaJIT (exit $$side_rc)"; \
	cat build/suite-side.log; \
	echo "slowest spec files (s, all runs):"; \
	sort -rn build/spec-times | head -n 12; \
	echo "all runs (Lua 5.4, LuaJIT, sanitizers):"; \
	scripts/spec-total build/spec-tally; \
	[ $$suites -eq 0 ] && [ $$side_rc -eq 0 ]

# make test on a loaded machine: one CPU hog per core (HOGS, default all of them: a shell
# busy loop at nice 0, as busy as the machine gets when other checks run beside the suite),
# so that the races only load shows come out here and not in someone else's run.  The hogs
# are started and stopped by their PIDs when the run ends, whatever its result (Ctrl-C
# too); the last line gives make test's exit status and the elapsed time.
HOGS ?= $(shell nproc 2>/dev/null || echo 2)
test-loaded:
	@start=$$(date +%s); hogs=""; i=0; \
	trap 'kill $$hogs 2>/dev/null' EXIT; trap 'exit 130' INT TERM; \
	while [ $$i -lt $(HOGS) ]; do \
		nice -n 0 sh -c 'while :; do :; done' & hogs="$$hogs $$!"; i=$$((i + 1)); \
	done; \
	echo "test-loaded: $(HOGS) CPU hogs, pids$$hogs"; \
	$(MAKE) --no-print-directory test; rc=$$?; \
	kill $$hogs 2>/dev/null; wait $$hogs 2>/dev/null; hogs=""; \
	took=$$(( $$(date +%s) - start )); \
	echo "test-loaded: make test exit $$rc after $$((took / 60)) min $$((took % 60)) s" \
	     "($$took s, $(HOGS) CPU hogs)"; \
	exit $$rc

# kazoo's own tests translated into spec/kazoo/: one line per kazoo test (pass, difference KEY,
# not applicable, FAIL) and totals per kazoo file (scripts/kazoo-parity); non-zero on a FAIL.
# Lua 5.4, or LuaJIT with LUA=luajit.
LUA ?= lua5.4
kazoo-parity: deps all $(if $(filter luajit%,$(LUA)),luajit)
	scripts/kazoo-parity --lua=$(LUA)

# Curator's own test classes translated into spec/curator/ (one file per class): one line per
# Curator test method (pass, difference KEY, not applicable, missing, FAIL) and totals per class
# (scripts/curator-parity); non-zero on a FAIL or a missing test.  Lua 5.4, or LuaJIT with
# LUA=luajit.  make test runs it through spec/curator_parity_spec.lua.
curator-parity: deps all $(if $(filter luajit%,$(LUA)),luajit)
	scripts/curator-parity --lua=$(LUA)

test-lua54: deps all
	scripts/run-specs

# The edit-test loop: every spec but the slow ones, under Lua 5.4 (under 3 minutes on an idle
# 2-core machine).  Slow: a minute or more each, or an ensemble, nginx, valgrind, luarocks,
# many processes or long fault windows.  make test still runs them all.
SLOW_SPECS := $(addprefix spec/,$(addsuffix _spec.lua,chaos chaos_load quorum ensemble \
              expiry_matrix nginx nginx_balancer valgrind luarocks examples allocator_processes fuzz semaphore \
              tree_cache set_partitioner lease election locking_queue handler_cqueues sharing lock \
              patient_children session connection_retry counter_backoff cli watch allocator sandbox \
              docs every_wait_ends logging partition curator_interop curator_semaphore \
              persistent_node curator_discovery curator_parity curator_ttl_node tls sasl kerberos x509 tls_sasl \
              tls_sasl_interop tls_faults))
FAST_SPECS := $(filter-out $(SLOW_SPECS),$(sort $(wildcard spec/*_spec.lua)))
test-fast: deps all
	scripts/run-specs $(FAST_SPECS)

# The specs whose sizes make test keeps small, at ten times those sizes: a burst of 100k watch
# events per handler (spec/nesting_spec.lua; 10k in make test), under Lua 5.4 and LuaJIT side
# by side.  Several minutes per handler and interpreter.
test-scale: deps all luajit
	ZKLUA_BURST_EVENTS=100000 scripts/run-suites spec/nesting_spec.lua

# The partition spec alone (spec/partition_spec.lua, also in make test): a node cut off from
# the others (links closed, or silenced), a node cut from the leader only, a rebalance and an
# allocator's claim cut in half; it ends with the fault and partition matrix from its ledgers.
test-partition: deps all
	scripts/run-specs spec/partition_spec.lua

# One spec N times in a row (flake hunting): make test-repeat SPEC=spec/lock_spec.lua N=5.
# Every run goes to the end; the last line counts the failed runs (non-zero exit if any).
N ?= 5
test-repeat: deps all
	@test -n "$(SPEC)" || { echo "usage: make test-repeat SPEC=spec/x_spec.lua [N=5]" >&2; exit 2; }
	@failed=0; i=1; while [ $$i -le $(N) ]; do \
		echo "== run $$i of $(N): $(SPEC)"; \
		scripts/run-specs $(SPEC) || failed=$$((failed + 1)); i=$$((i + 1)); \
	done; echo "test-repeat: $$failed of $(N) runs failed ($(SPEC))"; [ $$failed -eq 0 ]

build/asan/obj/%.o: src/%.c $(HEADERS) $(ZK_DEP)
	@mkdir -p $(dir $@)
	$(CC) $(ZK_CPPFLAGS) -std=c11 -D_GNU_SOURCE -DTHREADED -Wall -Wextra -Werror $(SAN_FLAGS) -I$(LUA_INC) -c $< -o $@

# (the runner finds the Lua modules in lua/ next to itself: the link points at the checkout's)
build/asan/zklua: $(SAN_OBJ)
	$(CC) $(SAN_FLAGS) -o $@ $^ $(LUA_LIB) $(LDLIBS) -lm -ldl -Wl,-E
	ln -sfn ../../lua build/asan/lua

# The whole spec suite with the C code under AddressSanitizer and UndefinedBehaviorSanitizer
# (leaks included): any report aborts the run.  The nginx spec runs the LuaJIT module: built too.
SAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:fast_unwind_on_malloc=0 \
           LSAN_OPTIONS=suppressions=scripts/lsan.supp UBSAN_OPTIONS=print_stacktrace=1 \
           ZKLUA_SPEC_LUA=build/asan/zklua
asan: deps all luajit build/asan/zklua
	$(SAN_ENV) scripts/run-specs

asan-quick: all build/asan/zklua
	$(SAN_ENV) scripts/run-specs $(SAN_QUICK)

# The API reference (LDoc, config.ld) in docs/api/, from the Lua modules' doc comments.
docs: deps
	ldoc -q .

# PartitionAllocator workers under random faults for CHAOS_SECONDS (default 60); a checker
# proves no item was owned twice at once (spec/chaos_spec.lua runs a 15 s form in make test).
CHAOS_SECONDS ?= 60
chaos: deps all
	./zklua scripts/chaos.lua $(CHAOS_SECONDS) 6 60

# The fuzz (spec/fixtures/fuzz.lua; make test runs a few seeds) for FUZZ_CALLS calls on a
# throwaway server, in runs of 2500 alternating Lua 5.4 and LuaJIT (FUZZ_LUA=lua5.4 or luajit
# for one): prints the counts of zklua errors, raw errors, wrong outcomes, hangs (every call
# has a watchdog) and crashes; fails on any of the last four.
FUZZ_CALLS ?= 50000
FUZZ_LUA ?= both
fuzz-long: deps all luajit
	./zklua --sandbox spec/fixtures/fuzz_long.lua $(FUZZ_CALLS) $(FUZZ_LUA)

# One million ops and watch events through one client: its RSS must stay flat.
soak: deps all
	./zklua scripts/soak.lua

# The spec/fixtures/*_valgrind.lua scripts under valgrind: no definite leak, no error.
valgrind: deps all
	scripts/run-specs spec/valgrind_spec.lua

test-luajit: deps all luajit
	scripts/run-specs --lua=luajit

demo: deps all
	./zklua --sandbox examples/partition_demo.lua

# One table: raw C, zklua (Lua 5.4 and LuaJIT) and kazoo on one throwaway server; also written
# to docs/benchmarks.md.  BENCH_ROUNDS (default 3) and the knobs in bench/run.lua.
bench: deps all luajit
	./zklua bench/run.lua

# Issue 20's grid at ten times the tested sizes, zklua and kazoo taking turns point by point:
# docs/scale.md and a chart per workload in docs/scale/*.svg (gnuplot).  SIZE=small: a tenth of
# every size, in a few minutes (build/scale-small/).  Knobs (SCALE_CAP, SCALE_DEADLINE,
# SCALE_ONLY, ...) in bench/scale.lua.
bench-scale: deps all
	./zklua bench/scale.lua

# luacheck with the project's .luacheckrc over the Lua, clang-tidy with its .clang-tidy over
# the C; fails on any warning.  The binding is checked against both Lua APIs (5.4 and LuaJIT's).
# clang-tidy runs on every core, four files a process (ZKL_ZK_BUILD, a quoted string, is left
# to its default: it names where the C client came from and changes no code path).
LINT_JOBS := $(shell nproc 2>/dev/null || echo 2)
LINT_FLAGS := -std=c11 -D_GNU_SOURCE -DTHREADED $(ZK_FEATURES)
lint: $(ZK_DEP)
	@luacheck --quiet --formatter plain lua spec bench examples scripts/*.lua || \
		{ echo "lint: luacheck found the warnings above"; exit 1; }
	@out=$$( (printf '%s\n' $(CORE_SRC) $(LUA_SRC) src/cli/main.c | xargs -P $(LINT_JOBS) -n 4 \
		sh -c 'clang-tidy "$$@" -- $(LINT_FLAGS) -I$(LUA_INC)' lint; \
		printf '%s\n' $(LUA_SRC) | xargs -P $(LINT_JOBS) -n 4 \
		sh -c 'clang-tidy "$$@" -- $(LINT_FLAGS) -I$(LUAJIT_INC)' lint) 2>/dev/null | \
		grep -E "warning:|error:"); \
	if [ -n "$$out" ]; then echo "$$out"; exit 1; else echo "lint: clean"; fi

clean:
	rm -rf build zklua
