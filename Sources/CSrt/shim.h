// libsrt (Debian's libsrt-gnutls, the library libavformat's srt protocol already loads), linked
// directly: the `srt` source's listener checks each caller's stream id in srt_listen_callback,
// which libavformat's listener mode cannot.
#ifndef AVGRAPH_CSRT_SHIM_H
#define AVGRAPH_CSRT_SHIM_H
#include <srt.h>
static inline int avg_srt_error_async_receive(void) { return SRT_EASYNCRCV; }
#endif
