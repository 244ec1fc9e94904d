/* The CPU's training layers of the nn backend (tensor/nn_internal.h):
 * embedding's backward and dropout's product.
 *
 * The embedding backward is the reference the GPU is compared with: every
 * index is checked before anything is written, then the positions are
 * bucketed by weight row with a stable counting sort, and each row's
 * contributions are summed in double in the order of their positions and
 * added to the row, rounded once. Its memory is O(V + n + C), never a
 * double copy of the whole [V, C] gradient.
 *
 * Dropout's product computes in the type the GPU does (float for 16-bit
 * dtypes and float32, double for float64) with the same operations in the
 * same order, so the CPU and a GPU give the same bits. */
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "tensor/nn_internal.h"
#include "tensor/tensor_internal.h"
#include "cpu_float_io.h"

/* ---- embedding backward ------------------------------------------------------------ */

static tc_status check_indices(const tc__nn_embedding_bwd *a)
{
    for (int64_t i = 0; i < a->n; i++) {
        int64_t t = a->indices[i];
        if (t < 0 || t >= a->v)
            return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                            "index %lld (position %lld) is out of range: the weight has rows "
                            "0..%lld",
                            (long long)t, (long long)i, (long long)a->v - 1);
    }
    return TC_OK;
}

/* Adds row r's contributions (positions order[0..k-1], ascending) to it,
 * their sum divided by k with scale_grad_by_freq. */
static void add_row(const tc__nn_embedding_bwd *a, int64_t r, const int64_t *order, int64_t k,
                    double *acc)
{
    int64_t c = a->c;
    for (int64_t j = 0; j < c; j++)
        acc[j] = 0;
    for (int64_t q = 0; q < k; q++) {
        int64_t base = order[q] * c;
        for (int64_t j = 0; j < c; j++)
            acc[j] += ld(a->grad_output, a->dtype, base + j);
    }
    /* the row's old value joins in float32 for 16-bit dtypes, as a GPU does */
    bool half = a->dtype == TC_FLOAT16 || a->dtype == TC_BFLOAT16;
    for (int64_t j = 0; a->scale_grad_by_freq && j < c; j++)
        acc[j] /= (double)k;
    for (int64_t j = 0; j < c; j++) {
        double old = ld(a->grad_weight, a->dtype, r * c + j);
        double s = half ? (double)((float)old + (float)acc[j]) : old + acc[j];
        st(a->grad_weight, a->dtype, r * c + j, s);
    }
}

tc_status tc__cpu_nn_embedding_backward(int device, const tc__nn_embedding_bwd *a)
{
    (void)device;
    TC_TRY(check_indices(a));
    int64_t v = a->v, n = a->n;
    int64_t *start = calloc((size_t)v + 1, sizeof(int64_t));
    int64_t *order = malloc(sizeof(int64_t) * (size_t)n);
    double *acc = malloc(sizeof(double) * (size_t)a->c);
    if (!start || !order || !acc) {
        free(start), free(order), free(acc);
        return tc__fail(TC_ERROR_OUT_OF_MEMORY, "no memory for the CPU embedding backward");
    }
    for (int64_t i = 0; i < n; i++) /* counts, shifted by one */
        start[a->indices[i] + 1]++;
    for (int64_t r = 0; r < v; r++)
        start[r + 1] += start[r];
    for (int64_t i = 0; i < n; i++) /* stable: positions ascend within a row */
        order[start[a->indices[i]]++] = i;
    /* start[r] is now the end of row r's bucket, the start of row r + 1's */
    int64_t from = 0;
    for (int64_t r = 0; r < v; r++) {
        int64_t to = start[r];
        if (to > from && r != a->padding_idx)
            add_row(a, r, order + from, to - from, acc);
        from = to;
    }
    free(start), free(order), free(acc);
    return TC_OK;
}

/* ---- dropout --------------------------------------------------------------------------- */

tc_status tc__cpu_nn_dropout(int device, const tc__nn_dropout *a)
{
    (void)device;
    if (a->dtype == TC_FLOAT64) {
        const double *x = a->x;
        double *o = a->out, s = a->scale;
        for (int64_t i = 0; i < a->n; i++)
            o[i] = x[i] * (double)a->mask[i] * s;
        return TC_OK;
    }
    float s = (float)a->scale;
    for (int64_t i = 0; i < a->n; i++) {
        float x = (float)ld(a->x, a->dtype, i);
        float y = x * (float)a->mask[i];
        y = y * s;
        st(a->out, a->dtype, i, y);
    }
    return TC_OK;
}
