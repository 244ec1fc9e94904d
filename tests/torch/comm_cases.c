/* tcuda's side of the comm oracle (tests/torch/comm_check.sh): the cases of
 * tests/torch/comm_torch.py, in its order and words, through tc_comm_*.
 * See comm_torch.py for the line format; each case here is its twin there
 * (same inputs, same devices, same options), with PyTorch's None spelled
 * TC_CURRENT_DEVICE (reduce_add) or TC_COMM_CURRENT_DEVICE (gather).
 *
 * Built with the tests when CUDA is on (build/tests/comm_cases); prints the
 * lines and exits 0, or 77 without a GPU. Uses G = min(GPUs, 4) GPUs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_find.h"
#include "tcuda/comm.h"
#include "tcuda/tcuda.h"

#define MAXT 512
#define BUF TC_COMM_DEFAULT_BUFFER_SIZE
#define F32 TC_FLOAT32
#define F16 TC_FLOAT16
#define I64 TC_INT64
#define CPU_DEV (-1) /* a tensor's device in T() and Z(): the CPU */

static int G, ALL[4], REV[4], ZALL[5]; /* ZALL: 0 followed by ALL */

/* What a case made (released after it), its results (new references) and
 * the inputs a result may share memory with. */
static tc_tensor *made[MAXT], *res[MAXT];
static const tc_tensor *srcs[MAXT];
static int n_made, n_res, n_srcs;

static tc_tensor *kept(tc_tensor *t)
{
    if (t && n_made < MAXT)
        made[n_made++] = t;
    return t;
}

static const tc_tensor *source(const tc_tensor *t)
{
    srcs[n_srcs++] = t;
    return t;
}

static tc_device device_of(int dev)
{
    return dev == CPU_DEV ? (tc_device){TC_CPU, -1} : (tc_device){TC_CUDA, dev};
}

/* comm_torch.py's T(): value(i) = ((7 i + 13 seed) mod 23) - 11 at row-major
 * position i of the (swapped, for nc) shape, then transposed for nc. NULL
 * (and the case fails) if tcuda cannot make it. */
static tc_tensor *T(int ndim, const int64_t *shape, tc_dtype dt, int dev, int seed, bool nc)
{
    int64_t base[TC_MAX_DIMS] = {0}, n = 1; /* 0-d: not read, but GCC -O3 warns */
    for (int i = 0; i < ndim; i++)
        base[i] = shape[i];
    if (nc) {
        base[0] = shape[1];
        base[1] = shape[0];
    }
    for (int i = 0; i < ndim; i++)
        n *= base[i];
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * 7 + 13 * seed) % 23 - 11);
    tc_tensor *h = NULL, *t = NULL, *tt = NULL;
    if (tc_tensor_from_data(v, ndim, base, F32, device_of(CPU_DEV), &h) == TC_OK &&
        tc_tensor_to(h, device_of(dev), dt, false, &t) == TC_OK && nc)
        tc_tensor_transpose(t, 0, 1, &tt);
    free(v);
    tc_tensor_release(h);
    if (nc) {
        tc_tensor_release(t);
        t = tt;
    }
    return kept(t);
}

static tc_tensor *Z(int ndim, const int64_t *shape, tc_dtype dt, int dev)
{
    tc_tensor *t = NULL;
    tc_tensor_zeros(ndim, shape, dt, device_of(dev), &t);
    return kept(t);
}

/* A transposed view of zeros of the swapped 2-d shape. */
static tc_tensor *Znc(const int64_t *shape, tc_dtype dt, int dev)
{
    int64_t sw[2] = {shape[1], shape[0]};
    tc_tensor *t = Z(2, sw, dt, dev), *tt = NULL;
    tc_tensor_transpose(t, 0, 1, &tt);
    return kept(tt);
}

#define SH(...)                                                                                    \
    (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]) { __VA_ARGS__ }
#define DEVS(...) (int[]){__VA_ARGS__}, (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int))

/* Results that are the caller's own tensors (the out= forms). */
static void results_are(tc_tensor *const *t, int n)
{
    for (int i = 0; i < n; i++) {
        tc_tensor_retain(t[i]);
        res[n_res++] = t[i];
    }
}

/* ---- broadcast ---------------------------------------------------------------------------- */

static tc_status bc(tc_tensor *t, const int *devs, int n)
{
    source(t);
    tc_status st = tc_comm_broadcast(t, devs, n, res);
    if (st == TC_OK)
        n_res = n;
    return st;
}

