/* Keeps OpenSSL's record buffers in the process it is preloaded into, for
 * measuring what SSL_MODE_RELEASE_BUFFERS costs (issue 33; bench/README.md).
 *
 *   cc -O2 -shared -fPIC -o libtls-keep-buffers.so bench/tls-keep-buffers.c -ldl
 *   LD_PRELOAD=./libtls-keep-buffers.so pinproxy run …
 *
 * pinproxy sets the mode with SSL_CTX_set_mode, a macro for
 * SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, mode, NULL); this interposes SSL_CTX_ctrl,
 * clears SSL_MODE_RELEASE_BUFFERS from that one call and forwards everything
 * to libssl's own. The same binary then runs with and without the mode, so a
 * single bench run compares both (allocations, CPU, memory per idle
 * connection). Nothing else changes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <openssl/ssl.h>

long SSL_CTX_ctrl(SSL_CTX *ctx, int cmd, long larg, void *parg) {
    static long (*real)(SSL_CTX *, int, long, void *);
    if (!real) real = (long (*)(SSL_CTX *, int, long, void *))dlsym(RTLD_NEXT, "SSL_CTX_ctrl");
    if (cmd == SSL_CTRL_MODE) larg &= ~(long)SSL_MODE_RELEASE_BUFFERS;
    return real(ctx, cmd, larg, parg);
}
