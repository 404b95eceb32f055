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

// UDP with the datagram's destination address (IP_PKTINFO, IPV6_RECVPKTINFO): a receiver bound to
// every address of a host answers from the one each sender used, as the sender expects. The
// control messages' macros are C's alone.
#include <netinet/in.h>
#include <sys/socket.h>
#include <string.h>
static inline int avg_udp_want_destination(int fd, int family) {
    int on = 1;
    return family == AF_INET6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on)
                              : setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on);
}
// RFC 3542's in6_pktinfo: glibc declares it only under _GNU_SOURCE, which must not be defined here
// (it changes system structs, which other modules import without it).
struct avg_in6_pktinfo { struct in6_addr ipi6_addr; unsigned int ipi6_ifindex; };
// `destination`: 4 or 16 bytes of the address the datagram was sent to (its length in *destination_length, 0 when unknown).
static inline long avg_udp_receive(int fd, void *buffer, size_t length, struct sockaddr_storage *from, socklen_t *from_length,
                                   unsigned char *destination, int *destination_length) {
    struct iovec io = { buffer, length };
    char control[128];
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_name = from; m.msg_namelen = *from_length; m.msg_iov = &io; m.msg_iovlen = 1;
    m.msg_control = control; m.msg_controllen = sizeof control;
    long n = recvmsg(fd, &m, MSG_DONTWAIT);
    *from_length = m.msg_namelen;
    *destination_length = 0;
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo info; memcpy(&info, CMSG_DATA(c), sizeof info);
            memcpy(destination, &info.ipi_addr, 4); *destination_length = 4;
        } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
            struct avg_in6_pktinfo info; memcpy(&info, CMSG_DATA(c), sizeof info);
            memcpy(destination, &info.ipi6_addr, 16); *destination_length = 16;
        }
    }
    return n;
}
// Sends from `source` (4 or 16 bytes; 0: the system's choice).
static inline long avg_udp_send_from(int fd, const void *buffer, size_t length, const struct sockaddr *to, socklen_t to_length,
                                     const unsigned char *source, int source_length) {
    struct iovec io = { (void *)buffer, length };
    char control[128];
    struct msghdr m;
    memset(&m, 0, sizeof m);
    memset(control, 0, sizeof control);
    m.msg_name = (void *)to; m.msg_namelen = to_length; m.msg_iov = &io; m.msg_iovlen = 1;
    if (source_length == 4 && to->sa_family == AF_INET) {
        m.msg_control = control; m.msg_controllen = CMSG_SPACE(sizeof(struct in_pktinfo));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = IPPROTO_IP; c->cmsg_type = IP_PKTINFO; c->cmsg_len = CMSG_LEN(sizeof(struct in_pktinfo));
        struct in_pktinfo info; memset(&info, 0, sizeof info); memcpy(&info.ipi_spec_dst, source, 4);
        memcpy(CMSG_DATA(c), &info, sizeof info);
    } else if (source_length == 16 && to->sa_family == AF_INET6) {
        m.msg_control = control; m.msg_controllen = CMSG_SPACE(sizeof(struct avg_in6_pktinfo));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = IPPROTO_IPV6; c->cmsg_type = IPV6_PKTINFO; c->cmsg_len = CMSG_LEN(sizeof(struct avg_in6_pktinfo));
        struct avg_in6_pktinfo info; memset(&info, 0, sizeof info); memcpy(&info.ipi6_addr, source, 16);
        memcpy(CMSG_DATA(c), &info, sizeof info);
    }
    return sendmsg(fd, &m, 0);
}
#endif