static tc_status broadcast_gpu_all(void) { return bc(T(SH(4, 6), F32, 0, 1, false), ALL, G); }
static tc_status broadcast_gpu_rev(void) { return bc(T(SH(4, 6), F32, 0, 1, false), REV, G); }
static tc_status broadcast_gpu_others(void)
{
    return bc(T(SH(4, 6), F32, 0, 1, false), ALL + 1, G - 1);
}
static tc_status broadcast_gpu_twice(void) { return bc(T(SH(4, 6), F32, 0, 1, false), DEVS(0, 0)); }
static tc_status broadcast_gpu_other_twice(void)
{
    return bc(T(SH(4, 6), F32, 0, 1, false), DEVS(1, 1));
}
static tc_status broadcast_cpu_all(void) { return bc(T(SH(4, 6), F32, CPU_DEV, 1, false), ALL, G); }
static tc_status broadcast_cpu_twice(void)
{
    return bc(T(SH(4, 6), F32, CPU_DEV, 1, false), DEVS(0, 0));
}
static tc_status broadcast_f16(void) { return bc(T(SH(4, 6), F16, 0, 1, false), ALL, G); }
static tc_status broadcast_i64(void) { return bc(T(SH(4, 6), I64, 0, 1, false), ALL, G); }
static tc_status broadcast_noncontig(void) { return bc(T(SH(5, 3), F32, 0, 1, true), ALL, G); }
static tc_status broadcast_noncontig_cpu(void)
{
    return bc(T(SH(5, 3), F32, CPU_DEV, 1, true), ALL, G);
}
static tc_status broadcast_from_1(void) { return bc(T(SH(4, 6), F32, 1, 1, false), ALL, G); }
static tc_status broadcast_zero_size(void) { return bc(T(SH(0, 3), F32, 0, 1, false), ALL, G); }
static tc_status broadcast_empty_list(void) { return bc(T(SH(4, 6), F32, 0, 1, false), NULL, 0); }
static tc_status broadcast_neg(void) { return bc(T(SH(4, 6), F32, 0, 1, false), DEVS(0, -1)); }
static tc_status broadcast_neg_cpu(void)
{
    return bc(T(SH(4, 6), F32, CPU_DEV, 1, false), DEVS(-1));
}
static tc_status broadcast_missing(void) { return bc(T(SH(4, 6), F32, 0, 1, false), DEVS(0, 99)); }

/* ---- broadcast(out=) ---------------------------------------------------------------------- */

static tc_status bco(tc_tensor *t, tc_tensor **outs, int n)
{
    source(t);
    tc_status st = tc_comm_broadcast_out(t, outs, n);
    if (st == TC_OK)
        results_are(outs, n);
    return st;
}

static tc_status bco_on(tc_tensor *t, tc_dtype dt, const int *devs, int n)
{
    tc_tensor *outs[8] = {0};
    for (int i = 0; i < n; i++)
        outs[i] = Z(SH(3, 4), dt, devs[i]);
    return bco(t, outs, n);
}

static tc_status broadcast_out_gpu(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, false), F32, ALL, G);
}
static tc_status broadcast_out_cpu(void)
{
    return bco_on(T(SH(3, 4), F32, CPU_DEV, 1, false), F32, ALL, G);
}
static tc_status broadcast_out_twice(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, false), F32, DEVS(1, 1));
}
static tc_status broadcast_out_src_dev_twice(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, false), F32, DEVS(0, 0));
}
static tc_status broadcast_out_f16(void)
{
    return bco_on(T(SH(3, 4), F16, 0, 1, false), F16, ALL, G);
}
static tc_status broadcast_out_noncontig_src(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, true), F32, ALL, G);
}
static tc_status broadcast_out_noncontig_out(void)
{
    tc_tensor *o = Znc((int64_t[]){3, 4}, F32, 1);
    return bco(T(SH(3, 4), F32, 0, 1, false), &o, 1);
}
static tc_status broadcast_out_shape(void)
{
    tc_tensor *o = Z(SH(4, 3), F32, 0);
    return bco(T(SH(3, 4), F32, 0, 1, false), &o, 1);
}
static tc_status broadcast_out_cpu_out(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, false), F32, DEVS(CPU_DEV));
}
static tc_status broadcast_out_dtype(void)
{
    return bco_on(T(SH(3, 4), F32, 0, 1, false), F16, DEVS(1));
}
static tc_status broadcast_out_empty(void) { return bco(T(SH(3, 4), F32, 0, 1, false), NULL, 0); }

/* ---- broadcast_coalesced ------------------------------------------------------------------ */

/* comm_torch.py's S (all five) and S2 (the first four). */
static int S(int dev, tc_tensor **ts)
{
    ts[0] = T(SH(3, 4), F32, dev, 1, false);
    ts[1] = T(SH(5), F32, dev, 2, false);
    ts[2] = T(SH(2, 3), I64, dev, 3, false);
    ts[3] = T(SH(7), F16, dev, 4, false);
    ts[4] = T(SH(2, 2), F32, dev, 5, false);
    return 5;
}

static tc_status bcoal(tc_tensor **ts, int nt, const int *devs, int nd, size_t buffer_size)
{
    for (int i = 0; i < nt; i++)
        source(ts[i]);
    tc_status st = tc_comm_broadcast_coalesced((const tc_tensor *const *)ts, nt, devs, nd,
                                               buffer_size, res);
    if (st == TC_OK)
        n_res = nt * nd;
    return st;
}

static tc_status bcoal_gpu(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(0, ts), ALL, G, BUF);
}
static tc_status bcoal_small_buffer(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(0, ts), ALL, G, 16);
}
static tc_status bcoal_buffer0(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(0, ts), ALL, G, 0);
}
static tc_status bcoal_twice(void)
{
    tc_tensor *ts[5];
    S(0, ts);
    return bcoal(ts, 4, ZALL, G + 1, BUF);
}
static tc_status bcoal_cpu(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(CPU_DEV, ts), ALL, G, BUF);
}
static tc_status bcoal_not_first(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(0, ts), DEVS(1, 0), BUF);
}
static tc_status bcoal_neg(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(0, ts), DEVS(0, -1), BUF);
}
static tc_status bcoal_noncontig(void)
{
    tc_tensor *ts[2] = {T(SH(3, 4), F32, 0, 1, true), T(SH(5), F32, 0, 2, false)};
    return bcoal(ts, 2, ALL, G, BUF);
}
static tc_status bcoal_from_1(void)
{
    tc_tensor *ts[5];
    return bcoal(ts, S(1, ts), DEVS(1, 0), BUF);
}

