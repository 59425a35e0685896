// The glibc floor of what gpumux puts into a tenant's process (the shim, the simulated driver):
// they must load under the tenant image's glibc, as old as 2.17 (manylinux2014's floor: CentOS 7;
// Ubuntu 18.04 has 2.27, UBI 8 2.28, Ubuntu 20.04 2.31), and need no C++ runtime from the image
// (a PyTorch process brings its own libstdc++, which must be neither required nor interposed).
//
// So those libraries link the C++ runtime in (-static-libstdc++ -static-libgcc) and export only
// their C API (a version script; cmake: gpumux_tenant_library). But the runtime, and our own code,
// built against this machine's glibc, ask for symbols at the versions this glibc has:
// pthread_create@GLIBC_2.34 (libpthread merged into libc), stat@GLIBC_2.33 (the __xstat wrappers
// became functions), arc4random@GLIBC_2.36, _dl_find_object@GLIBC_2.35 (the unwinder), and more.
// Each such symbol is defined here. The library's own references bind to these definitions (the
// version script keeps them local, so nothing outside sees them), and each forwards to the version
// every glibc since 2.2.5 has, or does its work with what 2.17 has. The list is what the linker
// asked for on Debian 12 (glibc 2.36, GCC 12); `ctest -R TenantLibraries` reads the built
// libraries' needs and fails on any GLIBC version past 2.17, so a symbol a newer toolchain adds is
// caught, not shipped.
//
// Not on a hot path except through what forwards (a pthread call, a stat): one extra jump.
#include <dlfcn.h>
#include <link.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

// Binds `local` to `name` at glibc's first x86_64 version, which every glibc since has kept.
#define GPUMUX_AT_FIRST_VERSION(local, name) __asm__(".symver " #local "," #name "@GLIBC_2.2.5")

extern "C" {

// libpthread (merged into libc in 2.34, at new versions). Opaque types: <pthread.h> is not
// included, so these definitions declare nothing twice.
int gpumux_pthread_create(void*, const void*, void* (*)(void*), void*);
int gpumux_pthread_join(unsigned long, void**);
int gpumux_pthread_detach(unsigned long);
int gpumux_pthread_once(int*, void (*)());
int gpumux_pthread_key_create(unsigned*, void (*)(void*));
GPUMUX_AT_FIRST_VERSION(gpumux_pthread_create, pthread_create);
GPUMUX_AT_FIRST_VERSION(gpumux_pthread_join, pthread_join);
GPUMUX_AT_FIRST_VERSION(gpumux_pthread_detach, pthread_detach);
GPUMUX_AT_FIRST_VERSION(gpumux_pthread_once, pthread_once);
GPUMUX_AT_FIRST_VERSION(gpumux_pthread_key_create, __pthread_key_create);

int pthread_create(void* thread, const void* attr, void* (*start)(void*), void* arg) {
  return gpumux_pthread_create(thread, attr, start, arg);
}
int pthread_join(unsigned long thread, void** result) { return gpumux_pthread_join(thread, result); }
int pthread_detach(unsigned long thread) { return gpumux_pthread_detach(thread); }
int pthread_once(int* once, void (*init)()) { return gpumux_pthread_once(once, init); }
int __pthread_key_create(unsigned* key, void (*destroy)(void*)) {
  return gpumux_pthread_key_create(key, destroy);
}

// libdl (merged into libc in 2.34).
void* gpumux_dlopen(const char*, int);
void* gpumux_dlvsym(void*, const char*, const char*);
GPUMUX_AT_FIRST_VERSION(gpumux_dlopen, dlopen);
GPUMUX_AT_FIRST_VERSION(gpumux_dlvsym, dlvsym);

void* dlopen(const char* file, int mode) noexcept { return gpumux_dlopen(file, mode); }
void* dlvsym(void* handle, const char* name, const char* version) noexcept {
  return gpumux_dlvsym(handle, name, version);
}

// The stat family: functions since 2.33, before that inline wrappers around __xstat and kin
// (_STAT_VER 1 on x86_64; struct stat and struct stat64 are one layout there).
int gpumux_xstat(int, const char*, void*);
int gpumux_lxstat(int, const char*, void*);
int gpumux_fxstat(int, int, void*);
GPUMUX_AT_FIRST_VERSION(gpumux_xstat, __xstat);
GPUMUX_AT_FIRST_VERSION(gpumux_lxstat, __lxstat);
GPUMUX_AT_FIRST_VERSION(gpumux_fxstat, __fxstat);
constexpr int kStatVersion = 1;

int stat(const char* path, struct stat* out) noexcept {
  return gpumux_xstat(kStatVersion, path, out);
}
int lstat(const char* path, struct stat* out) noexcept {
  return gpumux_lxstat(kStatVersion, path, out);
}
int fstat(int fd, struct stat* out) noexcept { return gpumux_fxstat(kStatVersion, fd, out); }
int fstat64(int fd, struct stat64* out) noexcept { return gpumux_fxstat(kStatVersion, fd, out); }

// libm: exp's new version (2.29) is only a faster implementation.
double gpumux_exp(double);
GPUMUX_AT_FIRST_VERSION(gpumux_exp, exp);
double exp(double x) noexcept { return gpumux_exp(x); }

// memfd_create (2.27; the simulated driver's device memory): the system call, Linux 3.17.
int memfd_create(const char* name, unsigned flags) noexcept {
  return int(syscall(SYS_memfd_create, name, flags));
}

// What thread-safe reference counts ask (2.32): 0 says "not single-threaded", always safe.
char __libc_single_threaded = 0;

// Randomness (getentropy 2.25, arc4random 2.36; std::random_device): the getrandom system call,
// which every kernel glibc 2.17 supports running on has had since Linux 3.17.
int getentropy(void* buffer, size_t length) {
  if (length > 256) {
    errno = EIO;
    return -1;
  }
  auto* out = static_cast<unsigned char*>(buffer);
  while (length > 0) {
    long n = syscall(SYS_getrandom, out, length, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    out += n;
    length -= size_t(n);
  }
  return 0;
}
uint32_t arc4random() noexcept {
  uint32_t value = 0;
  while (getentropy(&value, sizeof(value)) != 0) {
  }
  return value;
}

// The unwinder's fast look-up (2.35); without it, libgcc finds no frame and a C++ exception
// terminates. The same answer from dl_iterate_phdr, which 2.17 has: the object holding `pc` and
// its PT_GNU_EH_FRAME.
int _dl_find_object(void* pc, struct dl_find_object* result) noexcept {
  struct Search {
    uintptr_t pc;
    dl_find_object* result;
    bool found;
  } search{reinterpret_cast<uintptr_t>(pc), result, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        uintptr_t low = UINTPTR_MAX, high = 0;
        const void* eh_frame = nullptr;
        bool holds = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t start = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type == PT_LOAD) {
            low = start < low ? start : low;
            high = start + ph.p_memsz > high ? start + ph.p_memsz : high;
            holds |= s->pc >= start && s->pc < start + ph.p_memsz;
          } else if (ph.p_type == PT_GNU_EH_FRAME) {
            eh_frame = reinterpret_cast<const void*>(start);
          }
        }
        if (!holds) return 0;
        std::memset(s->result, 0, sizeof(*s->result));
        s->result->dlfo_map_start = reinterpret_cast<void*>(low);
        s->result->dlfo_map_end = reinterpret_cast<void*>(high);
        s->result->dlfo_eh_frame = const_cast<void*>(eh_frame);
        s->found = true;
        return 1;
      },
      &search);
  return search.found ? 0 : -1;
}

}  // extern "C"
