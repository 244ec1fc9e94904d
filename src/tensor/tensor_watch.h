/* The tensor seam's declarations to the access layer (tensor_watch.c). Not
 * installed. */
#ifndef TCUDA_TENSOR_WATCH_H
#define TCUDA_TENSOR_WATCH_H

#include <stdbool.h>

#include "access/access.h"
#include "iter.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Installs the declaring wrappers over the device seam, once (the access
 * layer runs it when the first watcher activates; tensor.c registers it). */
void tc__tensor_watch_enable(void);

/* The bytes operand `op` of an iter touches, with the iter's shape, for
 * elements of `dtype`. */
void tc__span_of_iter(const tc__iter *it, int op, tc_dtype dtype, bool write, tc__span *out);

#ifdef __cplusplus
}
#endif

#endif
