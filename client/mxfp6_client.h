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

#include "runtime/mxfp6rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mxc_client mxc_client;
typedef struct mxc_resolution mxc_resolution;

/* uri: "grpc://HOST:PORT[,HOST:PORT...][?fresh_for=SECONDS]" (servers, tried in order; with
 * fresh_for, answers the node cache got less than that long ago are used without asking) or
 * "sqlite:///PATH" (a kernel
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
/* 0 server, 1 node cache (offline), 2 embedded database, 3 node cache (answers younger than
 * fresh_for). */
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

/* ---- Running a resolved op from tensors (ops/compose.h through ops/execute.h) ----
 *
 * An mxc_op is one resolved op's plan with its code objects' launch metadata, independent of the
 * resolution it came from (free that whenever). mxc_op_load loads its code objects on a device
 * once; mxc_op_launch composes the plan's launches from the call's named tensors and scalars
 * (the op's argument names, docs/architecture.md "Ops": norm_rope_qkv_fwd takes qkv, q_weight,
 * k_weight, q_cos, q_sin, k_cos, k_sin, q, k, v, q_rstd, k_rstd; pos_div, eps) and launches them
 * in order on a stream. Every launch of the plan is checked (names, shapes against the resolved
 * key, dtypes, strides, alignment, overlap) before the first one is enqueued, so a bad argument
 * launches nothing. Functions that can fail return an mxrt_status (0 = MXRT_SUCCESS;
 * MXRT_ERROR_INVALID_ARGUMENT for the caller's arguments, the message naming the argument;
 * MXRT_ERROR_DRIVER for the driver) and write the message into the error buffer. */
typedef struct mxc_op mxc_op;

typedef struct mxc_named_tensor {
  const char* name;
  mxrt_tensor tensor;
} mxc_named_tensor;

typedef struct mxc_named_scalar {
  const char* name;
  double value;
} mxc_named_scalar;

/* Scratch memory for a launch (fp32 partials, transposed scales): `bytes` of device memory,
 * 256-byte aligned, on the launch's device, that stays valid for work enqueued on the launch's
 * stream until mxc_op_launch returns. Writes *ptr and returns 0, or returns nonzero when it
 * cannot allocate. A stream-ordered caching allocator (PyTorch's) satisfies this by keeping the
 * tensor alive until the call returns: memory freed then is reused only by work ordered after
 * the launches on the same stream. Called zero or more times per launch, from the calling
 * thread. */
typedef int (*mxc_scratch_fn)(void* user, size_t bytes, void** ptr);

/* Op i of a resolution (one that resolved); NULL on error (a failed key, launch metadata of
 * another schema ...). */
mxc_op* mxc_op_create(const mxc_resolution* r, size_t i, char* error, size_t error_size);
void mxc_op_free(mxc_op* op);
/* The plan's canonical text (ops/plan.h, Plan::id). */
const char* mxc_op_plan(const mxc_op* op);
/* The number of call signatures whose checked launches the op keeps (mxc_op_launch). */
size_t mxc_op_signatures(const mxc_op* op);
/* Loads the plan's code objects on device, once: later calls with the same device do nothing;
 * another device is an error (use one mxc_op per device). The device must outlive the op's
 * launches. */
int mxc_op_load(mxc_op* op, mxrt_device* device, char* error, size_t error_size);
/* Every check mxc_op_launch makes, without a device and without launching (scratch is given
 * placeholder addresses): for validating a call where no GPU is. */
int mxc_op_check(const mxc_op* op, const mxc_named_tensor* tensors, size_t n_tensors, const mxc_named_scalar* scalars,
                 size_t n_scalars, char* error, size_t error_size);
/* Checks, then enqueues the plan's launches on stream (a CUstream / hipStream_t; NULL: the
 * default stream). scratch may be NULL for a plan that needs none (an error otherwise).
 * The checked launches are kept per call signature: the names, dtypes, shapes, strides and
 * scalars, each address modulo the kernels' alignment, and which tensors share memory at which
 * offsets, all that the checks read of a call. A later call of a signature seen (a training
 * step's) writes its addresses into those launches instead of composing and checking again: the
 * checks would give the same result. An op keeps its 16 latest signatures. */
int mxc_op_launch(const mxc_op* op, void* stream, const mxc_named_tensor* tensors, size_t n_tensors,
                  const mxc_named_scalar* scalars, size_t n_scalars, mxc_scratch_fn scratch, void* scratch_user,
                  char* error, size_t error_size);

