/* tcuda: export macro and version numbers shared by every public header.
 *
 * The version numbers below are the only place the version is written: the
 * top-level CMakeLists.txt reads them for project(VERSION) (the shared
 * library's version and tcuda.pc), and tc_version() formats them. */
#ifndef TCUDA_EXPORT_H
#define TCUDA_EXPORT_H

#define TCUDA_VERSION_MAJOR 0
#define TCUDA_VERSION_MINOR 3
#define TCUDA_VERSION_PATCH 0
/* One number that grows with every release: 100 * (100 * major + minor) + patch. */
#define TCUDA_VERSION_CODE                                                                         \
    (100 * (100 * TCUDA_VERSION_MAJOR + TCUDA_VERSION_MINOR) + TCUDA_VERSION_PATCH)

#if defined(TCUDA_BUILDING_SHARED)
#define TCUDA_API __attribute__((visibility("default")))
#else
#define TCUDA_API
#endif

#ifdef __cplusplus
#define TCUDA_EXTERN_C_BEGIN extern "C" {
#define TCUDA_EXTERN_C_END }
#else
#define TCUDA_EXTERN_C_BEGIN
#define TCUDA_EXTERN_C_END
#endif

#endif
