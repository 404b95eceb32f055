#ifndef AVGRAPH_COPENSSL_SHIM_H
#define AVGRAPH_COPENSSL_SHIM_H
/* The system's OpenSSL 3 (libssl-dev): STUN's MESSAGE-INTEGRITY (HMAC-SHA1) now, DTLS next. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#endif
