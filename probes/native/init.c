// SPDX-License-Identifier: Apache-2.0
/*
 * init.c - irqlab-init: PID 1 of the Linux-guest initramfs
 *
 * Mounts proc, sysfs and devtmpfs, finds the ivshmem-plain PCI device
 * (1af4:1110), enables it, runs /irqlab-native on its BAR 2
 * (/sys/bus/pci/devices/<bdf>/resource2) with the options given on the
 * kernel command line as irqlab.args=OPT;VALUE;... and ends the VM through
 * isa-debug-exit (0x10 done, 0x11 error) on x86, or a power-off when that port
 * is absent and on arm64 (PSCI SYSTEM_OFF: QEMU exits 0 either way, and the
 * rings' state says done or error). Only set-up and errors reach the console:
 * never samples.
 *
 * Echo mode (`--target net`, irqlab.echo=OPT;VALUE;... on the command line):
 * loads the modules listed in /lib/modules/load-order (the virtio-net driver
 * and what it needs; Debian builds them as modules), gives the first
 * non-loopback interface the address irqlab.net=A.B.C.D/PREFIX, brings it and
 * lo up, and runs /irqlab-echo with those options instead of the probe.
 * With irqlab.disk=OPT;VALUE;... it first starts /irqlab-diskio with those
 * options (the guest-disk load, on the virtio-blk disk) and leaves it running.
 *
 * Guest trace (`--target linux-guest --trace`): when a second ivshmem-plain
 * device sits at the trace slot (PCI 00:10.0), /irqlab-gtrace records the
 * guest kernel's ftrace into it; the probe starts once tracing is on, and
 * gtrace drains its last pages before the VM ends.
 *
 * With irqlab.hog=CPU;PRIO;SPIN_NS;EVERY_NS;DELAY_NS (--load guest-hog) it
 * starts /irqlab-hog with those arguments before the probe and leaves it
 * running: a known SCHED_FIFO preempter inside the guest.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#if defined(__x86_64__)
#include <sys/io.h>
#endif
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/textfile.h"

#define PROBE_PATH		"/irqlab-native"
#define ECHO_PATH		"/irqlab-echo"
#define DISKIO_PATH		"/irqlab-diskio"
#define HOG_PATH		"/irqlab-hog"
#define MODULE_DIR		"/lib/modules"
#define MODULE_ORDER		MODULE_DIR "/load-order"
#define NETDEV_WAIT_MS		10000	/* virtio-net probes asynchronously */
#define GTRACE_PATH		"/irqlab-gtrace"
#define GTRACE_SLOT		"0000:00:10.0"	/* irqlab.trace.guest.TRACE_SLOT */
#define GTRACE_WAIT_MS		10000
#define DEBUG_EXIT_PORT		0xf4
#define EXIT_DONE_VALUE		0x10
#define EXIT_ERROR_VALUE	0x11
#define MAX_ARGS		64
#define CMDLINE_BYTES		4096

/* say - one line on the console */
static void say(const char *msg, const char *detail)
{
	fprintf(stderr, "irqlab-init: %s%s%s\n", msg, detail ? ": " : "", detail ? detail : "");
}

