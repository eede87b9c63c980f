/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cmdline.h - split a boot command line into key=value words
 *
 * Words are separated by spaces/tabs/newlines. A word without '=' is
 * returned with an empty value and has_value == false so the caller can
 * reject it.
 */
#ifndef IRQLAB_CMDLINE_H
#define IRQLAB_CMDLINE_H

#include "types.h"

#define CMDLINE_KEY_MAX		32
#define CMDLINE_VAL_MAX		64

struct cmdline_word {
	char key[CMDLINE_KEY_MAX];
	char val[CMDLINE_VAL_MAX];
	bool has_value;
};

int cmdline_next(const char **pos, struct cmdline_word *w);

#endif /* IRQLAB_CMDLINE_H */
