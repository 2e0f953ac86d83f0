/*
 * service_instance.h — Curator x-discovery's ServiceInstance and its znode bytes (no Lua, no
 * ZooKeeper here): what JsonInstanceSerializer writes and reads, so zklua and Curator (Java,
 * Spring Cloud Zookeeper) processes register and find each other's instances.
 *
 * The layout (ServiceDiscoveryImpl): an instance of service <name> is the znode
 * <base>/<name>/<id>, its data this JSON; the recipes that write and watch those znodes are
 * lua/zklua/recipes/service_discovery.lua and service_cache.lua.
 *
 * Guarantees:
 * - zkl_service_instance_encode() writes the bytes Jackson writes for Curator 5's default
 *   serializer (JsonInstanceSerializer(payloadClass), "compatible" mode: OldServiceInstance,
 *   no "enabled" field), member for member and escape for escape:
 *     {"name":"api","id":"…","address":"10.0.0.1","port":8080,"sslPort":null,
 *      "payload":null,"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC",
 *      "uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false}]}}
 *   and with with_enabled (JsonInstanceSerializer(payloadClass, false)) a last ,"enabled":…
 *   A string payload is written as a JSON string (Jackson writes a java.lang.String payload
 *   without type information); any other payload is JSON text the caller gives (an object
 *   payload carries Jackson's "@class" member; the caller writes it).
 * - zkl_service_instance_decode() reads what either form (and Curator 4's) holds; a member it
 *   does not know is ignored and one that is missing takes Jackson's default (null, 0;
 *   "enabled" true).  Anything else malformed is an error naming the member; nothing leaks.
 * - A uriSpec is given and returned as Curator's template text ("{scheme}://{address}:{port}"),
 *   parsed into parts exactly as Curator's UriSpec(String) does (variable names trimmed).
 * - SUSPENDED and LOST do not apply: these are pure functions of their input.
 */
#ifndef ZKL_SERVICE_INSTANCE_H
#define ZKL_SERVICE_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

/* Curator's ServiceType (and ZKL_SERVICE_TYPE_NULL: the member is null or missing). */
typedef enum {
    ZKL_SERVICE_TYPE_NULL = 0,
    ZKL_SERVICE_DYNAMIC,           /* an ephemeral znode */
    ZKL_SERVICE_STATIC,            /* a persistent znode */
    ZKL_SERVICE_PERMANENT,         /* a persistent znode */
    ZKL_SERVICE_DYNAMIC_SEQUENTIAL /* an ephemeral sequential znode */
} zkl_service_type;

typedef struct {
    char *name, *id, *address; /* NULL: null */
    int has_port, has_ssl_port; /* 0: null */
    int32_t port, ssl_port;
    char *payload_json;        /* the payload as JSON text; NULL: null */
    int64_t registration_time_utc; /* ms since the epoch */
    zkl_service_type service_type;
    char *uri_spec;            /* the template; NULL: null */
    int enabled;
} zkl_service_instance;

/* The names of ServiceType, indexed by zkl_service_type (NULL first). */
extern const char *const zkl_service_type_names[];
/* The type called name, or -1. */
int zkl_service_type_named(const char *name);

/* The JSON bytes of in (malloc'd, NUL-terminated, *len without the NUL), or NULL with *error
 * (a static message): a string that is not UTF-8, a payload_json that is not one JSON value,
 * a uriSpec Curator refuses, or out of memory. */
char *zkl_service_instance_encode(const zkl_service_instance *in, int with_enabled,
                                  size_t *len, const char **error);

/* Fills out (which the caller then clears) from data[0..len): 0, or -1 with *error (a static
 * message) and out left empty. */
int zkl_service_instance_decode(const char *data, size_t len, zkl_service_instance *out,
                                const char **error);

/* Frees what out holds and empties it. */
void zkl_service_instance_clear(zkl_service_instance *out);

#endif
