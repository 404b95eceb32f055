#ifndef AVGRAPH_CSRTP_SHIM_H
#define AVGRAPH_CSRTP_SHIM_H
/* libsrtp2 (libsrtp2-dev): SRTP and SRTCP for WebRTC, keyed from the DTLS handshake. */
#include <srtp2/srtp.h>
#endif
