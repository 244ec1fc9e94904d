/* tc_device_parse: "cpu" (or "cpu:0", as torch.device takes it), "cuda",
 * "cuda:N" to a tc_device; the index is checked against devices later, by
 * the one device rule (device_ops.h), when the device is used. And back:
 * tc_device_format writes a device as tc_device_parse reads it. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/internal.h"
#include "tcuda/device.h"

tc_status tc_device_parse(const char *text, tc_device *out)
{
    TC_API_BEGIN;
    TC_CHECK_ARG(text && out, "text or out is NULL");
    if (strcmp(text, "cpu") == 0 || strcmp(text, "cpu:0") == 0) {
        *out = (tc_device){TC_CPU, -1};
        return TC_OK;
    }
    if (strcmp(text, "cuda") == 0) {
        *out = (tc_device){TC_CUDA, -1};
        return TC_OK;
    }
    if (strncmp(text, "cuda:", 5) == 0 && isdigit((unsigned char)text[5])) {
        char *end;
        long idx = strtol(text + 5, &end, 10);
        if (*end == '\0' && idx < TC_MAX_DEVICES) {
            *out = (tc_device){TC_CUDA, (int)idx};
            return TC_OK;
        }
    }
    return tc__fail(TC_ERROR_INVALID_ARGUMENT,
                    "\"%s\" is not a device; use \"cpu\", \"cuda\" or \"cuda:N\" "
                    "with N below %d",
                    text, TC_MAX_DEVICES);
}

void tc_device_format(tc_device d, char *buf, size_t n)
{
    if (!buf || !n)
        return;
    if (d.type == TC_CPU)
        snprintf(buf, n, "cpu");
    else if (d.index < 0)
        snprintf(buf, n, "cuda");
    else
        snprintf(buf, n, "cuda:%d", d.index);
}
