// The one place where FFmpeg's C API meets Swift: headers, plus inline functions for the
// macros Swift cannot import (AVERROR, av_err2str, AV_NOPTS_VALUE, ...).
#ifndef AVGRAPH_CFFMPEG_SHIM_H
#define AVGRAPH_CFFMPEG_SHIM_H

#include <errno.h>
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
/* libavdevice is not linked: it pulls ~80 more libraries (SDL, GL, flite, libplacebo, ...) into
   every process, ~17 MB resident, for the one node that uses it. ScreenGrabber loads it on demand;
   only its version comes from the headers, so the library loaded is the one built against. */
#include <libavdevice/version_major.h>
static inline int avg_avdevice_major(void) { return LIBAVDEVICE_VERSION_MAJOR; }
#include <libavutil/avutil.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libavutil/samplefmt.h>
#include <libavutil/buffer.h>
#include <libswscale/swscale.h>
#include <libswresample/swresample.h>

static inline int avg_averror(int posix_errno) { return AVERROR(posix_errno); }
static inline int avg_error_eof(void) { return AVERROR_EOF; }
static inline int avg_error_eagain(void) { return AVERROR(EAGAIN); }
static inline int64_t avg_nopts(void) { return AV_NOPTS_VALUE; }
static inline const char *avg_err2str(int errnum, char *buf, size_t size) {
    return av_make_error_string(buf, size, errnum);
}
static inline void avg_log_quiet(void) { av_log_set_level(AV_LOG_ERROR); }
static inline int avg_pkt_flag_key(void) { return AV_PKT_FLAG_KEY; }
static inline int avg_codec_flag_global_header(void) { return AV_CODEC_FLAG_GLOBAL_HEADER; }
static inline int avg_fmt_nofile(void) { return AVFMT_NOFILE; }
static inline int avg_fmt_globalheader(void) { return AVFMT_GLOBALHEADER; }
static inline int avg_avio_write(void) { return AVIO_FLAG_WRITE; }


// The uid of a unix-socket peer (SO_PEERCRED), without needing _GNU_SOURCE's struct ucred.
#include <sys/socket.h>
#include <sys/types.h>
struct avg_ucred { pid_t pid; uid_t uid; gid_t gid; };
static inline long avg_peer_uid(int fd) {
    struct avg_ucred c;
    socklen_t len = sizeof c;
    if (getsockopt(fd, SOL_SOCKET, 17 /* SO_PEERCRED */, &c, &len) != 0) return -1;
    return (long)c.uid;
}

/* ---- bench group (issue 8): process memory ---- */
#include <sys/prctl.h>
/* x264 asks for transparent huge pages on its big buffers (madvise), which rounds each one up
   to whole 2 MB pages: tens of MB of resident memory a live encoder never touches. */
static inline int avg_disable_transparent_hugepages(void) { return prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0); }

#endif
