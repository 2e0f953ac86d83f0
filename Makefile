# zklua — see README.md.  `make` builds the C core, the Lua 5.4 module (build/zklua/core.so)
# and the ./zklua runner; `make luajit` the LuaJIT module (build/luajit/zklua/core.so) from the
# same sources; `make test` installs what is missing and runs the spec suite under both.

CC       ?= cc
LUA_INC  ?= /usr/include/lua5.4
LUA_LIB  ?= -llua5.4
LUAJIT_INC ?= /usr/include/luajit-2.1
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -DTHREADED -Wall -Wextra -Werror -fPIC
LDLIBS   += -lzookeeper_mt -lpthread
PREFIX   ?= /usr/local

CORE_SRC := $(wildcard src/core/*.c src/recipes/*.c)
LUA_SRC  := $(wildcard src/lua/*.c)
CORE_OBJ := $(CORE_SRC:src/%.c=build/obj/%.o)
LUA_OBJ  := $(LUA_SRC:src/%.c=build/obj/%.o)
LUAJIT_OBJ := $(LUA_SRC:src/%.c=build/luajit/obj/%.o)
HEADERS  := $(wildcard src/*/*.h)

.PHONY: all luajit clean test test-lua54 test-luajit demo bench deps lint

all: build/zklua/core.so zklua

build/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(LUA_INC) -c $< -o $@

build/libzklua_core.a: $(CORE_OBJ)
	ar rcs $@ $^

build/zklua/core.so: $(LUA_OBJ) build/libzklua_core.a
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(LUA_OBJ) build/libzklua_core.a $(LDLIBS)

# The LuaJIT (Lua 5.1 ABI) module: only the binding differs; it links no Lua library, the
# host (luajit, nginx) provides the API.
luajit: build/luajit/zklua/core.so

build/luajit/obj/%.o: src/%.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -I$(LUAJIT_INC) -c $< -o $@

build/luajit/zklua/core.so: $(LUAJIT_OBJ) build/libzklua_core.a
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(LUAJIT_OBJ) build/libzklua_core.a $(LDLIBS)

zklua: build/obj/cli/main.o $(LUA_OBJ) build/libzklua_core.a
	$(CC) -o $@ $^ $(LUA_LIB) $(LDLIBS) -lm -ldl -Wl,-E

# Installs missing Debian packages when run as root, or prints the apt-get line and stops.
deps:
	@scripts/ensure-deps

# The suite under Lua 5.4, then under LuaJIT.
test: deps all luajit lint
	scripts/run-specs
	scripts/run-specs --lua=luajit

test-lua54: deps all
	scripts/run-specs

test-luajit: deps all luajit
	scripts/run-specs --lua=luajit

demo: deps all
	./zklua --sandbox examples/demo.lua

bench: deps all
	./zklua bench/run.lua

# clang-tidy with the project's .clang-tidy; fails on any warning.
lint:
	@out=$$(clang-tidy $(CORE_SRC) $(LUA_SRC) src/cli/main.c -- -std=c11 -D_GNU_SOURCE \
		-DTHREADED -I$(LUA_INC) 2>/dev/null | grep -E "warning:|error:"); \
	if [ -n "$$out" ]; then echo "$$out"; exit 1; else echo "lint: clean"; fi

clean:
	rm -rf build zklua
