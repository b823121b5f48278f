/* libedt_capi: edt's runtime behind a C ABI, for the Python package's
 * ctypes layer (edt/_edt.py) and any language with a C FFI.
 *
 * Why C and ctypes, not a CPython extension: the library then loads into
 * whatever Python an image has (3.8 to 3.13, any build), with no Python
 * header at build time and no build per version. It is linked with its C++
 * runtime, fmt and spdlog inside and only glibc (2.35 or later) outside
 * (tests/images/portable_test.py checks), so a process that loaded an
 * older libstdc++ first (torch, TensorFlow) still loads it.
 *
 * Conventions: a function that can fail returns int, 0 on success and -1 on
 * failure; then edt_error_code() and edt_error_message() say why (this
 * thread's last failure). Objects are made by *_new (out parameter) and
 * released by *_free. Callbacks run on the thread that called the function
 * that takes them. */
#ifndef EDT_PYTHON_CAPI_H_
#define EDT_PYTHON_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EDT_API __attribute__((visibility("default")))

EDT_API const char* edt_error_code(void);     /* e.g. "INVALID_ARGUMENT" */
EDT_API const char* edt_error_message(void);  /* what, where, what to do */
/* A callback that failed says why before it returns -1. */
EDT_API void edt_set_callback_error(const char* message);
/* Strings and buffers the library allocated for the caller. */
EDT_API void edt_free(void* p);

/* Slurm's compact node list ("node-[0-2]") as names joined by '\n'. */
EDT_API int edt_expand_slurm_nodelist(const char* nodelist, char** names);

/* The job's rendezvous store, served until freed. */
typedef struct edt_store_server edt_store_server;
EDT_API int edt_store_server_new(const char* host, uint16_t port, edt_store_server** out);
EDT_API int edt_store_server_port(const edt_store_server* s);
EDT_API void edt_store_server_free(edt_store_server* s);

/* A communicator and the engine over it. */
typedef struct edt_runtime edt_runtime;
EDT_API int edt_runtime_new(edt_runtime** out);  /* from edtrun's environment */
EDT_API int edt_runtime_subgroup(edt_runtime* r, const int* members, int count, const char* scope,
                                 edt_runtime** out);
EDT_API void edt_runtime_free(edt_runtime* r);  /* stops its engine */

enum edt_runtime_field {
  EDT_RANK, EDT_SIZE, EDT_LOCAL_RANK, EDT_LOCAL_SIZE, EDT_CROSS_RANK, EDT_CROSS_SIZE,
  EDT_ENDED, EDT_FUSED_BATCHES, EDT_FUSION_THRESHOLD
};
EDT_API int64_t edt_runtime_field(const edt_runtime* r, int field);
EDT_API double edt_runtime_cycle_time_ms(const edt_runtime* r);
EDT_API const char* edt_runtime_transport(const edt_runtime* r);

/* A collective on `data` (engine::Meta's fields); its handle, or -1. */
EDT_API int64_t edt_runtime_submit(edt_runtime* r, const char* name, int type, int dtype, int op, int root,
                                   double prescale, double postscale, const int64_t* shape, int ndim,
                                   const int64_t* splits, int nsplits, void* data);
EDT_API int64_t edt_runtime_submit_join(edt_runtime* r);
EDT_API int edt_runtime_poll(edt_runtime* r, int64_t handle, int* done);
EDT_API int edt_runtime_shutdown(edt_runtime* r);
/* A new std::shared_ptr<EnginePort>* for edt's TensorFlow ops (engine_port.h). */
EDT_API void* edt_runtime_engine_port(edt_runtime* r);

/* What a finished collective produced: bytes (allgather, alltoall,
 * reducescatter), their shape, the received splits, the last joined rank. */
typedef struct edt_output edt_output;
EDT_API int edt_runtime_wait(edt_runtime* r, int64_t handle, edt_output** out);
EDT_API int edt_output_has_data(const edt_output* o);
EDT_API uint8_t* edt_output_data(edt_output* o, size_t* size);
EDT_API const int64_t* edt_output_shape(const edt_output* o, int* ndim);
EDT_API const int64_t* edt_output_recv_splits(const edt_output* o, int* count);
EDT_API int edt_output_last_joined_rank(const edt_output* o);
EDT_API void edt_output_free(edt_output* o);

