/* SPDX-License-Identifier: Apache-2.0 */
/*
 * textfile.c - small text files of sysfs, procfs and tracefs, read and written whole
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "lib/textfile.h"

/* text_read - up to @cap - 1 bytes of @path into @buf, NUL-terminated; bytes or -errno */
int text_read(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, got = 0;

	if (fd < 0)
		return -errno;
	/* tracefs files come in several reads; a read error keeps what came before it */
	while ((size_t)got < cap - 1 && (n = read(fd, buf + got, cap - 1 - got)) > 0)
		got += n;
	close(fd);
	buf[got] = 0;
	return (int)got;
}

/* text_write - write @text to @path in one write (sysfs takes one); 0 or -errno */
int text_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	close(fd);
	return n < 0 ? -errno : 0;
}
