/* The client's C ABI (libmxfp6_client.so), for training processes in other languages (the Python
 * package loads it with ctypes). Resolves keys to plans and code objects; loading and launching
 * them is the runtime's C ABI (runtime/mxfp6rt.h).
 *
 * Keys are text, "op/variant/target/sizes/M" (mxfp6-db's spelling, e.g.
 * "ln_modulate_fwd/S=256,layout=bsd/sm_90/D=3072/4096"). Every function that can fail takes an
 * error buffer and writes a one-line message into it; strings returned belong to their handle. */
#ifndef MXFP6_CLIENT_H
#define MXFP6_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxc_client mxc_client;
typedef struct mxc_resolution mxc_resolution;

/* uri: "grpc://HOST:PORT[,HOST:PORT...]" (servers, tried in order) or "sqlite:///PATH" (a kernel
 * database file, no server). cache_dir: the node cache (NULL or "" for none). deadline_ms: per
 * call (0: 30 s). NULL on error: no server reachable and no cache, an unreadable database ... */
mxc_client* mxc_connect(const char* uri, const char* cache_dir, int64_t deadline_ms, char* error, size_t error_size);
void mxc_close(mxc_client* client);
/* Where answers come from now, e.g. "server 127.0.0.1:50051, node cache /var/cache/mxfp6". */
const char* mxc_describe(mxc_client* client);

/* Resolves n keys in one round trip. NULL when nothing could answer; per-key failures are in the
 * result (mxc_op_error). */
mxc_resolution* mxc_resolve(mxc_client* client, const char* const* keys, size_t n, char* error, size_t error_size);
void mxc_resolution_free(mxc_resolution* resolution);

/* "served by ...", "offline: answered from the node cache ...", "embedded: ..." */
const char* mxc_status(const mxc_resolution* r);
/* 0 server, 1 node cache (offline), 2 embedded database. */
int mxc_source(const mxc_resolution* r);
double mxc_seconds(const mxc_resolution* r);
int64_t mxc_objects_from_server(const mxc_resolution* r);
int64_t mxc_bytes_from_server(const mxc_resolution* r);
int64_t mxc_objects_from_cache(const mxc_resolution* r);

/* One entry per requested key, in request order. */
size_t mxc_op_count(const mxc_resolution* r);
const char* mxc_op_key(const mxc_resolution* r, size_t i);
/* NULL when the key resolved; else why not (and the accessors below return "" / 0). */
const char* mxc_op_error(const mxc_resolution* r, size_t i);
/* "pinned", "exact", "nearest" or "default". */
const char* mxc_op_rule(const mxc_resolution* r, size_t i);
const char* mxc_op_why(const mxc_resolution* r, size_t i);
const char* mxc_op_plan_id(const mxc_resolution* r, size_t i);
/* The plan as JSON (ops/plan.h): its launches' roles, kernels, configs and objects' sha256. */
const char* mxc_op_plan_json(const mxc_resolution* r, size_t i);
size_t mxc_op_launch_count(const mxc_resolution* r, size_t i);
/* Launch j's code object: its bytes (cubin, PTX or HSACO), launch metadata JSON and sha256.
 * Returns 0, or -1 for an index out of range. */
int mxc_op_launch_object(const mxc_resolution* r, size_t i, size_t j, const void** bytes, size_t* size,
                         const char** metadata_json, const char** sha256);

#ifdef __cplusplus
}
#endif

#endif /* MXFP6_CLIENT_H */