/* edt::elastic::ElasticSampler. */
typedef struct edt_sampler edt_sampler;
EDT_API int edt_sampler_new(uint64_t num_samples, uint64_t seed, int shuffle, edt_sampler** out);
EDT_API void edt_sampler_free(edt_sampler* s);
EDT_API void edt_sampler_set_epoch(edt_sampler* s, uint64_t epoch);
EDT_API int edt_sampler_reset(edt_sampler* s, int rank, int size);
EDT_API void edt_sampler_record_batch(edt_sampler* s, uint64_t batch_size);
EDT_API uint64_t edt_sampler_steps_left(const edt_sampler* s, uint64_t batch_size);
/* Indices to free: batch(batch_size), and the whole shard. */
EDT_API int edt_sampler_batch(const edt_sampler* s, uint64_t batch_size, uint64_t** indices, size_t* count);
EDT_API int edt_sampler_shard(const edt_sampler* s, uint64_t** indices, size_t* count);
enum edt_sampler_field { EDT_SAMPLER_EPOCH, EDT_SAMPLER_EPOCH_DONE, EDT_SAMPLER_PROCESSED, EDT_SAMPLER_REMAINING };
EDT_API uint64_t edt_sampler_field(const edt_sampler* s, int field);
EDT_API int edt_sampler_serialize(const edt_sampler* s, char** bytes, size_t* size);
EDT_API int edt_sampler_deserialize(edt_sampler* s, const char* bytes, size_t size);

/* A state object of the caller's (edt::elastic::StateObject). Bytes a
 * callback hands out stay the caller's and valid until its next call;
 * views (committed_views) until the next commit or committed_views. A
 * callback returns 0, or -1 after edt_set_callback_error. */
typedef struct edt_state_callbacks {
  void* context;
  int (*serialize)(void* context, const char** bytes, size_t* size);
  /* Bytes read in place: `owner` keeps them, until edt_release_owner. */
  int (*deserialize)(void* context, const char* bytes, size_t size, void* owner);
  int (*on_reset)(void* context, int rank, int size);
  int (*commit)(void* context, int* kept); /* kept: it keeps a committed copy */
  int (*restore)(void* context);
  int (*committed_bytes)(void* context, const char** bytes, size_t* size);
  /* count views, their addresses and sizes in arrays the caller keeps; 0
   * views: use committed_bytes. */
  int (*committed_views)(void* context, size_t* count, const uint64_t** addresses, const uint64_t** sizes);
} edt_state_callbacks;
EDT_API void edt_release_owner(void* owner);

/* What a generation's function returns. */
enum edt_generation_result { EDT_GENERATION_DONE, EDT_HOSTS_UPDATED, EDT_COLLECTIVE_FAILED, EDT_RAISED };
typedef int (*edt_generation_fn)(void* context, edt_runtime* runtime); /* takes the runtime over */

/* edt::elastic::State and run(), from edtrun's environment. */
typedef struct edt_elastic_job edt_elastic_job;
EDT_API int edt_elastic_job_new(edt_elastic_job** out);
EDT_API void edt_elastic_job_free(edt_elastic_job* j);
EDT_API int edt_elastic_job_add(edt_elastic_job* j, const char* name, const edt_state_callbacks* callbacks);
/* Calls fn once per membership generation until it returns DONE (then
 * *stayed = 1) or this worker leaves the job (*stayed = 0); RAISED ends
 * run with -1 and the code "RAISED". */
EDT_API int edt_elastic_job_run(edt_elastic_job* j, edt_generation_fn fn, void* context, int* stayed);
/* The placement now or of the first generation: *present = 0 when the job
 * ended or this worker left it; hosts joined by '\n', to free. */
EDT_API int edt_elastic_job_placement(edt_elastic_job* j, int* present, int64_t* generation, int* rank,
                                      char** hosts);
EDT_API void edt_elastic_job_save(edt_elastic_job* j);
EDT_API int edt_elastic_job_restore(edt_elastic_job* j);
enum edt_job_field { EDT_JOB_MEMBERSHIP_CHANGED, EDT_JOB_GENERATION, EDT_JOB_COMMIT_ID, EDT_JOB_RESETS };
EDT_API int64_t edt_elastic_job_field(const edt_elastic_job* j, int field);

#ifdef __cplusplus
}
#endif

#endif  // EDT_PYTHON_CAPI_H_
