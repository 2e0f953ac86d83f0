-- zklua from a checkout, offline:
--   luarocks --lua-version 5.4 make --tree DIR rockspec/zklua-scm-1.rockspec
-- builds with the Makefile (the C core on the installed libzookeeper-mt: ZK_CLIENT=system, with
-- TLS and SASL only if that library has them; the Lua 5.4 module, the
-- zklua command) and installs zklua.core, every zklua Lua module and bin/zklua into DIR.
-- Needs the Debian packages scripts/ensure-deps lists (libzookeeper-mt-dev, liblua5.4-dev);
-- it names no rock dependencies, as Debian's Lua modules are not in luarocks' manifest.
rockspec_format = "3.0"
package = "zklua"
version = "scm-1"
source = {
  url = "git+file:///zklua", -- `luarocks make` builds the checkout it runs in; this is unused
}
description = {
  summary = "A ZooKeeper coordination engine for Lua with kazoo's API",
  detailed = [[
A C core on the official ZooKeeper C client (libzookeeper-mt) keeps the session, the watches
and the retries; Lua scripts drive it through kazoo's API, states, errors and znode layouts
(locks, elections, counters, parties, barriers shared with kazoo processes).
]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
external_dependencies = {
  ZOOKEEPER = {
    header = "zookeeper/zookeeper.h",
    library = "zookeeper_mt",
  },
}
build = {
  type = "make",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    CPPFLAGS = "-I$(ZOOKEEPER_INCDIR)",
    LDFLAGS = "-L$(ZOOKEEPER_LIBDIR)",
    LUA_INC = "$(LUA_INCDIR)",
    ZK_CLIENT = "system", -- the installed libzookeeper-mt; TLS / SASL if it has them
  },
  install_variables = {
    ZK_CLIENT = "system",
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
    INST_BINDIR = "$(BINDIR)",
  },
}
