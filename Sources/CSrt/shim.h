// libsrt (Debian's libsrt-gnutls, the library libavformat's srt protocol already loads), linked
// directly: the `srt` source's listener checks each caller's stream id in srt_listen_callback,
// which libavformat's listener mode cannot.
#ifndef AVGRAPH_CSRT_SHIM_H
#define AVGRAPH_CSRT_SHIM_H
#include <srt.h>
#include <access_control.h>
static inline int avg_srt_error_async_receive(void) { return SRT_EASYNCRCV; }
// What a blocking send that waited SRTO_SNDTIMEO returns (the send buffer stayed full).
static inline int avg_srt_error_async_send(void) { return SRT_EASYNCSND; }
// Rejection reasons a listener gives a caller (libsrt's access-control codes).
static inline int avg_srt_reject_unauthorized(void) { return SRT_REJX_UNAUTHORIZED; }
static inline int avg_srt_reject_bad_mode(void) { return SRT_REJX_BAD_MODE; }
static inline int avg_srt_reject_conflict(void) { return SRT_REJX_CONFLICT; }
#endif
