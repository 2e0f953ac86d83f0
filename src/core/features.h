/*
 * features.h — what the ZooKeeper C client zklua is linked with can do, as the build found it
 * (the Makefile's ZK_CLIENT): ZKL_HAVE_TLS when it has zookeeper_init_ssl, ZKL_HAVE_SASL when
 * it has zookeeper_init_sasl, ZKL_HAVE_TLS_SASL when it has zookeeper_init_ssl_sasl (SASL over
 * TLS: zklua's patch to the C client, scripts/zookeeper-client-patches/ssl-sasl-init.patch),
 * ZKL_HAVE_CONNECT_HOOK when it has zoo_set_connect_hook (zklua's patch zoo-set-connect-hook:
 * a SASL GSSAPI session gets its tickets before each connection, src/core/reconnect.h),
 * ZKL_ZK_BUILD where it came from ("Debian source package" or "system library"),
 * ZKL_ZK_VERSION its version ("3.8.0"), ZKL_ZK_FEATURES "tls, sasl, sasl over tls" or what it
 * lacks ("no tls, no sasl").
 */
#ifndef ZKL_FEATURES_H
#define ZKL_FEATURES_H

#include <zookeeper/zookeeper_version.h>

#ifndef ZKL_ZK_BUILD
#define ZKL_ZK_BUILD "system library"
#endif
#define ZKL_ZK_VERSION ZOO_VERSION

#if defined(ZKL_HAVE_TLS) && defined(ZKL_HAVE_SASL) && defined(ZKL_HAVE_TLS_SASL)
#define ZKL_ZK_FEATURES "tls, sasl, sasl over tls"
#elif defined(ZKL_HAVE_TLS) && defined(ZKL_HAVE_SASL)
#define ZKL_ZK_FEATURES "tls, sasl, no sasl over tls"
#elif defined(ZKL_HAVE_TLS)
#define ZKL_ZK_FEATURES "tls, no sasl"
#elif defined(ZKL_HAVE_SASL)
#define ZKL_ZK_FEATURES "no tls, sasl"
#else
#define ZKL_ZK_FEATURES "no tls, no sasl"
#endif

#endif
