/*
 * The OpenSSL 3 headers pinproxy uses, and Swift-callable wrappers for the
 * function-like macros Swift cannot import. Every wrapper is `static inline`
 * and prefixed `CPinproxy_` so it can never collide with an OpenSSL symbol.
 */
#ifndef CPINPROXY_OPENSSL_SHIM_H
#define CPINPROXY_OPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

/* MARK: Macro wrappers — SSL_CTX */

static inline int CPinproxy_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline int CPinproxy_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_max_proto_version(ctx, version);
}
static inline long CPinproxy_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}
static inline long CPinproxy_SSL_set_mode(SSL *ssl, long mode) {
    return SSL_set_mode(ssl, mode);
}
static inline long CPinproxy_SSL_clear_mode(SSL *ssl, long mode) {
    return SSL_clear_mode(ssl, mode);
}
static inline long CPinproxy_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline long CPinproxy_SSL_CTX_sess_set_cache_size(SSL_CTX *ctx, long size) {
    return SSL_CTX_sess_set_cache_size(ctx, size);
}
static inline int CPinproxy_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) {
    return (int)SSL_CTX_set1_groups_list(ctx, list);
}
static inline int CPinproxy_SSL_CTX_add_extra_chain_cert(SSL_CTX *ctx, X509 *cert) {
    return (int)SSL_CTX_add_extra_chain_cert(ctx, cert);
}

/* MARK: Macro wrappers — SSL */

static inline int CPinproxy_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}
static inline int CPinproxy_SSL_set_app_data(SSL *ssl, void *arg) {
    return SSL_set_app_data(ssl, arg);
}
static inline void *CPinproxy_SSL_get_app_data(const SSL *ssl) {
    return SSL_get_app_data(ssl);
}
static inline int CPinproxy_SSL_add1_chain_cert(SSL *ssl, X509 *cert) {
    return (int)SSL_add1_chain_cert(ssl, cert);
}

/* MARK: Macro wrappers — BIO */

static inline long CPinproxy_BIO_pending(BIO *bio) {
    return (long)BIO_pending(bio);
}
static inline void CPinproxy_BIO_set_retry_read(BIO *bio) {
    BIO_set_retry_read(bio);
}
static inline void CPinproxy_BIO_clear_retry_flags(BIO *bio) {
    BIO_clear_retry_flags(bio);
}
static inline long CPinproxy_BIO_set_mem_eof_return(BIO *bio, int value) {
    return BIO_set_mem_eof_return(bio, value);
}
static inline long CPinproxy_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

/* MARK: Macro wrappers — stacks of X509 */

static inline int CPinproxy_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}
static inline X509 *CPinproxy_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}
static inline STACK_OF(X509) *CPinproxy_sk_X509_new_null(void) {
    return sk_X509_new_null();
}
static inline int CPinproxy_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) {
    return sk_X509_push(stack, cert);
}
static inline void CPinproxy_sk_X509_pop_free_X509(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

/* MARK: Macro wrappers — stacks of SSL_CIPHER (cipher-string checks) */

static inline int CPinproxy_sk_SSL_CIPHER_num(const STACK_OF(SSL_CIPHER) *stack) {
    return sk_SSL_CIPHER_num(stack);
}
static inline const SSL_CIPHER *CPinproxy_sk_SSL_CIPHER_value(const STACK_OF(SSL_CIPHER) *stack, int index) {
    return sk_SSL_CIPHER_value(stack, index);
}
static inline void CPinproxy_sk_SSL_CIPHER_free(STACK_OF(SSL_CIPHER) *stack) {
    sk_SSL_CIPHER_free(stack);
}

/* MARK: Macro wrappers — keys, errors, X509v3 */

/* EVP_EC_gen is a variadic macro over EVP_PKEY_Q_keygen; Swift cannot call either. */
static inline EVP_PKEY *CPinproxy_EVP_EC_gen(const char *curve) {
    return EVP_EC_gen(curve);
}
static inline EVP_PKEY *CPinproxy_EVP_RSA_gen(unsigned int bits) {
    return EVP_RSA_gen(bits);
}
static inline int CPinproxy_ERR_GET_LIB(unsigned long e) { return ERR_GET_LIB(e); }
static inline int CPinproxy_ERR_GET_REASON(unsigned long e) { return ERR_GET_REASON(e); }
static inline void CPinproxy_X509V3_set_ctx_nodb(X509V3_CTX *ctx) { X509V3_set_ctx_nodb(ctx); }
static inline void CPinproxy_OPENSSL_free(void *p) { OPENSSL_free(p); }

/* MARK: Constants defined as expressions Swift cannot import */

static inline uint64_t CPinproxy_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t CPinproxy_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline uint64_t CPinproxy_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline unsigned long CPinproxy_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }

#endif
