/* The `tcuda` program. `tcuda info` answers what a user asks first: is CUDA
 * here, which driver and runtime, which NCCL (version and file, or why
 * none), which GPUs with what memory and clocks, how they reach each other,
 * and what this build of tcuda carries.
 *
 * Like any Unix tool it fails when its output cannot be written (a full disk,
 * `tcuda info > /dev/full`, a closed pipe): main checks stdout once at the
 * end (ferror, then fflush and fclose, which report what buffering hid) and
 * exits 1 with a message on stderr. An unknown command is named, with the
 * list of commands, and exits 2. Every command takes -h and --help: the
 * usage on stdout, exit status 0. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "memviz.h"
#include "tcuda/tcuda.h"

static void print_versions(void)
{
    int drv = tc_cuda_driver_version(), rt = tc_cuda_runtime_version();
    if (!rt)
        return;
    if (drv)
        printf("  driver supports CUDA %d.%d\n", drv / 1000, (drv % 1000) / 10);
    else
        printf("  driver: none found\n");
    printf("  runtime: CUDA %d.%d (linked statically)\n", rt / 1000, (rt % 1000) / 10);
}

/* One line: NCCL's version and file, or why there is none (the message of
 * tc_nccl_version without the call's name and the "NCCL is not available"
 * that this line already says). */
static void print_nccl(void)
{
    int code = 0, major = 0, minor = 0, patch = 0;
    const char *path = NULL;
    if (tc_nccl_version(&code) == TC_OK && tc_nccl_get_library_path(&path) == TC_OK &&
        tc_nccl_version_split(code, &major, &minor, &patch) == TC_OK) {
        printf("  NCCL: %d.%d.%d (%s)\n", major, minor, patch, path);
        return;
    }
    const char *why = tc_last_error();
    static const char *const skip[] = {
        "tc_nccl_version: ", "tc_nccl_get_library_path: ", "NCCL is not available: "};
    for (size_t i = 0; i < sizeof skip / sizeof *skip; i++)
        if (strncmp(why, skip[i], strlen(skip[i])) == 0)
            why += strlen(skip[i]);
    printf("  NCCL: not available: %s\n", why);
}

static void print_monitor(int d)
{
    int util = -1, mem = -1, temp = -1, power = -1;
    int64_t clock_hz = -1;
    if (tc_utilization(d, &util) != TC_OK) {
        printf("    monitoring: %s\n", tc_last_error());
        return;
    }
    (void)tc_memory_usage(d, &mem); /* -1 where NVML cannot read a value */
    (void)tc_temperature(d, &temp);
    (void)tc_power_draw(d, &power);
    (void)tc_clock_rate(d, &clock_hz);
    printf("    utilization %d%%, memory busy %d%%, %d C, %.1f W, SM clock %.0f MHz\n", util, mem,
           temp, power / 1000.0, clock_hz / 1e6);
}

static int info(void)
{
    printf("tcuda %s\n", tc_version());
    const char *archs = tc_get_arch_list();
    printf("  kernels built for: %s\n", archs[0] ? archs : "(built without CUDA)");
    print_versions();
    print_nccl();
    if (!tc_is_available()) {
        printf("CUDA available: no\n  %s\n", tc_last_error());
        printf("tcuda runs on the CPU here; GPU calls answer TC_ERROR_NO_DEVICE.\n");
        return 0;
    }
    int n = tc_device_count();
    printf("CUDA available: yes, %d device%s\n", n, n == 1 ? "" : "s");
    for (int d = 0; d < n; d++) {
        tc_device_properties p;
        size_t free_b = 0, total_b = 0;
        if (tc_get_device_properties(d, &p) != TC_OK) {
            printf("  cuda:%d: %s\n", d, tc_last_error());
            continue;
        }
        printf("  cuda:%d  %s  (compute capability %d.%d)\n", d, p.name, p.major, p.minor);
        if (tc_mem_get_info(d, &free_b, &total_b) == TC_OK)
            printf("    memory %.1f GiB free of %.1f GiB\n", free_b / 1073741824.0,
                   total_b / 1073741824.0);
        printf("    %d SMs, L2 %.0f MiB, peak SM clock %d MHz, memory bus %d bits\n",
               p.multi_processor_count, p.l2_cache_size / 1048576.0, p.clock_rate_khz / 1000,
               p.memory_bus_width);
        printf("    PCI %04x:%02x:%02x\n", p.pci_domain_id, p.pci_bus_id, p.pci_device_id);
        print_monitor(d);
    }
    if (n > 1) {
        printf("peer access (row can reach column):\n      ");
        for (int q = 0; q < n; q++)
            printf(" %4d", q);
        printf("\n");
        for (int d = 0; d < n; d++) {
            printf("  %4d", d);
            for (int q = 0; q < n; q++) {
                bool can = false;
                (void)tc_can_device_access_peer(d, q, &can);
                printf(" %4s", d == q ? "-" : can ? "yes" : "no");
            }
            printf("\n");
        }
    }
    return 0;
}

static const char commands[] = "info, memviz, help";

static void usage(FILE *f)
{
    fprintf(f, "usage: tcuda info    what CUDA, NCCL, GPUs and this tcuda build offer\n"
               "       tcuda memviz [--summary] [--device N] SNAPSHOT > report.html\n"
               "                     a memory snapshot (tc_memory_dump_snapshot) as one HTML\n"
               "                     page, or with --summary as a text table\n"
               "       tcuda help    this text (also -h, --help)\n");
}

static bool is_help_flag(const char *a) { return strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0; }

/* Exit status 1, with a message, when anything written to stdout was lost:
 * an earlier write failed (ferror), or the last buffered bytes cannot be
 * written (fflush, fclose). */
static int check_stdout(int status)
{
    bool lost = ferror(stdout) != 0;
    int err = 0;
    errno = 0;
    if (fflush(stdout) != 0) {
        lost = true;
        err = errno;
    }
    if (fclose(stdout) != 0) {
        lost = true;
        err = err ? err : errno;
    }
    if (!lost)
        return status;
    fprintf(stderr, "tcuda: cannot write the output%s%s\n", err ? ": " : "",
            err ? strerror(err) : "");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    bool is_info = strcmp(cmd, "info") == 0;
    bool is_help = strcmp(cmd, "help") == 0 || is_help_flag(cmd);
    if ((is_info || is_help) && argc == 3 && is_help_flag(argv[2])) { /* `tcuda info --help` */
        usage(stdout);
        return check_stdout(0);
    }
    if ((is_info || is_help) && argc > 2) {
        fprintf(stderr, "tcuda: '%s' takes no arguments (got '%s')\n", cmd, argv[2]);
        return 2;
    }
    if (is_info)
        return check_stdout(info());
    if (strcmp(cmd, "memviz") == 0)
        return check_stdout(tc_tool_memviz(argc, argv));
    if (is_help) {
        usage(stdout);
        return check_stdout(0);
    }
    fprintf(stderr, "tcuda: unknown command '%s'; commands: %s\n", cmd, commands);
    usage(stderr);
    return 2;
}