/* end_vm - leave QEMU with @value through isa-debug-exit, else power off */
static void __attribute__((noreturn)) end_vm(int value)
{
	sync();
#if defined(__x86_64__)
	if (ioperm(DEBUG_EXIT_PORT, 4, 1) == 0)
		outl((unsigned int)value, DEBUG_EXIT_PORT);
#else
	(void)value;
#endif
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/* find_ivshmem - path of the ivshmem-plain BAR 2 file into @out, skipping the
 * device at PCI address @skip (the trace region; NULL: none); 0 or -ENODEV */
static int find_ivshmem(char *out, size_t len, const char *skip)
{
	const char *base = "/sys/bus/pci/devices";
	char path[512], vendor[32], device[32];
	struct dirent *e;
	DIR *d = opendir(base);

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (skip && !strcmp(e->d_name, skip)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/vendor", base, e->d_name);
		if (text_read(path, vendor, sizeof(vendor)) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/device", base, e->d_name);
		if (text_read(path, device, sizeof(device)) < 0)
			continue;
		if (strtoul(vendor, NULL, 16) != 0x1af4 || strtoul(device, NULL, 16) != 0x1110)
			continue;
		/* memory decoding on, so BAR accesses reach the shared memory */
		snprintf(path, sizeof(path), "%s/%s/enable", base, e->d_name);
		text_write(path, "1");
		snprintf(out, len, "%s/%s/resource2", base, e->d_name);
		closedir(d);
		return 0;
	}
	closedir(d);
	return -ENODEV;
}

/*
 * probe_args - split @key=A;B;... (key with its '=') from @cmdline into
 * @argv; count
 *
 * ';' and not ',' separates: a value may be a CPU list such as 0,2-3.
 */
static int probe_args(char *cmdline, const char *key, char **argv, int max)
{
	char *p = strstr(cmdline, key);
	int n = 0;

	if (!p)
		return 0;
	p += strlen(key);
	p[strcspn(p, " \n")] = 0;
	for (char *tok = strtok(p, ";"); tok && n < max; tok = strtok(NULL, ";"))
		argv[n++] = tok;
	return n;
}

/* load_modules - finit_module each file named in MODULE_ORDER; 0 or -errno */
static int load_modules(void)
{
	char list[2048], path[256];
	char *save = NULL;
	int err = text_read(MODULE_ORDER, list, sizeof(list));

	if (err < 0)
		return err == -ENOENT ? 0 : err;	/* nothing to load */
	for (char *name = strtok_r(list, "\n", &save); name;
	     name = strtok_r(NULL, "\n", &save)) {
		int fd;

		snprintf(path, sizeof(path), "%s/%s", MODULE_DIR, name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			say("cannot open module", path);
			return -errno;
		}
		if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST) {
			err = -errno;
			close(fd);
			say("cannot load module", path);
			return err;
		}
		close(fd);
	}
	return 0;
}

/* find_netdev - name of the first non-loopback interface into @out; 0 or -ENODEV */
static int find_netdev(char *out, size_t len)
{
	struct timespec nap = { .tv_sec = 0, .tv_nsec = 10000000 };

	for (int waited_ms = 0; waited_ms < NETDEV_WAIT_MS; waited_ms += 10) {
		DIR *d = opendir("/sys/class/net");
		struct dirent *e;

		while (d && (e = readdir(d))) {
			if (e->d_name[0] == '.' || !strcmp(e->d_name, "lo") ||
			    strlen(e->d_name) >= len)
				continue;
			memcpy(out, e->d_name, strlen(e->d_name) + 1);
			closedir(d);
			return 0;
		}
		if (d)
			closedir(d);
		nanosleep(&nap, NULL);
	}
	return -ENODEV;
}

/* if_up - set @addr (network byte order, 0 = none) / @prefix on @name, bring it up; 0 or -errno */
static int if_up(int sock, const char *name, in_addr_t addr, int prefix)
{
	struct ifreq ifr;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (addr) {
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = addr;
		if (ioctl(sock, SIOCSIFADDR, &ifr))
			return -errno;
		sin->sin_addr.s_addr = prefix ? htonl(~0u << (32 - prefix)) : 0;
		if (ioctl(sock, SIOCSIFNETMASK, &ifr))
			return -errno;
	}
	if (ioctl(sock, SIOCGIFFLAGS, &ifr))
		return -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(sock, SIOCSIFFLAGS, &ifr))
		return -errno;
	return 0;
}

/* net_setup - modules, then irqlab.net=A.B.C.D/PREFIX on the NIC; 0 or -errno */
static int net_setup(char *cmdline)
{
	char *p = strstr(cmdline, "irqlab.net="), *slash;
	char dev[IFNAMSIZ + 1], text[32];
	struct in_addr addr;
	int sock, prefix, err;

	if (!p)
		return -EINVAL;
	snprintf(text, sizeof(text), "%s", p + strlen("irqlab.net="));
	text[strcspn(text, " \n")] = 0;
	slash = strchr(text, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	prefix = atoi(slash + 1);
	if (inet_pton(AF_INET, text, &addr) != 1 || prefix < 1 || prefix > 30)
		return -EINVAL;
	err = load_modules();
	if (err)
		return err;
	err = find_netdev(dev, sizeof(dev));
	if (err) {
		say("no network interface appeared", "is the virtio-net driver in the initramfs?");
		return err;
	}
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	err = if_up(sock, "lo", htonl(INADDR_LOOPBACK), 8);
	if (!err)
		err = if_up(sock, dev, addr.s_addr, prefix);
	close(sock);
	if (err)
		say("cannot configure", dev);
	else
		say("network up on", dev);
	return err;
}

/* start_diskio - run DISKIO_PATH with irqlab.disk=... from @cmdline in the background; 0 or -errno */
static int start_diskio(char *cmdline)
{
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	pid_t pid;

	argv[argc++] = DISKIO_PATH;
	argc += probe_args(cmdline, "irqlab.disk=", argv + argc, MAX_ARGS);
	argv[argc] = NULL;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv(DISKIO_PATH, argv);
		say(DISKIO_PATH, strerror(errno));
		_exit(127);
	}
	return 0;
}

