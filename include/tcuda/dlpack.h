/* tcuda: sharing tensors with other libraries through DLPack, zero-copy.
 *
 * DLPack (github.com/dmlc/dlpack) is the C ABI that PyTorch, NumPy, CuPy,
 * JAX and others use to hand each other tensors without copying. The structs
 * below are tcuda's own declarations of that ABI, version 1.1: same fields,
 * same types, same order, so a pointer to one is a pointer to the other
 * (tests/test_dlpack.c checks every offset). They carry a tc_ prefix instead
 * of the reference names so that this header and the reference dlpack.h can
 * be included together in any order; a program that uses the reference
 * header casts, e.g. (DLManagedTensorVersioned *)m.
 *
 * Ownership follows the specification: a managed tensor is owned by whoever
 * holds it until they call its deleter, exactly once. tcuda's exports hold a
 * reference to the tensor's storage that the deleter drops; tcuda's imports
 * call the producer's deleter once, when the last tcuda tensor over the
 * memory is released. */
#ifndef TCUDA_DLPACK_H
#define TCUDA_DLPACK_H

#include <stdint.h>

#include "stream.h"
#include "tensor.h"

TCUDA_EXTERN_C_BEGIN

/* The DLPack version these declarations follow (DLPACK_MAJOR_VERSION,
 * DLPACK_MINOR_VERSION); tcuda's exports carry it. */
#define TC_DLPACK_MAJOR_VERSION 1
#define TC_DLPACK_MINOR_VERSION 1

/* DLDeviceType: the codes tcuda reads or writes (the others exist in the
 * specification but are refused on import). */
typedef enum tc_DLDeviceType {
    TC_DL_CPU = 1,      /* kDLCPU */
    TC_DL_CUDA = 2,     /* kDLCUDA */
    TC_DL_CUDA_HOST = 3 /* kDLCUDAHost: pinned host memory (cudaMallocHost) */
} tc_DLDeviceType;
/* DLDataTypeCode: the codes tcuda reads or writes. */
typedef enum tc_DLDataTypeCode {
    TC_DL_INT = 0,    /* kDLInt */
    TC_DL_UINT = 1,   /* kDLUInt */
    TC_DL_FLOAT = 2,  /* kDLFloat */
    TC_DL_BFLOAT = 4, /* kDLBfloat */
    TC_DL_BOOL = 6    /* kDLBool */
} tc_DLDataTypeCode;
/* DLPACK_FLAG_BITMASK_READ_ONLY and DLPACK_FLAG_BITMASK_IS_COPIED. */
#define TC_DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define TC_DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

/* DLPackVersion */
typedef struct tc_DLPackVersion {
    uint32_t major;
    uint32_t minor;
} tc_DLPackVersion;

/* DLDevice. device_type holds a DLDeviceType, an enum the reference header
 * gives 32 bits (int32_t in C++, int in C). */
typedef struct tc_DLDevice {
    int32_t device_type;
    int32_t device_id;
} tc_DLDevice;

/* DLDataType */
typedef struct tc_DLDataType {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} tc_DLDataType;

/* DLTensor. strides count elements, not bytes; byte_offset is added to data
 * to reach the first element. */
typedef struct tc_DLTensor {
    void *data;
    tc_DLDevice device;
    int32_t ndim;
    tc_DLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} tc_DLTensor;

/* DLManagedTensor (the unversioned, legacy struct). */
typedef struct tc_DLManagedTensor {
    tc_DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct tc_DLManagedTensor *self);
} tc_DLManagedTensor;

/* DLManagedTensorVersioned (the current struct). */
typedef struct tc_DLManagedTensorVersioned {
    tc_DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct tc_DLManagedTensorVersioned *self);
    uint64_t flags;
    tc_DLTensor dl_tensor;
} tc_DLManagedTensorVersioned;

/* ---- export --------------------------------------------------------------- */

