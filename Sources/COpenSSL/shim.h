#ifndef AVGRAPH_COPENSSL_SHIM_H
#define AVGRAPH_COPENSSL_SHIM_H
/* The system's OpenSSL 3 (libssl-dev): STUN's MESSAGE-INTEGRITY (HMAC-SHA1), and WebRTC's DTLS
   (the server role, its certificate, SRTP's keys exported from the handshake). The inline
   functions stand for OpenSSL's macros, which Swift cannot call. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/err.h>
#include <openssl/bio.h>

static inline EVP_PKEY *avg_ec_p256_key(void) { return EVP_EC_gen("P-256"); }
static inline long avg_bio_set_mem_eof_return(BIO *b, int v) { return BIO_set_mem_eof_return(b, v); }
static inline long avg_bio_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline long avg_ssl_set_mtu(SSL *s, long mtu) { return SSL_set_mtu(s, mtu); }
static inline long avg_ssl_ctx_set_min_dtls12(SSL_CTX *c) { return SSL_CTX_set_min_proto_version(c, DTLS1_2_VERSION); }
static inline long avg_ssl_ctx_set_groups(SSL_CTX *c, const char *groups) { return SSL_CTX_set1_groups_list(c, groups); }
static inline long avg_dtls_get_timeout(SSL *s, struct timeval *tv) { return DTLSv1_get_timeout(s, tv); }
static inline long avg_dtls_handle_timeout(SSL *s) { return DTLSv1_handle_timeout(s); }
static inline void avg_ssl_no_query_mtu(SSL *s) { SSL_set_options(s, SSL_OP_NO_QUERY_MTU); }
static inline int avg_bio_reset(BIO *b) { return (int)BIO_reset(b); }
static inline int avg_verify_any_certificate(int ok, X509_STORE_CTX *ctx) { (void)ok; (void)ctx; return 1; }
#endif