/* start_hog - run HOG_PATH with irqlab.hog=... from @cmdline in the background */
static void start_hog(char *cmdline)
{
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	pid_t pid;

	argv[argc++] = HOG_PATH;
	argc += probe_args(cmdline, "irqlab.hog=", argv + argc, MAX_ARGS);
	argv[argc] = NULL;
	pid = fork();
	if (pid == 0) {
		execv(HOG_PATH, argv);
		say(HOG_PATH, strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		say("cannot start the guest hog", strerror(errno));
	else
		say("guest hog started", NULL);
}

/*
 * start_gtrace - when the trace device is there, run GTRACE_PATH on it and wait
 * until its tracing is on; its pid, 0 without the device, -1 when it failed
 */
static pid_t start_gtrace(void)
{
	char bar[256], dev[128], fdtext[16];
	struct pollfd pfd;
	int pipefd[2];
	pid_t pid;
	char byte;

	snprintf(dev, sizeof(dev), "/sys/bus/pci/devices/%s", GTRACE_SLOT);
	if (access(dev, F_OK))
		return 0;
	snprintf(bar, sizeof(bar), "%s/enable", dev);
	text_write(bar, "1");
	snprintf(bar, sizeof(bar), "%s/resource2", dev);
	if (pipe(pipefd))
		return -1;
	pid = fork();
	if (pid == 0) {
		close(pipefd[0]);
		snprintf(fdtext, sizeof(fdtext), "%d", pipefd[1]);
		execl(GTRACE_PATH, GTRACE_PATH, bar, fdtext, (char *)NULL);
		say(GTRACE_PATH, strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pfd.fd = pipefd[0];
	pfd.events = POLLIN;
	if (pid < 0 || poll(&pfd, 1, GTRACE_WAIT_MS) != 1 || read(pipefd[0], &byte, 1) != 1) {
		close(pipefd[0]);
		say("guest tracing did not start", NULL);
		return -1;
	}
	close(pipefd[0]);
	say("guest tracing on", GTRACE_SLOT);
	return pid;
}

/* stop_gtrace - let gtrace drain its last pages (SIGUSR1) and wait for it */
static void stop_gtrace(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGUSR1);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

int main(void)
{
	static char cmdline[CMDLINE_BYTES];
	static char args_copy[CMDLINE_BYTES];
	char shm[512];
	char *argv[MAX_ARGS + 4];
	const char *prog = PROBE_PATH;
	int argc = 0, status, err;
	pid_t pid, gtrace = 0;

	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	if (text_read("/proc/cmdline", cmdline, sizeof(cmdline)) < 0)
		cmdline[0] = 0;
	if (strstr(cmdline, "irqlab.echo=")) {
		/* net_setup and probe_args both cut the string they parse */
		memcpy(args_copy, cmdline, sizeof(cmdline));
		err = net_setup(args_copy);
		if (err) {
			say("network set-up failed", strerror(-err));
			end_vm(EXIT_ERROR_VALUE);
		}
		if (strstr(cmdline, "irqlab.disk=")) {
			static char disk_copy[CMDLINE_BYTES];

			memcpy(disk_copy, cmdline, sizeof(cmdline));
			err = start_diskio(disk_copy);
			if (err)
				say("cannot start the disk load", strerror(-err));
		}
		prog = ECHO_PATH;
		argv[argc++] = ECHO_PATH;
		argc += probe_args(cmdline, "irqlab.echo=", argv + argc, MAX_ARGS);
	} else {
		err = find_ivshmem(shm, sizeof(shm), GTRACE_SLOT);
		if (err) {
			say("no ivshmem-plain device (1af4:1110)", strerror(-err));
			end_vm(EXIT_ERROR_VALUE);
		}
		argv[argc++] = PROBE_PATH;
		argv[argc++] = "--shm";
		argv[argc++] = shm;
		/* tracing first, so the trace sees the hog start; probe_args cuts cmdline */
		gtrace = start_gtrace();
		if (strstr(cmdline, "irqlab.hog=")) {
			static char hog_copy[CMDLINE_BYTES];

			memcpy(hog_copy, cmdline, sizeof(cmdline));
			start_hog(hog_copy);
		}
		argc += probe_args(cmdline, "irqlab.args=", argv + argc, MAX_ARGS);
		say("starting the probe on", shm);
	}
	argv[argc] = NULL;

	pid = fork();
	if (pid == 0) {
		execv(prog, argv);
		say(prog, strerror(errno));
		_exit(127);
	}
	if (pid < 0) {
		say("fork", strerror(errno));
		end_vm(EXIT_ERROR_VALUE);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	stop_gtrace(gtrace);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		end_vm(EXIT_DONE_VALUE);
	say("the probe failed", NULL);
	end_vm(EXIT_ERROR_VALUE);
}
