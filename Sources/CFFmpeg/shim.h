// The one place where FFmpeg's C API meets Swift: headers, plus inline functions for the
// macros Swift cannot import (AVERROR, av_err2str, AV_NOPTS_VALUE, ...).
#ifndef AVGRAPH_CFFMPEG_SHIM_H
#define AVGRAPH_CFFMPEG_SHIM_H

#include <errno.h>
#include <string.h>
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
#include <libavutil/hmac.h>
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
static inline int avg_pkt_flag_corrupt(void) { return AV_PKT_FLAG_CORRUPT; }
static inline int avg_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int avg_codec_flag_global_header(void) { return AV_CODEC_FLAG_GLOBAL_HEADER; }
static inline int avg_codec_flag_low_delay(void) { return AV_CODEC_FLAG_LOW_DELAY; }
static inline int avg_fmt_nofile(void) { return AVFMT_NOFILE; }
static inline int avg_fmt_globalheader(void) { return AVFMT_GLOBALHEADER; }
static inline int avg_avio_write(void) { return AVIO_FLAG_WRITE; }
static inline int avg_avio_read_write(void) { return AVIO_FLAG_READ_WRITE; }


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
// Names the calling thread (the kernel keeps 15 bytes): what top, perf and /proc/PID/task/*/comm show.
static inline void avg_name_this_thread(const char *name) { prctl(PR_SET_NAME, name, 0, 0, 0); }

/* ---- recording group (issue 14): a mapped input that shrinks must not kill the process ----
   Touching a page of a file mapping past the file's end raises SIGBUS, on whichever thread reads
   the picture (a scaler, an encoder). Guarded mappings answer it by laying zero pages over the
   rest of the mapping (the access is retried and reads zeros) and marking the mapping, whose
   owner then stops with an error. Other SIGBUS go to the previous handler or kill as before.
   Used from one module only (RawvideoNode), so this state has one copy. */
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>
#define AVG_GUARDED_MAPPINGS 64
struct avg_guarded_mapping { char *volatile base; volatile size_t length; volatile int hit; };
struct avg_sigbus_state {
    struct avg_guarded_mapping mappings[AVG_GUARDED_MAPPINGS];
    struct sigaction previous;
    volatile int installed;
    volatile long page;
};
/* Swift emits a header's functions but not its globals: the state lives in a function. */
static inline struct avg_sigbus_state *avg_sigbus(void) { static struct avg_sigbus_state state; return &state; }

static inline void avg_sigbus_handler(int sig, siginfo_t *info, void *context) {
    char *addr = (char *)info->si_addr;
    for (int i = 0; i < AVG_GUARDED_MAPPINGS; i++) {
        char *base = avg_sigbus()->mappings[i].base;
        size_t length = avg_sigbus()->mappings[i].length;
        if (base && length && addr >= base && addr < base + length) {
            char *from = (char *)((uintptr_t)addr & ~(uintptr_t)(avg_sigbus()->page - 1));
            mmap(from, (size_t)(base + length - from), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
            avg_sigbus()->mappings[i].hit = 1;
            return;
        }
    }
    if (avg_sigbus()->previous.sa_flags & SA_SIGINFO) {
        if (avg_sigbus()->previous.sa_sigaction) { avg_sigbus()->previous.sa_sigaction(sig, info, context); return; }
    } else if (avg_sigbus()->previous.sa_handler != SIG_DFL && avg_sigbus()->previous.sa_handler != SIG_IGN) {
        avg_sigbus()->previous.sa_handler(sig);
        return;
    }
    /* Returning retries the access, which now ends the process as it would have. */
    signal(SIGBUS, SIG_DFL);
}

/* Guards [base, base+length); returns a slot for avg_mapping_hit/avg_mapping_unguard, or -1. */
static inline int avg_mapping_guard(void *base, size_t length) {
    if (__sync_bool_compare_and_swap(&avg_sigbus()->installed, 0, 1)) {
        avg_sigbus()->page = sysconf(_SC_PAGESIZE);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = avg_sigbus_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &avg_sigbus()->previous);
    }
    for (int i = 0; i < AVG_GUARDED_MAPPINGS; i++) {
        if (__sync_bool_compare_and_swap(&avg_sigbus()->mappings[i].base, (char *)0, (char *)base)) {
            avg_sigbus()->mappings[i].hit = 0;
            avg_sigbus()->mappings[i].length = length;
            return i;
        }
    }
    return -1;
}
static inline int avg_mapping_hit(int slot) { return slot >= 0 && avg_sigbus()->mappings[slot].hit; }
static inline void avg_mapping_unguard(int slot) {
    if (slot < 0) return;
    avg_sigbus()->mappings[slot].length = 0;
    avg_sigbus()->mappings[slot].base = 0;
}

#endif
