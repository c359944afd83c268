/* Probes for a usable GPU at open: the CUDA driver or an OpenCL platform, loaded at run time
 * (nothing links against them). A driver found is kept loaded with its symbols global, where the
 * Halide runtime of the bundle finds them (it looks in the process before loading libcuda.so or
 * libOpenCL.so itself, names that only the development packages install). */
#define _XOPEN_SOURCE 700
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_count_fn)(int* count);
typedef int (*cl_platforms_fn)(unsigned n, void** platforms, unsigned* count);
typedef int (*cl_devices_fn)(void* platform, unsigned long long type, unsigned n, void** devices,
                             unsigned* count);

#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFull
#define MAX_PLATFORMS 16

/* dlsym's object pointer as a function pointer (POSIX: they convert). */
#define LOAD(fn, lib, name)           \
  do {                                \
    void* sym_ = dlsym(lib, name);    \
    memcpy(&(fn), &sym_, sizeof(fn)); \
  } while (0)

/* $PADFOLD_CUDA_DRIVER names the CUDA driver library where it is not libcuda.so.1 on the loader's
 * path (tests point it at a missing file to act as a machine without one). */
static pf_status probe_cuda(char* why, size_t len) {
  const char* driver = getenv("PADFOLD_CUDA_DRIVER");
  void* lib = dlopen(driver && *driver ? driver : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  cu_init_fn init;
  cu_count_fn count;
  int n = 0, rc;
  if (!lib) {
    snprintf(why, len, "needs a CUDA device: the CUDA driver cannot be loaded (%s)", dlerror());
    return PF_ERR_NO_TARGET;
  }
  LOAD(init, lib, "cuInit");
  LOAD(count, lib, "cuDeviceGetCount");
  if (!init || !count) {
    snprintf(why, len, "needs a CUDA device: libcuda.so.1 lacks cuInit or cuDeviceGetCount");
    return PF_ERR_NO_TARGET;
  }
  if ((rc = init(0)) != 0) {
    snprintf(why, len, "needs a CUDA device: cuInit failed (CUresult %d)", rc);
    return PF_ERR_NO_TARGET;
  }
  if ((rc = count(&n)) != 0 || n < 1) {
    snprintf(why, len, "needs a CUDA device: cuDeviceGetCount found none (CUresult %d)", rc);
    return PF_ERR_NO_TARGET;
  }
  return PF_OK;
}

static pf_status probe_opencl(char* why, size_t len) {
  void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_GLOBAL);
  cl_platforms_fn platforms;
  cl_devices_fn devices;
  void* ids[MAX_PLATFORMS];
  unsigned n = 0, i, found = 0;
  int rc;
  if (!lib) {
    snprintf(why, len, "needs an OpenCL device: libOpenCL.so.1 cannot be loaded (%s)", dlerror());
    return PF_ERR_NO_TARGET;
  }
  LOAD(platforms, lib, "clGetPlatformIDs");
  LOAD(devices, lib, "clGetDeviceIDs");
  if (!platforms || !devices) {
    snprintf(why, len, "needs an OpenCL device: libOpenCL.so.1 lacks clGetPlatformIDs");
    return PF_ERR_NO_TARGET;
  }
  if ((rc = platforms(MAX_PLATFORMS, ids, &n)) != 0 || n == 0) {
    snprintf(why, len, "needs an OpenCL device: clGetPlatformIDs found no platform (error %d)", rc);
    return PF_ERR_NO_TARGET;
  }
  for (i = 0; i < n && i < MAX_PLATFORMS && !found; i++) {
    unsigned d = 0;
    if (devices(ids[i], CL_DEVICE_TYPE_ALL, 0, NULL, &d) == 0) found = d;
  }
  if (!found) {
    snprintf(why, len, "needs an OpenCL device: clGetDeviceIDs found none on %u platform(s)", n);
    return PF_ERR_NO_TARGET;
  }
  return PF_OK;
}

pf_status pf_device_probe(const char* api, char* why, size_t len) {
  if (strcmp(api, "cuda") == 0) return probe_cuda(why, len);
  if (strcmp(api, "opencl") == 0) return probe_opencl(why, len);
  snprintf(why, len, "needs device API '%s', which the padfold runtime does not support", api);
  return PF_ERR_NO_TARGET;
}