/* ---- reduce_add --------------------------------------------------------------------------- */

static tc_status ra(tc_tensor **ins, int n, int destination, int current)
{
    tc_set_device(current);
    for (int i = 0; i < n; i++)
        source(ins[i]);
    tc_status st = tc_comm_reduce_add((const tc_tensor *const *)ins, n, destination, res);
    if (st == TC_OK)
        n_res = 1;
    return st;
}

/* comm_torch.py's per_dev: one [4, 5] tensor per device, seeds 10, 11, ... */
static int per_dev(tc_dtype dt, const int *devs, int n, bool nc, tc_tensor **ins)
{
    for (int i = 0; i < n; i++)
        ins[i] = T(SH(4, 5), dt, devs[i], 10 + i, nc);
    return n;
}

static tc_status reduce_add_all(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, false, ins), 0, 0);
}
static tc_status reduce_add_dest_last(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, false, ins), G - 1, 0);
}
static tc_status reduce_add_current(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, false, ins), TC_CURRENT_DEVICE, 1);
}
static tc_status reduce_add_one(void)
{
    tc_tensor *ins[1] = {T(SH(4, 5), F32, 0, 1, false)};
    return ra(ins, 1, 0, 0);
}
static tc_status reduce_add_twice(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ZALL, G + 1, false, ins), 0, 0);
}
static tc_status reduce_add_f16(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F16, ALL, G, false, ins), 0, 0);
}
static tc_status reduce_add_i64(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(I64, ALL, G, false, ins), 0, 0);
}
static tc_status reduce_add_noncontig(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, true, ins), 0, 0);
}
static tc_status reduce_add_shape(void)
{
    tc_tensor *ins[2] = {T(SH(4, 5), F32, 0, 1, false), T(SH(5, 4), F32, 1, 1, false)};
    return ra(ins, 2, 0, 0);
}
static tc_status reduce_add_dtype(void)
{
    tc_tensor *ins[2] = {T(SH(4, 5), F32, 0, 1, false), T(SH(4, 5), F16, 1, 1, false)};
    return ra(ins, 2, 0, 0);
}
static tc_status reduce_add_cpu(void)
{
    tc_tensor *ins[1] = {T(SH(4, 5), F32, CPU_DEV, 1, false)};
    return ra(ins, 1, 0, 0);
}
static tc_status reduce_add_neg(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, false, ins), -3, 0);
}
static tc_status reduce_add_missing(void)
{
    tc_tensor *ins[8];
    return ra(ins, per_dev(F32, ALL, G, false, ins), 99, 0);
}
static tc_status reduce_add_dest_not_input(void)
{
    tc_tensor *ins[2];
    return ra(ins, per_dev(F32, DEVS(0, 1), false, ins), 2, 0);
}

/* ---- reduce_add_coalesced ----------------------------------------------------------------- */

/* comm_torch.py's R(dev, k), as row r of rows[r * 4 ..]. */
static void R(int dev, int k, tc_tensor **row)
{
    row[0] = T(SH(3, 4), F32, dev, k, false);
    row[1] = T(SH(5), F32, dev, k + 1, false);
    row[2] = T(SH(2, 3), I64, dev, k + 2, false);
    row[3] = T(SH(4), F16, dev, k + 3, false);
}

static tc_status rcoal(tc_tensor **rows, int nrows, int destination, size_t buffer_size,
                       int current)
{
    tc_set_device(current);
    for (int i = 0; i < 4 * nrows; i++)
        source(rows[i]);
    tc_status st = tc_comm_reduce_add_coalesced((const tc_tensor *const *)rows, nrows, 4,
                                                destination, buffer_size, res);
    if (st == TC_OK)
        n_res = 4;
    return st;
}

static int rows_all(tc_tensor **rows)
{
    for (int d = 0; d < G; d++)
        R(ALL[d], 10 * d, rows + 4 * d);
    return G;
}

static tc_status rcoal_all(void)
{
    tc_tensor *rows[16];
    return rcoal(rows, rows_all(rows), 0, BUF, 0);
}
static tc_status rcoal_dest_last(void)
{
    tc_tensor *rows[16];
    return rcoal(rows, rows_all(rows), G - 1, BUF, 0);
}
static tc_status rcoal_small_buffer(void)
{
    tc_tensor *rows[16];
    return rcoal(rows, rows_all(rows), 0, 16, 0);
}
static tc_status rcoal_one_row(void)
{
    tc_tensor *rows[4];
    R(0, 1, rows);
    return rcoal(rows, 1, 0, BUF, 0);
}
static tc_status rcoal_current(void)
{
    tc_tensor *rows[16];
    return rcoal(rows, rows_all(rows), TC_CURRENT_DEVICE, BUF, 1);
}
static tc_status rcoal_twice(void)
{
    tc_tensor *rows[8];
    R(0, 1, rows);
    R(0, 5, rows + 4);
    return rcoal(rows, 2, 0, BUF, 0);
}
static tc_status rcoal_neg(void)
{
    tc_tensor *rows[16];
    return rcoal(rows, rows_all(rows), -3, BUF, 0);
}
static tc_status rcoal_cpu(void)
{
    tc_tensor *rows[4];
    R(CPU_DEV, 1, rows);
    return rcoal(rows, 1, 0, BUF, 0);
}
static tc_status rcoal_dest_not_input(void)
{
    tc_tensor *rows[8];
    R(0, 1, rows);
    R(1, 5, rows + 4);
    return rcoal(rows, 2, 2, BUF, 0);
}

