/* Session 44: which allocator tunables a binary sets. Logs every mallopt(param, value) call
 * to stderr, then makes it (M_MMAP_THRESHOLD is -3, M_ARENA_MAX is -8):
 *   cc -shared -fPIC -o /tmp/shim.so gpu-jobs/mallopt-shim.c -ldl
 *   LD_PRELOAD=/tmp/shim.so ./target/release/llmprof site build --runs runs --out site
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int mallopt(int param, int value) {
    static int (*real)(int, int);
    if (!real) real = (int (*)(int, int))dlsym(RTLD_NEXT, "mallopt");
    fprintf(stderr, "mallopt(%d, %d)\n", param, value);
    return real ? real(param, value) : 0;
}