/* Shares t's memory as a new managed tensor (the caller owns it and calls its
 * deleter once, from any thread): version 1.1, flags 0, data at t's first
 * element with byte_offset 0, shape and strides (in elements, never NULL)
 * held by the managed tensor. A CPU tensor (pinned too) is kDLCPU device 0, a
 * GPU tensor kDLCUDA. The deleter drops the reference to t's storage that the
 * managed tensor holds; t itself may be released before or after.
 * Streams, for a GPU tensor (DLPack's __dlpack__(stream=)): `stream` is the
 * stream the consumer will use the memory on (wrap a foreign cudaStream_t
 * with tc_stream_create_external, the legacy stream is tc_default_stream). It
 * is made to wait for the work queued so far on the current stream of t's
 * device, and t's memory is not reused before the consumer's work queued
 * there until the deleter runs has finished (tc_tensor_record_stream), so
 * keep that CUDA stream alive until then. NULL: the consumer works on
 * tcuda's current stream of that device, and nothing needs to wait.
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL t or out, a stream with a CPU
 * tensor), TC_ERROR_INVALID_HANDLE (a released t or a destroyed stream),
 * TC_ERROR_DEVICE_MISMATCH (a stream of another device), the stream's. */
TCUDA_API tc_status tc_tensor_to_dlpack(const tc_tensor *t, tc_stream *stream,
                                        tc_DLManagedTensorVersioned **out);
/* The same as an unversioned DLManagedTensor, for consumers of DLPack < 1.0. */
TCUDA_API tc_status tc_tensor_to_dlpack_unversioned(const tc_tensor *t, tc_stream *stream,
                                                    tc_DLManagedTensor **out);

/* ---- import --------------------------------------------------------------- */

/* A tensor over the memory of managed tensor `m`, zero-copy, that takes over
 * m: tcuda calls m's deleter (if not NULL) exactly once, when the last tcuda
 * tensor using the memory is released. For GPU memory, tcuda first waits for
 * the work queued on the releasing thread's current stream of that device
 * (skipped while that stream captures a graph), so the producer may reuse the
 * memory at once; work the caller queued on other streams is the caller's to
 * wait for. The tensor uses the memory as tcuda's current stream of its
 * device orders it: a producer's pending writes are the caller's to wait for
 * (DLPack's stream handshake is done by the producer's export call).
 * Accepted: kDLCPU and kDLCUDAHost (a CPU tensor; pinned memory is treated as
 * pageable) and kDLCUDA device n (a GPU tensor on device n); dtypes int8/16/
 * 32/64, uint8, float16/32/64, bfloat16 and bool (8 bits), one lane; at most
 * TC_MAX_DIMS dimensions; strides >= 0 (NULL strides: row-major contiguous);
 * a byte_offset (added to data) that keeps every byte of the tensor an
 * address, with data + byte_offset a multiple of the element size when the
 * tensor has elements (a float32 at byte_offset 1 is refused: tcuda's
 * kernels read whole aligned elements). The read-only flag is accepted and not
 * enforced: tcuda tensors have no read-only mode, so writing through the
 * tensor is the caller's mistake to avoid, as the producer asked; the
 * is-copied flag changes nothing.
 * On failure, nothing of m was used: the caller still owns m, and tcuda has
 * not called its deleter (the specification asks a consumer that refuses a
 * major version to call it; that is the caller's to do).
 * Errors: TC_ERROR_INVALID_ARGUMENT (NULL m or out, NULL data with elements,
 * NULL shape with dimensions, negative sizes, a view whose bytes overflow, a
 * byte_offset past the end of memory or above PTRDIFF_MAX, a misaligned first
 * element),
 * TC_ERROR_NOT_SUPPORTED (a major version other than 1, a device type or
 * more dimensions than tcuda has, negative strides), TC_ERROR_DTYPE (a dtype
 * or lane count tcuda has not), TC_ERROR_NO_DEVICE / TC_ERROR_INVALID_DEVICE
 * (a GPU tcuda cannot use). */
TCUDA_API tc_status tc_tensor_from_dlpack(tc_DLManagedTensorVersioned *m, tc_tensor **out);
/* The same for an unversioned DLManagedTensor (no version, no flags). */
TCUDA_API tc_status tc_tensor_from_dlpack_unversioned(tc_DLManagedTensor *m, tc_tensor **out);

TCUDA_EXTERN_C_END

#endif
