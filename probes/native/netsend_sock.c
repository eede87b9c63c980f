// SPDX-License-Identifier: Apache-2.0
/*
 * netsend_sock.c - irqlab-netsend's socket: the destination and the lab's rule
 * (loopback, or a network namespace of our own), UDP or ICMP ping sockets, the
 * kernel's software timestamps, and reading replies and TX stamps into the
 * table (netsend_ring.c, below)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/mring.h"
#include "lib/nstime.h"
#include "netsend_sock.h"

int sock = -1;
struct sockaddr_storage dest_sa;
socklen_t dest_len;
int kernel_ts;
size_t pkt_off;

/* dest_parse - @text as an IPv4 or IPv6 literal into dest_sa; 0 or -EINVAL */
int dest_parse(const char *text)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&dest_sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&dest_sa;

	memset(&dest_sa, 0, sizeof(dest_sa));
	if (inet_pton(AF_INET, text, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons(opt.port);
		dest_len = sizeof(*in4);
		return 0;
	}
	if (inet_pton(AF_INET6, text, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(opt.port);
		dest_len = sizeof(*in6);
		return 0;
	}
	return -EINVAL;
}

/* dest_is_loopback - is the destination 127.0.0.0/8 or ::1? */
static int dest_is_loopback(void)
{
	if (dest_sa.ss_family == AF_INET) {
		u32 a = ntohl(((struct sockaddr_in *)&dest_sa)->sin_addr.s_addr);

		return (a >> 24) == 127;
	}
	return IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&dest_sa)->sin6_addr);
}

/* same_netns - is @other the same network namespace as @self? 1, 0, or -errno */
static int same_netns(const struct stat *self, const char *other)
{
	struct stat st;

	if (stat(other, &st))
		return -errno;
	return st.st_ino == self->st_ino && st.st_dev == self->st_dev;
}

/*
 * own_netns - is this process in a network namespace of its own: not its
 * parent's (irqlab stays in the host's and made this one for the run), and
 * not PID 1's where that can be read (it cannot in some containers)?
 */
static int own_netns(void)
{
	char parent[64];
	struct stat self;
	int same;

	if (stat("/proc/self/ns/net", &self))
		return 0;	/* cannot tell: treat as the host's */
	snprintf(parent, sizeof(parent), "/proc/%d/ns/net", (int)getppid());
	same = same_netns(&self, parent);
	if (same != 0)
		return 0;	/* the parent's, or unknown */
	return same_netns(&self, "/proc/1/ns/net") != 1;
}

/* check_dest - the lab's rule: loopback, or inside our own namespace; 0 or -EPERM */
int check_dest(void)
{
	if (dest_is_loopback()) {
		nb->flags |= NET_B_LOOPBACK;
		return 0;
	}
	if (own_netns()) {
		nb->flags |= NET_B_OWN_NETNS;
		return 0;
	}
	return mr_fail(EPERM, "refusing to send to %s: not a loopback address, and this "
			"process is in the host's network namespace (traffic goes only to "
			"loopback or inside a namespace irqlab created)", opt.dest);
}

/*
 * allow_ping - let every group open ICMP ping sockets in this network namespace
 * (net.ipv4.ping_group_range, per namespace): only ever called inside the namespace
 * irqlab made for the run, which is deleted with it; 0 or -errno
 */
static int allow_ping(void)
{
	static const char range[] = "0 2147483647\n";
	int fd = open("/proc/sys/net/ipv4/ping_group_range", O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, range, sizeof(range) - 1);
	close(fd);
	return n == (ssize_t)sizeof(range) - 1 ? 0 : -EIO;
}

/* icmp_socket - an ICMP echo ("ping") socket for --icmp; the fd or -errno */
static int icmp_socket(void)
{
	int proto = dest_sa.ss_family == AF_INET ? IPPROTO_ICMP : IPPROTO_ICMPV6;
	int fd = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, proto);

	if (fd < 0 && errno == EACCES && own_netns() && !allow_ping())
		fd = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, proto);
	if (fd < 0 && errno == EACCES)
		return mr_fail(EACCES, "ICMP ping sockets are not allowed for this group "
				"(net.ipv4.ping_group_range); irqlab changes that only in a "
				"network namespace of its own (--net tap)");
	if (fd < 0)
		return mr_fail(errno, "ICMP socket: %s", strerror(errno));
	return fd;
}

/* icmp_header - the echo request header in front of packet @seq (checksum and id: the kernel's) */
void icmp_header(u8 *buf, u64 seq)
{
	u16 seq16 = htons((u16)seq);

	memset(buf, 0, pkt_off);
	buf[0] = dest_sa.ss_family == AF_INET ? ICMP_ECHO : 128;	/* ICMP6_ECHO_REQUEST */
	memcpy(buf + 6, &seq16, sizeof(seq16));
}

