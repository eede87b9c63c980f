// SPDX-License-Identifier: Apache-2.0
/* cmdline.c - split a boot command line into key=value words */
#include "cmdline.h"

/* is_space - true for word separators */
static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * cmdline_next - parse the next word at *@pos into @w and advance *@pos
 *
 * Returns 1 when a word was parsed, 0 at the end of the line, -ENOSPC when
 * the key or value is too long (the word is skipped).
 */
int cmdline_next(const char **pos, struct cmdline_word *w)
{
	const char *p = *pos;
	size_t k = 0, v = 0;
	bool too_long = false;

	while (*p && is_space(*p))
		p++;
	if (!*p) {
		*pos = p;
		return 0;
	}
	w->has_value = false;
	while (*p && !is_space(*p) && *p != '=') {
		if (k + 1 < sizeof(w->key))
			w->key[k++] = *p;
		else
			too_long = true;
		p++;
	}
	if (*p == '=') {
		w->has_value = true;
		p++;
		while (*p && !is_space(*p)) {
			if (v + 1 < sizeof(w->val))
				w->val[v++] = *p;
			else
				too_long = true;
			p++;
		}
	}
	w->key[k] = '\0';
	w->val[v] = '\0';
	*pos = p;
	return too_long ? -ENOSPC : 1;
}
