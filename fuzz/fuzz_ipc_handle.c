/* libFuzzer harness for memory IPC handles (src/dist/ipc_handle.c).
 *
 * Mode 0 feeds any bytes, of any length, to tc_ipc_mem_handle_parse: a
 * refused input sets a message and leaves *out alone; an accepted one has
 * fields in range and encodes back to the same bytes with the same check
 * value. Mode 1 makes a handle from fields the input chooses, then changes
 * bytes of it where the input says: decoding must refuse every changed
 * handle and accept the unchanged one. */
#include <stdlib.h>
#include <string.h>

#include "dist/ipc_handle.h"
#include "fuzz_input.h"

static void fail(const char *why)
{
    fprintf(stderr, "fuzz_ipc_handle: %s\n", why);
    abort();
}

static void any_bytes(const uint8_t *data, size_t n)
{
    tc_ipc_mem_handle h, same;
    memset(&h, 0xa5, sizeof h);
    same = h;
    if (tc_ipc_mem_handle_parse(data, n, &h) != TC_OK) {
        if (memcmp(&h, &same, sizeof h) != 0 || !tc_last_error()[0])
            fail("a refused handle changed *out or set no message");
        return;
    }
    tc__ipc_info info;
    uint64_t check = 0;
    if (tc__ipc_decode(&h, &info, &check) != TC_OK)
        fail("parse accepted what decode refuses");
    if (info.ndim > TC_MAX_DIMS || info.producer_pid == 0 || info.offset < 0)
        fail("a field out of range was accepted");
    for (uint32_t i = 0; i < info.ndim; i++)
        if (info.sizes[i] < 0 || info.strides[i] < 0)
            fail("a negative size or stride was accepted");
    tc_ipc_mem_handle again;
    if (tc__ipc_encode(&info, &again) != check || memcmp(&again, &h, sizeof h) != 0)
        fail("an accepted handle does not encode back to itself");
}

static void changed_bytes(fz_input *in)
{
    tc__ipc_info info;
    memset(&info, 0, sizeof info);
    info.producer_pid = (uint32_t)fz_u64(in) | 1;
    info.device = fz_u8(in) % 8;
    info.dtype = fz_u8(in) % TC_NUM_DTYPES;
    info.ndim = fz_u8(in) % (TC_MAX_DIMS + 1);
    info.seq = fz_u64(in);
    info.nonce = fz_u64(in);
    info.segment_offset = fz_u64(in);
    info.storage_bytes = fz_u64(in);
    info.offset = (int64_t)(fz_u64(in) >> 1);
    for (uint32_t i = 0; i < info.ndim; i++) {
        info.sizes[i] = (int64_t)(fz_u64(in) >> 1);
        info.strides[i] = (int64_t)(fz_u64(in) >> 1);
    }
    for (int i = 0; i < TC__IPC_CUDA_HANDLE_BYTES; i++)
        info.cuda_handle[i] = fz_u8(in);
    tc_ipc_mem_handle h, orig;
    tc__ipc_encode(&info, &h);
    orig = h;
    int edits = fz_u8(in) % 4;
    for (int e = 0; e < edits; e++) {
        size_t at = (size_t)(fz_u64(in) % TC_IPC_MEM_HANDLE_SIZE);
        h.bytes[at] ^= fz_u8(in);
    }
    tc__ipc_info back;
    tc_status st = tc__ipc_decode(&h, &back, NULL);
    bool same = memcmp(&h, &orig, sizeof h) == 0;
    if (same && (st != TC_OK || memcmp(&back, &info, sizeof info) != 0))
        fail("a handle as made does not decode to its fields");
    if (!same && st == TC_OK)
        fail("a changed handle was accepted");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        fz_input in = {data + 1, size - 1};
        changed_bytes(&in);
    } else {
        any_bytes(data + 1, size - 1);
    }
    return 0;
}