/* ---- scatter ------------------------------------------------------------------------------ */

static tc_stream *streams_made[8];
static int n_streams;

static tc_stream *stream(int dev)
{
    tc_stream *s = NULL;
    tc_stream_create(dev, 0, &s);
    streams_made[n_streams++] = s;
    return s;
}

static tc_status sc(tc_tensor *t, const int *devs, int n, const int64_t *chunks, int dim,
                    tc_stream *const *streams)
{
    source(t);
    return tc_comm_scatter(t, devs, n, chunks, dim, streams, res, &n_res);
}

static tc_status scatter_gpu(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_gpu_dim1(void)
{
    return sc(T(SH(3, 8), F32, 0, 1, false), ALL, G, NULL, 1, NULL);
}
static tc_status scatter_gpu_dimneg(void)
{
    return sc(T(SH(3, 8), F32, 0, 1, false), ALL, G, NULL, -1, NULL);
}
static tc_status scatter_cpu(void)
{
    return sc(T(SH(8, 3), F32, CPU_DEV, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_chunks(void)
{
    int64_t sizes[4], left = 10;
    for (int i = 0; i < G - 1; i++) {
        sizes[i] = i + 1;
        left -= i + 1;
    }
    sizes[G - 1] = left;
    return sc(T(SH(10, 3), F32, 0, 1, false), ALL, G, sizes, 0, NULL);
}
/* devices ALL + [0], sizes [0] * G + [8] */
static tc_status zero_chunk(int src_dev)
{
    int devs[5];
    int64_t sizes[5] = {0};
    memcpy(devs, ALL, sizeof(int) * (size_t)G);
    devs[G] = 0;
    sizes[G] = 8;
    return sc(T(SH(8, 3), F32, src_dev, 1, false), devs, G + 1, sizes, 0, NULL);
}
static tc_status scatter_zero_chunk(void) { return zero_chunk(0); }
static tc_status scatter_zero_chunk_cpu(void) { return zero_chunk(CPU_DEV); }
static tc_status scatter_twice(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(1, 1), NULL, 0, NULL);
}
static tc_status scatter_src_twice(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 0), NULL, 0, NULL);
}
static tc_status scatter_small(void)
{
    return sc(T(SH(3, 2), F32, 0, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_empty_dim(void)
{
    return sc(T(SH(0, 3), F32, 0, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_f16(void)
{
    return sc(T(SH(8, 3), F16, 0, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_i64(void)
{
    return sc(T(SH(8, 3), I64, CPU_DEV, 1, false), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_noncontig(void)
{
    return sc(T(SH(6, 4), F32, 0, 1, true), ALL, G, NULL, 0, NULL);
}
static tc_status scatter_noncontig_cpu(void)
{
    return sc(T(SH(6, 4), F32, CPU_DEV, 1, true), ALL, G, NULL, 1, NULL);
}
static tc_status scatter_neg(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, -1), NULL, 0, NULL);
}
static tc_status scatter_neg_cpu(void)
{
    return sc(T(SH(8, 3), F32, CPU_DEV, 1, false), DEVS(0, -1), NULL, 0, NULL);
}
static tc_status scatter_sum(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 0), (int64_t[]){3, 4}, 0, NULL);
}
static tc_status scatter_neg_size(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 0), (int64_t[]){-1, 9}, 0, NULL);
}
static tc_status scatter_scalar(void)
{
    return sc(T(0, NULL, F32, 0, 1, false), DEVS(0), NULL, 0, NULL);
}
static tc_status scatter_dim_oob(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), ALL, G, NULL, 2, NULL);
}
static tc_status scatter_missing(void)
{
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 99), NULL, 0, NULL);
}
static tc_status scatter_unused_missing(void)
{
    return sc(T(SH(1, 3), F32, 0, 1, false), DEVS(0, 99), NULL, 0, NULL);
}
static tc_status scatter_streams(void)
{
    tc_stream *ss[4];
    for (int i = 0; i < G; i++)
        ss[i] = stream(ALL[i]);
    return sc(T(SH(8, 3), F32, 0, 1, false), ALL, G, NULL, 0, ss);
}
static tc_status scatter_stream_mismatch(void)
{
    tc_stream *ss[2] = {NULL, stream(0)};
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 1), NULL, 0, ss);
}
static tc_status scatter_stream_local(void)
{
    tc_stream *ss[2] = {stream(1), NULL};
    return sc(T(SH(8, 3), F32, 0, 1, false), DEVS(0, 1), NULL, 0, ss);
}

/* ---- scatter(out=) ------------------------------------------------------------------------ */

/* comm_torch.py's L(): lengths that split 8 over G outputs. */
static const int64_t *lengths(void)
{
    static const int64_t l[4][4] = {{8}, {3, 5}, {1, 3, 4}, {1, 2, 2, 3}};
    return l[G - 1];
}

