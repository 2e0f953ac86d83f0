/* zklua_version.h — the one place the version is written. */
#define ZKLUA_VERSION "0.1.0"