/* ---- Prepared launches: composed and checked once, enqueued many times ----
 *
 * For callers that replay one call (the benchmark harness times a plan over many repetitions):
 * mxc_op_prepare makes every check mxc_op_launch makes and keeps the raw launches, which
 * mxc_launches_enqueue then enqueues without composing or checking again. The launches hold raw
 * addresses: the call's tensors and the scratch the allocator gave must stay valid while they are
 * enqueued (the caller keeps them), and the op must stay loaded and outlive them. */
typedef struct mxc_launches mxc_launches;

/* NULL on error (the same errors as mxc_op_launch's checks, in the error buffer). The op need not
 * be loaded to prepare; it must be before enqueuing. */
mxc_launches* mxc_op_prepare(const mxc_op* op, const mxc_named_tensor* tensors, size_t n_tensors,
                             const mxc_named_scalar* scalars, size_t n_scalars, mxc_scratch_fn scratch,
                             void* scratch_user, char* error, size_t error_size);
void mxc_launches_free(mxc_launches* launches);
/* The number of launches (a reduction tree adds one per level). */
size_t mxc_launches_count(const mxc_launches* launches);
/* Launch i: the index of its plan launch (its role and kernel in the plan JSON) and its grid.
 * Returns 0, or -1 for an index out of range. */
int mxc_launches_info(const mxc_launches* launches, size_t i, size_t* plan_launch, uint32_t grid[3]);
/* Enqueues launches first .. first + count - 1 on stream, in order (an empty launch, grid 0, is
 * skipped). Returns an mxrt_status. */
int mxc_launches_enqueue(const mxc_launches* launches, void* stream, size_t first, size_t count, char* error,
                         size_t error_size);

/* ---- Plans of code objects at hand ----
 *
 * For callers that time every plan themselves (the benchmark harness), with code objects they
 * hold (a folder) rather than resolved: the plans those objects make for a key, and an mxc_op of
 * any one of them, composed by the same layer as resolved ops. */

/* The plans of a key (mxc_call_key's text; its target is not read) that a set of code objects
 * makes. configs_json: {"KERNEL": ["K=V,...", ...], ...}, each object's kernel and full config
 * (its launch metadata's "config": tunables, variants and size), in any spelling order; a
 * variant by its code, as the metadata reports it (FMT=1), or by name (FMT=E3M2). Every
 * family of the key's op whose launch roles all have objects gives the cross product of its roles'
 * configs (a role of the op's variants and size takes only the objects compiled for the key's)
 * and of its P choices, in the op table's order (the table's default plan first where its
 * objects are given), without the plans that cannot run the key's shape. Writes a JSON array of
 * plans (mxc_op_plan_json's form, "object" empty, each launch's config the one given with its
 * keys sorted), as mxc_call_key writes text: returns the size needed, 0 on error. */
size_t mxc_key_plans(const char* key, const char* configs_json, char* out, size_t out_size, char* error,
                     size_t error_size);
/* An op of a plan (JSON as mxc_key_plans writes it) for a key, with its code objects given per
 * plan launch: bytes, size and launch metadata JSON. Refused: a plan the op table does not
 * allow, one that cannot run the key's shape, a count of objects other than the plan's launches,
 * metadata of another schema, or of another kernel or config than its launch names (a launch
 * config may leave out tunables, as the database spells plans: the metadata's value of those is
 * taken for the kernel's default, which only the compiler knows). Free with
 * mxc_op_free; mxc_op_load, mxc_op_check, mxc_op_launch and mxc_op_prepare take it. NULL on
 * error. */
mxc_op* mxc_op_from_plan(const char* key, const char* plan_json, size_t n_objects, const void* const* objects,
                         const size_t* sizes, const char* const* metadata_json, char* error, size_t error_size);

/* ---- Keys ----
 * Both write a NUL-terminated text into out when out_size is large enough and return the size it
 * needs (call with out = NULL to ask); 0 on error, with the message in error. */
/* The distinct keys of a shape set (the JSON of ops/shape_set.h) on a target, one per line. */
size_t mxc_shape_set_keys(const char* json, const char* target, char* out, size_t out_size, char* error,
                          size_t error_size);
/* The key of an op call: its op, its variant choices ("layout=megatron"; "" for the defaults) and
 * the call's tensors and scalars (the shapes give T, H, S and the size). */
size_t mxc_call_key(const char* op, const char* variant, const char* target, const mxc_named_tensor* tensors,
                    size_t n_tensors, const mxc_named_scalar* scalars, size_t n_scalars, char* out, size_t out_size,
                    char* error, size_t error_size);

#ifdef __cplusplus
}
#endif

#endif /* MXFP6_CLIENT_H */
