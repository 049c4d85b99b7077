/* LD_PRELOAD shim for sanitizer runs (scripts/test-sanitizers): Debian's
 * oneTBB 2021.8 dlopen()s libtbbbind with RTLD_DEEPBIND, which the ASan and
 * TSan runtimes refuse (google/sanitizers#611) by aborting the process. This
 * drops that one flag and passes the call on to the next dlopen (the
 * sanitizer's interceptor). Never part of a normal build. */
#define _GNU_SOURCE
#include <dlfcn.h>

void* dlopen(const char* file, int mode) {
  static void* (*next)(const char*, int);
  if (!next) next = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
  return next(file, mode & ~RTLD_DEEPBIND);
}
