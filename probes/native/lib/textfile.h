/* SPDX-License-Identifier: Apache-2.0 */
/*
 * textfile.h - small text files of sysfs, procfs and tracefs, read and written whole:
 * shared by the Linux guest's programs (irqlab-init, irqlab-gtrace)
 */
#ifndef IRQLAB_NATIVE_TEXTFILE_H
#define IRQLAB_NATIVE_TEXTFILE_H

#include <stddef.h>

int text_read(const char *path, char *buf, size_t cap);
int text_write(const char *path, const char *text);

#endif /* IRQLAB_NATIVE_TEXTFILE_H */