static tc_status sco(tc_tensor *t, tc_tensor **outs, int n, int dim, tc_stream *const *streams)
{
    source(t);
    tc_status st = tc_comm_scatter_out(t, outs, n, dim, streams);
    if (st == TC_OK)
        results_are(outs, n);
    return st;
}

/* Outputs of lens[i] rows (cols columns) on devs[i]; nc: transposed views. */
static void outs_rows(const int64_t *lens, const int *devs, int n, tc_dtype dt, int64_t cols,
                      bool nc, tc_tensor **outs)
{
    for (int i = 0; i < n; i++) {
        int64_t sz[2] = {lens[i], cols};
        outs[i] = nc ? Znc(sz, dt, devs[i]) : Z(2, sz, dt, devs[i]);
    }
}

static tc_status sco_rows(tc_tensor *t, const int64_t *lens, const int *devs, int n, tc_dtype dt,
                          int64_t cols, bool nc, tc_stream *const *streams)
{
    tc_tensor *outs[8] = {0};
    outs_rows(lens, devs, n, dt, cols, nc, outs);
    return sco(t, outs, n, 0, streams);
}

static tc_status scatter_out_gpu(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lengths(), ALL, G, F32, 3, false, NULL);
}
static tc_status scatter_out_cpu(void)
{
    return sco_rows(T(SH(8, 3), F32, CPU_DEV, 1, false), lengths(), ALL, G, F32, 3, false, NULL);
}
static tc_status cols_out(int dim)
{
    tc_tensor *outs[4] = {0};
    for (int i = 0; i < G; i++)
        outs[i] = Z(SH(3, lengths()[i]), F32, ALL[i]);
    return sco(T(SH(3, 8), F32, 0, 1, false), outs, G, dim, NULL);
}
static tc_status scatter_out_dim1(void) { return cols_out(1); }
static tc_status scatter_out_dimneg(void) { return cols_out(-1); }
static tc_status scatter_out_zero(void)
{
    int64_t lens[5] = {0};
    memcpy(lens + 1, lengths(), sizeof(int64_t) * (size_t)G);
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lens, ZALL, G + 1, F32, 3, false, NULL);
}
static tc_status scatter_out_twice(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), (int64_t[]){3, 5}, DEVS(1, 1), F32, 3, false,
                    NULL);
}
static tc_status scatter_out_dtype(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lengths(), ALL, G, F16, 3, false, NULL);
}
static tc_status scatter_out_i64(void)
{
    return sco_rows(T(SH(8, 3), I64, 0, 1, false), lengths(), ALL, G, I64, 3, false, NULL);
}
static tc_status scatter_out_noncontig_src(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, true), lengths(), ALL, G, F32, 3, false, NULL);
}
static tc_status scatter_out_noncontig_out(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lengths(), ALL, G, F32, 3, true, NULL);
}
static tc_status scatter_out_sum(void)
{
    int64_t lens[4];
    memcpy(lens, lengths(), sizeof(int64_t) * (size_t)G);
    lens[G - 1] += 1;
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lens, ALL, G, F32, 3, false, NULL);
}
static tc_status scatter_out_other_dim(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lengths(), ALL, G, F32, 4, false, NULL);
}
static tc_status scatter_out_ndim(void)
{
    tc_tensor *o = Z(SH(24), F32, 0);
    return sco(T(SH(8, 3), F32, 0, 1, false), &o, 1, 0, NULL);
}
static tc_status scatter_out_cpu_out(void)
{
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), (int64_t[]){8}, DEVS(CPU_DEV), F32, 3, false,
                    NULL);
}
static tc_status scatter_out_empty(void)
{
    return sco(T(SH(8, 3), F32, 0, 1, false), NULL, 0, 0, NULL);
}
static tc_status scatter_out_streams(void)
{
    tc_stream *ss[4];
    for (int i = 0; i < G; i++)
        ss[i] = stream(ALL[i]);
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), lengths(), ALL, G, F32, 3, false, ss);
}
static tc_status scatter_out_stream_mismatch(void)
{
    tc_stream *ss[2] = {stream(1), NULL};
    return sco_rows(T(SH(8, 3), F32, 0, 1, false), (int64_t[]){3, 5}, DEVS(0, 1), F32, 3, false,
                    ss);
}

/* ---- gather ------------------------------------------------------------------------------- */

static tc_status ga(tc_tensor **ins, int n, int dim, int destination, int current)
{
    tc_set_device(current);
    for (int i = 0; i < n; i++)
        source(ins[i]);
    tc_status st = tc_comm_gather((const tc_tensor *const *)ins, n, dim, destination, res);
    if (st == TC_OK)
        n_res = 1;
    return st;
}

/* comm_torch.py's pieces(): piece i is [i + 1, 3] (dim 0) or [3, i + 1] on devs[i], seed 20 + i. */
static int pieces(int dim, tc_dtype dt, const int *devs, int n, bool nc, tc_tensor **ins)
{
    for (int i = 0; i < n; i++) {
        int64_t sz[2] = {dim == 0 ? i + 1 : 3, dim == 0 ? 3 : i + 1};
        ins[i] = T(2, sz, dt, devs[i], 20 + i, nc);
    }
    return n;
}

