// LD_PRELOAD shim for bench/amx_on_off.py: refuses the AMX tile-data
// permission (arch_prctl ARCH_REQ_XCOMP_PERM), as a kernel or hypervisor
// without AMX support would. ggml then offers no AMX buffer type and runs the
// same weights on its AVX-512 repacked kernels: "the same build with AMX
// refused", identical for hone and for the peer llama-bench.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/syscall.h>

long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
  va_end(ap);
  if (number == SYS_arch_prctl && a[0] == 0x1023 /* ARCH_REQ_XCOMP_PERM */) {
    errno = EPERM;
    return -1;
  }
  static long (*real)(long, ...) = 0;
  if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
