// SPDX-License-Identifier: Apache-2.0
/*
 * init.c - irqlab-init: PID 1 of the Linux-guest initramfs
 *
 * Mounts proc, sysfs and devtmpfs, finds the ivshmem-plain PCI device
 * (1af4:1110), enables it, runs /irqlab-native on its BAR 2
 * (/sys/bus/pci/devices/<bdf>/resource2) with the options given on the
 * kernel command line as irqlab.args=OPT;VALUE;... and ends the VM through
 * isa-debug-exit (0x10 done, 0x11 error), or a power-off when that port is
 * absent. Only set-up and errors reach the console: never samples.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROBE_PATH		"/irqlab-native"
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
	if (ioperm(DEBUG_EXIT_PORT, 4, 1) == 0)
		outl((unsigned int)value, DEBUG_EXIT_PORT);
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

/* read_small - read a small sysfs/proc file into @buf; 0 or -errno */
static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

/* write_small - write @text to a sysfs file; 0 or -errno */
static int write_small(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -errno : 0;
}

/* find_ivshmem - path of the ivshmem-plain BAR 2 file into @out; 0 or -ENODEV */
static int find_ivshmem(char *out, size_t len)
{
	const char *base = "/sys/bus/pci/devices";
	char path[512], vendor[32], device[32];
	struct dirent *e;
	DIR *d = opendir(base);

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/vendor", base, e->d_name);
		if (read_small(path, vendor, sizeof(vendor)))
			continue;
		snprintf(path, sizeof(path), "%s/%s/device", base, e->d_name);
		if (read_small(path, device, sizeof(device)))
			continue;
		if (strtoul(vendor, NULL, 16) != 0x1af4 || strtoul(device, NULL, 16) != 0x1110)
			continue;
		/* memory decoding on, so BAR accesses reach the shared memory */
		snprintf(path, sizeof(path), "%s/%s/enable", base, e->d_name);
		write_small(path, "1");
		snprintf(out, len, "%s/%s/resource2", base, e->d_name);
		closedir(d);
		return 0;
	}
	closedir(d);
	return -ENODEV;
}

/*
 * probe_args - split irqlab.args=A;B;... from @cmdline into @argv; count
 *
 * ';' and not ',' separates: a value may be a CPU list such as 0,2-3.
 */
static int probe_args(char *cmdline, char **argv, int max)
{
	char *p = strstr(cmdline, "irqlab.args=");
	int n = 0;

	if (!p)
		return 0;
	p += strlen("irqlab.args=");
	p[strcspn(p, " \n")] = 0;
	for (char *tok = strtok(p, ";"); tok && n < max; tok = strtok(NULL, ";"))
		argv[n++] = tok;
	return n;
}

int main(void)
{
	static char cmdline[CMDLINE_BYTES];
	char shm[512];
	char *argv[MAX_ARGS + 4];
	int argc = 0, status, err;
	pid_t pid;

	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	if (read_small("/proc/cmdline", cmdline, sizeof(cmdline)))
		cmdline[0] = 0;
	err = find_ivshmem(shm, sizeof(shm));
	if (err) {
		say("no ivshmem-plain device (1af4:1110)", strerror(-err));
		end_vm(EXIT_ERROR_VALUE);
	}
	argv[argc++] = PROBE_PATH;
	argv[argc++] = "--shm";
	argv[argc++] = shm;
	argc += probe_args(cmdline, argv + argc, MAX_ARGS);
	argv[argc] = NULL;
	say("starting the probe on", shm);

	pid = fork();
	if (pid == 0) {
		execv(PROBE_PATH, argv);
		say("cannot run " PROBE_PATH, strerror(errno));
		_exit(127);
	}
	if (pid < 0) {
		say("fork", strerror(errno));
		end_vm(EXIT_ERROR_VALUE);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		end_vm(EXIT_DONE_VALUE);
	say("the probe failed", NULL);
	end_vm(EXIT_ERROR_VALUE);
}
