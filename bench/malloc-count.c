/* Counts the allocations of the process it is preloaded into, for
 * bench/run --allocs (issue 33: allocations per request beside CPU).
 *
 *   cc -O2 -shared -fPIC -o libmalloc-count.so bench/malloc-count.c
 *   MALLOC_COUNT_FILE=/tmp/counts LD_PRELOAD=./libmalloc-count.so pinproxy run …
 *
 * The counters live in MALLOC_COUNT_FILE, mapped shared, so the bench reads
 * them from outside at any moment (two little-endian uint64: allocations,
 * bytes asked for) without a signal or a pipe. Every allocating entry point
 * of glibc is counted (malloc, calloc, realloc, posix_memalign,
 * aligned_alloc, memalign) and forwarded to glibc's own; free is not
 * interposed. Before the file is mapped (the loader's own early calls) the
 * counts go to a static pair that nobody reads. Counting costs an atomic add
 * per call, so CPU figures are taken from runs without it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static uint64_t early[2];
static uint64_t *counts = early;

__attribute__((constructor)) static void map_counts(void) {
    const char *path = getenv("MALLOC_COUNT_FILE");
    if (!path) return;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) return;
    if (ftruncate(fd, sizeof(uint64_t) * 2) == 0) {
        void *shared = mmap(NULL, sizeof(uint64_t) * 2, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (shared != MAP_FAILED) counts = shared;
    }
    close(fd);
}

static inline void count(size_t bytes) {
    __atomic_add_fetch(&counts[0], 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&counts[1], bytes, __ATOMIC_RELAXED);
}

void *malloc(size_t size) { count(size); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { count(n * size); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { count(size); return __libc_realloc(p, size); }
void *memalign(size_t alignment, size_t size) { count(size); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { count(size); return __libc_memalign(alignment, size); }
int posix_memalign(void **out, size_t alignment, size_t size) {
    count(size);
    void *p = __libc_memalign(alignment, size);
    if (!p) return 12; /* ENOMEM */
    *out = p;
    return 0;
}