static tc_status gather_gpu(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, 0, 0);
}
static tc_status gather_dim1(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(1, F32, ALL, G, false, ins), 1, 0, 0);
}
static tc_status gather_dimneg(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(1, F32, ALL, G, false, ins), -1, 0, 0);
}
static tc_status gather_cpu(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, -1, 0);
}
static tc_status gather_current(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, TC_COMM_CURRENT_DEVICE, 1);
}
static tc_status gather_dest_last(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, G - 1, 0);
}
static tc_status gather_twice(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ZALL, G + 1, false, ins), 0, 0, 0);
}
static tc_status gather_dtype(void)
{
    tc_tensor *ins[2] = {T(SH(2, 3), F32, 0, 1, false), T(SH(3, 3), I64, G - 1, 2, false)};
    return ga(ins, 2, 0, 0, 0);
}
static tc_status gather_f16(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F16, ALL, G, false, ins), 0, 0, 0);
}
static tc_status gather_i64(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, I64, ALL, G, false, ins), 0, -1, 0);
}
static tc_status gather_noncontig(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(1, F32, ALL, G, true, ins), 1, 0, 0);
}
static tc_status gather_zero(void)
{
    tc_tensor *ins[2] = {T(SH(0, 3), F32, 0, 1, false), T(SH(2, 3), F32, G - 1, 1, false)};
    return ga(ins, 2, 0, 0, 0);
}
static tc_status gather_shape(void)
{
    tc_tensor *ins[2] = {T(SH(2, 3), F32, 0, 1, false), T(SH(2, 4), F32, 0, 1, false)};
    return ga(ins, 2, 0, 0, 0);
}
static tc_status gather_ndim(void)
{
    tc_tensor *ins[2] = {T(SH(2, 3), F32, 0, 1, false), T(SH(6), F32, 0, 1, false)};
    return ga(ins, 2, 0, 0, 0);
}
static tc_status gather_cpu_in(void)
{
    tc_tensor *ins[1] = {T(SH(2, 3), F32, CPU_DEV, 1, false)};
    return ga(ins, 1, 0, 0, 0);
}
static tc_status gather_neg(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, -3, 0);
}
static tc_status gather_missing(void)
{
    tc_tensor *ins[5];
    return ga(ins, pieces(0, F32, ALL, G, false, ins), 0, 99, 0);
}
static tc_status gather_empty(void) { return ga(NULL, 0, 0, 0, 0); }

/* ---- gather(out=) ------------------------------------------------------------------------- */

static tc_status gao(tc_tensor **ins, int n, tc_tensor *out, int dim)
{
    for (int i = 0; i < n; i++)
        source(ins[i]);
    tc_status st = tc_comm_gather_out((const tc_tensor *const *)ins, n, dim, out);
    if (st == TC_OK)
        results_are(&out, 1);
    return st;
}

static int64_t total(void) { return (int64_t)G * (G + 1) / 2; }

static tc_status gather_out_gpu(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(0, F32, ALL, G, false, ins), Z(SH(total(), 3), F32, 0), 0);
}
static tc_status gather_out_cpu(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(0, F32, ALL, G, false, ins), Z(SH(total(), 3), F32, CPU_DEV), 0);
}
static tc_status gather_out_last(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(0, F32, ALL, G, false, ins), Z(SH(total(), 3), F32, G - 1), 0);
}
static tc_status gather_out_dim1(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(1, F32, ALL, G, false, ins), Z(SH(3, total()), F32, 0), 1);
}
static tc_status gather_out_dtype(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(0, F32, ALL, G, false, ins), Z(SH(total(), 3), F16, 0), 0);
}
static tc_status gather_out_noncontig_out(void)
{
    tc_tensor *ins[5];
    int n = pieces(0, F32, ALL, G, false, ins);
    return gao(ins, n, Znc((int64_t[]){total(), 3}, F32, 0), 0);
}
static tc_status gather_out_shape(void)
{
    tc_tensor *ins[5];
    return gao(ins, pieces(0, F32, ALL, G, false, ins), Z(SH(total() + 1, 3), F32, 0), 0);
}
static tc_status gather_out_empty(void) { return gao(NULL, 0, Z(SH(1, 3), F32, 0), 0); }

/* ---- the list, in comm_torch.py's order ------------------------------------------------- */

typedef struct comm_case {
    const char *name;
    int need; /* GPUs */
    tc_status (*run)(void);
} comm_case;