/*
 * reply_pkt - our packet in the @n bytes of a received datagram at @buf when it is a
 * reply: the responder's flag, or with --icmp an echo reply; else NULL
 */
const struct net_pkt *reply_pkt(const u8 *buf, ssize_t n)
{
	const struct net_pkt *p = (const struct net_pkt *)(buf + pkt_off);
	u8 echo_reply = dest_sa.ss_family == AF_INET ? ICMP_ECHOREPLY : 129;

	if (n < 0 || (size_t)n < pkt_off + sizeof(*p) || p->magic != NET_MAGIC)
		return NULL;
	if (pkt_off)
		return buf[0] == echo_reply ? p : NULL;
	return (p->flags & NET_F_REPLY) ? p : NULL;
}

/* open_socket - UDP (or --icmp: ICMP echo) socket connected to the responder; 0 or -errno */
int open_socket(void)
{
	int rcvbuf = 4 << 20;

	if (opt.icmp) {
		pkt_off = 8;
		nb->flags |= NET_B_ICMP;
		((struct sockaddr_in *)&dest_sa)->sin_port = 0;	/* same offset in sin6 */
		sock = icmp_socket();
		if (sock < 0)
			return sock;
	} else {
		sock = socket(dest_sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (sock < 0)
			return mr_fail(errno, "socket: %s", strerror(errno));
	}
	/* replies of a long hold must not be dropped by a small buffer */
	setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	/* connected: the kernel hands us only the responder's datagrams */
	if (connect(sock, (struct sockaddr *)&dest_sa, dest_len))
		return mr_fail(errno, "connect to %s port %u: %s", opt.dest, opt.port,
				strerror(errno));
	return 0;
}

/* enable_kernel_ts - software TX and RX timestamps on the socket; 0 or -errno */
int enable_kernel_ts(void)
{
	int flags = SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE |
		    SOF_TIMESTAMPING_SOFTWARE;

	if (opt.no_kernel_ts)
		return -EOPNOTSUPP;
	if (setsockopt(sock, SOL_SOCKET, SO_TIMESTAMPING, &flags, sizeof(flags)))
		return -errno;
	kernel_ts = 1;
	nb->flags |= NET_B_KERNEL_TS;
	return 0;
}

/* cmsg_stamp - the software stamp of an SCM_TIMESTAMPING cmsg in @msg, or 0 */
static u64 cmsg_stamp(struct msghdr *msg)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPING) {
			struct scm_timestamping ts;

			memcpy(&ts, CMSG_DATA(c), sizeof(ts));
			return ts_to_ns(&ts.ts[0]);
		}
	}
	return 0;
}

/* find_pkt - our packet inside @len bytes of @buf (a looped-back frame has headers); or NULL */
static struct net_pkt *find_pkt(u8 *buf, size_t len)
{
	u64 magic = NET_MAGIC;

	for (size_t off = 0; off + sizeof(struct net_pkt) <= len; off++)
		if (!memcmp(buf + off, &magic, sizeof(magic)))
			return (struct net_pkt *)(buf + off);
	return NULL;
}

/* drain_errqueue - take the kernel's TX timestamps of sent packets */
void drain_errqueue(void)
{
	static u8 buf[BUF_BYTES], ctrl[CTRL_BYTES];

	if (!kernel_ts)
		return;
	for (;;) {
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr msg = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
		};
		ssize_t n = recvmsg(sock, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);
		struct net_pkt *p;
		struct pending *e;
		u64 stamp;

		if (n < 0)
			return;
		stamp = cmsg_stamp(&msg);
		p = find_pkt(buf, (size_t)n);
		if (!stamp || !p || p->seq == NET_SEQ_HELLO)
			continue;
		e = outstanding(p->seq);
		if (e && !e->tx_kernel_ns)
			e->tx_kernel_ns = stamp;
	}
}

/*
 * recv_reply - receive one reply with @flags (0 blocks up to SO_RCVTIMEO);
 * 1 if one was taken, 0 if none was there or the socket reported an error
 * (ECONNREFUSED and the like: those packets time out)
 */
int recv_reply(int flags)
{
	static u8 buf[BUF_BYTES], ctrl[CTRL_BYTES];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr msg = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctrl, .msg_controllen = sizeof(ctrl),
	};
	ssize_t n = recvmsg(sock, &msg, flags);
	u64 rx_user_ns = monotonic_ns();

	if (n < 0)
		return 0;
	take_reply(reply_pkt(buf, n), rx_user_ns, kernel_ts ? cmsg_stamp(&msg) : 0);
	return 1;
}

/* drain_replies - take every reply already queued */
void drain_replies(void)
{
	while (recv_reply(MSG_DONTWAIT) > 0)
		;
}
