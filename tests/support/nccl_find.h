/* For the tests that use NCCL: when libnccl.so.2 is not on the loader's
 * path and TCUDA_NCCL_LIBRARY is not set, look for the copy PyTorch ships
 * (the nvidia-nccl wheel) and point TCUDA_NCCL_LIBRARY at it, before tcuda
 * first loads NCCL. Prints what it found. Header-only (static). */
#ifndef TC_TEST_NCCL_FIND_H
#define TC_TEST_NCCL_FIND_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline void tc_test_find_nccl(void)
{
    const char *set = getenv("TCUDA_NCCL_LIBRARY");
    if (set && *set) {
        printf("NCCL: %s (TCUDA_NCCL_LIBRARY)\n", set);
        return;
    }
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h) {
        dlclose(h);
        printf("NCCL: libnccl.so.2 from the loader's path\n");
        return;
    }
    FILE *p = popen("python3 -c 'import nvidia.nccl, os; "
                    "print(os.path.join(list(nvidia.nccl.__path__)[0], \"lib\", "
                    "\"libnccl.so.2\"))' 2>/dev/null",
                    "r");
    char path[1024] = "";
    if (p) {
        if (!fgets(path, sizeof path, p))
            path[0] = '\0';
        pclose(p);
    }
    path[strcspn(path, "\n")] = '\0';
    if (path[0] && (h = dlopen(path, RTLD_NOW | RTLD_LOCAL)) != NULL) {
        dlclose(h);
        setenv("TCUDA_NCCL_LIBRARY", path, 1);
        printf("NCCL: %s (PyTorch's)\n", path);
    } else {
        printf("NCCL: not found (set TCUDA_NCCL_LIBRARY)\n");
    }
}

#endif