static const comm_case cases[] = {
    {"broadcast.gpu_all", 1, broadcast_gpu_all},
    {"broadcast.gpu_rev", 1, broadcast_gpu_rev},
    {"broadcast.gpu_others", 2, broadcast_gpu_others},
    {"broadcast.gpu_twice", 1, broadcast_gpu_twice},
    {"broadcast.gpu_other_twice", 2, broadcast_gpu_other_twice},
    {"broadcast.cpu_all", 1, broadcast_cpu_all},
    {"broadcast.cpu_twice", 1, broadcast_cpu_twice},
    {"broadcast.f16", 1, broadcast_f16},
    {"broadcast.i64", 1, broadcast_i64},
    {"broadcast.noncontig", 1, broadcast_noncontig},
    {"broadcast.noncontig_cpu", 1, broadcast_noncontig_cpu},
    {"broadcast.from_1", 2, broadcast_from_1},
    {"broadcast.zero_size", 1, broadcast_zero_size},
    {"broadcast.empty_list", 1, broadcast_empty_list},
    {"broadcast.neg", 1, broadcast_neg},
    {"broadcast.neg_cpu", 1, broadcast_neg_cpu},
    {"broadcast.missing", 1, broadcast_missing},
    {"broadcast_out.gpu", 1, broadcast_out_gpu},
    {"broadcast_out.cpu", 1, broadcast_out_cpu},
    {"broadcast_out.twice", 2, broadcast_out_twice},
    {"broadcast_out.src_dev_twice", 1, broadcast_out_src_dev_twice},
    {"broadcast_out.f16", 1, broadcast_out_f16},
    {"broadcast_out.noncontig_src", 1, broadcast_out_noncontig_src},
    {"broadcast_out.noncontig_out", 2, broadcast_out_noncontig_out},
    {"broadcast_out.shape", 1, broadcast_out_shape},
    {"broadcast_out.cpu_out", 1, broadcast_out_cpu_out},
    {"broadcast_out.dtype", 2, broadcast_out_dtype},
    {"broadcast_out.empty", 1, broadcast_out_empty},
    {"bcoal.gpu", 1, bcoal_gpu},
    {"bcoal.small_buffer", 1, bcoal_small_buffer},
    {"bcoal.buffer0", 1, bcoal_buffer0},
    {"bcoal.twice", 1, bcoal_twice},
    {"bcoal.cpu", 1, bcoal_cpu},
    {"bcoal.not_first", 2, bcoal_not_first},
    {"bcoal.neg", 1, bcoal_neg},
    {"bcoal.noncontig", 1, bcoal_noncontig},
    {"bcoal.from_1", 2, bcoal_from_1},
    {"reduce_add.all", 1, reduce_add_all},
    {"reduce_add.dest_last", 2, reduce_add_dest_last},
    {"reduce_add.current", 2, reduce_add_current},
    {"reduce_add.one", 1, reduce_add_one},
    {"reduce_add.twice", 1, reduce_add_twice},
    {"reduce_add.f16", 1, reduce_add_f16},
    {"reduce_add.i64", 1, reduce_add_i64},
    {"reduce_add.noncontig", 1, reduce_add_noncontig},
    {"reduce_add.shape", 2, reduce_add_shape},
    {"reduce_add.dtype", 2, reduce_add_dtype},
    {"reduce_add.cpu", 1, reduce_add_cpu},
    {"reduce_add.neg", 1, reduce_add_neg},
    {"reduce_add.missing", 1, reduce_add_missing},
    {"reduce_add.dest_not_input", 3, reduce_add_dest_not_input},
    {"rcoal.all", 1, rcoal_all},
    {"rcoal.dest_last", 2, rcoal_dest_last},
    {"rcoal.small_buffer", 1, rcoal_small_buffer},
    {"rcoal.one_row", 1, rcoal_one_row},
    {"rcoal.current", 2, rcoal_current},
    {"rcoal.twice", 1, rcoal_twice},
    {"rcoal.neg", 1, rcoal_neg},
    {"rcoal.cpu", 1, rcoal_cpu},
    {"rcoal.dest_not_input", 3, rcoal_dest_not_input},
    {"scatter.gpu", 1, scatter_gpu},
    {"scatter.gpu_dim1", 1, scatter_gpu_dim1},
    {"scatter.gpu_dimneg", 1, scatter_gpu_dimneg},
    {"scatter.cpu", 1, scatter_cpu},
    {"scatter.chunks", 1, scatter_chunks},
    {"scatter.zero_chunk", 1, scatter_zero_chunk},
    {"scatter.zero_chunk_cpu", 1, scatter_zero_chunk_cpu},
    {"scatter.twice", 2, scatter_twice},
    {"scatter.src_twice", 1, scatter_src_twice},
    {"scatter.small", 1, scatter_small},
    {"scatter.empty_dim", 1, scatter_empty_dim},
    {"scatter.f16", 1, scatter_f16},
    {"scatter.i64", 1, scatter_i64},
    {"scatter.noncontig", 1, scatter_noncontig},
    {"scatter.noncontig_cpu", 1, scatter_noncontig_cpu},
    {"scatter.neg", 1, scatter_neg},
    {"scatter.neg_cpu", 1, scatter_neg_cpu},
    {"scatter.sum", 1, scatter_sum},
    {"scatter.neg_size", 1, scatter_neg_size},
    {"scatter.scalar", 1, scatter_scalar},
    {"scatter.dim_oob", 1, scatter_dim_oob},
    {"scatter.missing", 1, scatter_missing},
    {"scatter.unused_missing", 1, scatter_unused_missing},
    {"scatter.streams", 2, scatter_streams},
    {"scatter.stream_mismatch", 2, scatter_stream_mismatch},
    {"scatter.stream_local", 2, scatter_stream_local},
    {"scatter_out.gpu", 1, scatter_out_gpu},
    {"scatter_out.cpu", 1, scatter_out_cpu},
    {"scatter_out.dim1", 1, scatter_out_dim1},
    {"scatter_out.dimneg", 1, scatter_out_dimneg},
    {"scatter_out.zero", 1, scatter_out_zero},
    {"scatter_out.twice", 2, scatter_out_twice},
    {"scatter_out.dtype", 1, scatter_out_dtype},
    {"scatter_out.i64", 1, scatter_out_i64},
    {"scatter_out.noncontig_src", 1, scatter_out_noncontig_src},
    {"scatter_out.noncontig_out", 1, scatter_out_noncontig_out},
    {"scatter_out.sum", 1, scatter_out_sum},
    {"scatter_out.other_dim", 1, scatter_out_other_dim},
    {"scatter_out.ndim", 1, scatter_out_ndim},
    {"scatter_out.cpu_out", 1, scatter_out_cpu_out},
    {"scatter_out.empty", 1, scatter_out_empty},
    {"scatter_out.streams", 2, scatter_out_streams},
    {"scatter_out.stream_mismatch", 2, scatter_out_stream_mismatch},
    {"gather.gpu", 1, gather_gpu},
    {"gather.dim1", 1, gather_dim1},
    {"gather.dimneg", 1, gather_dimneg},
    {"gather.cpu", 1, gather_cpu},
    {"gather.current", 2, gather_current},
    {"gather.dest_last", 2, gather_dest_last},
    {"gather.twice", 1, gather_twice},
    {"gather.dtype", 1, gather_dtype},
    {"gather.f16", 1, gather_f16},
    {"gather.i64", 1, gather_i64},
    {"gather.noncontig", 1, gather_noncontig},
    {"gather.zero", 1, gather_zero},
    {"gather.shape", 1, gather_shape},
    {"gather.ndim", 1, gather_ndim},
    {"gather.cpu_in", 1, gather_cpu_in},
    {"gather.neg", 1, gather_neg},
    {"gather.missing", 1, gather_missing},
    {"gather.empty", 1, gather_empty},
    {"gather_out.gpu", 1, gather_out_gpu},
    {"gather_out.cpu", 1, gather_out_cpu},
    {"gather_out.last", 2, gather_out_last},
    {"gather_out.dim1", 1, gather_out_dim1},
    {"gather_out.dtype", 1, gather_out_dtype},
    {"gather_out.noncontig_out", 1, gather_out_noncontig_out},
    {"gather_out.shape", 1, gather_out_shape},
    {"gather_out.empty", 1, gather_out_empty},
};

/* ---- printing ---------------------------------------------------------------------------- */

static const char *storage_of(const tc_tensor *t)
{
    const char *p = tc_tensor_data_ptr(t);
    return p ? p - tc_tensor_offset(t) * (int64_t)tc_dtype_size(tc_tensor_dtype(t)) : NULL;
}

/* " | <device> <dtype> [<sizes>] <src|new> <sum> <wsum>"; false when the
 * values cannot be read. */
static bool describe(const tc_tensor *t, char *line, size_t cap)
{
    size_t len = strlen(line);
    tc_device d = tc_tensor_device(t);
    char dev[32];
    if (d.type == TC_CPU)
        snprintf(dev, sizeof dev, "cpu");
    else
        snprintf(dev, sizeof dev, "cuda:%d", d.index);
    char sizes[128] = "";
    for (int i = 0; i < tc_tensor_ndim(t); i++)
        snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%lld", i ? "," : "",
                 (long long)tc_tensor_size(t, i));
    const char *base = storage_of(t);
    bool alias = false;
    for (int i = 0; base && i < n_srcs; i++)
        alias = alias || base == storage_of(srcs[i]);
    int64_t n = tc_tensor_numel(t);
    double *x = malloc(sizeof(double) * (size_t)(n ? n : 1)), s = 0, w = 0;
    bool ok = x && tc_tensor_to_host(t, TC_FLOAT64, x) == TC_OK;
    for (int64_t i = 0; ok && i < n; i++) {
        s += x[i];
        w += (double)(i + 1) * x[i];
    }
    free(x);
    snprintf(line + len, cap - len, " | %s %s [%s] %s %.17g %.17g", dev,
             tc_dtype_string(tc_tensor_dtype(t)), sizes, alias ? "src" : "new", s, w);
    return ok;
}

static void run_case(const comm_case *c)
{
    if (G < c->need) {
        printf("%s skip\n", c->name);
        return;
    }
    n_made = n_res = n_srcs = n_streams = 0;
    tc_status st = c->run();
    for (int d = 0; st == TC_OK && d < G; d++)
        st = tc_synchronize(d);
    static char line[1 << 16];
    snprintf(line, sizeof line, "%s ok %d", c->name, n_res);
    for (int i = 0; st == TC_OK && i < n_res; i++)
        if (!describe(res[i], line, sizeof line))
            st = TC_ERROR_CUDA;
    if (st == TC_OK) {
        printf("%s\n", line);
    } else {
        printf("%s error\n", c->name);
        printf("# %s: %s: %s\n", c->name, tc_status_string(st), tc_last_error());
    }
    for (int i = 0; i < n_res; i++)
        tc_tensor_release(res[i]);
    for (int i = 0; i < n_made; i++)
        tc_tensor_release(made[i]);
    for (int i = 0; i < n_streams; i++)
        tc_stream_destroy(streams_made[i]);
    tc_set_device(0);
    fflush(stdout);
}

int main(void)
{
    int count = tc_device_count();
    if (count < 1) {
        printf("SKIP comm_cases: no GPU\n");
        return 77;
    }
    tc_test_find_nccl(); /* tcuda takes PyTorch's NCCL where there is no other */
    G = count < 4 ? count : 4;
    for (int i = 0; i < G; i++) {
        ALL[i] = i;
        REV[i] = G - 1 - i;
        ZALL[i + 1] = i;
    }
    ZALL[0] = 0;
    printf("# tcuda %s, %d GPUs used of %d\n", tc_version(), G, count);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
    return 0;
}
