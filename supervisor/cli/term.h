/* Output that fits the terminal, as ps, systemctl and lsblk do it: when
 * a stream is a terminal, a table's lines are cut to its width (the last
 * column ellipsized) and a progress line never wraps; full lines when it
 * is not a terminal, or with --full. */
#ifndef MV_TERM_H
#define MV_TERM_H

#include <stdbool.h>
#include <stdio.h>

/* The columns output to fd may take: 0 (no limit) when fd is not a
 * terminal; else $COLUMNS when it is a positive number, else the
 * terminal's width (TIOCGWINSZ), else 80. */
int term_width(int fd);

/* Write s (one line, no newline) to f, at most width columns (0: all of
 * it); a line cut short ends with an ellipsis ("…" in a UTF-8 locale,
 * "~" otherwise). Columns are counted in characters. */
void term_put(FILE *f, const char *s, int width);

/* Between term_cut_begin and term_cut_end, what is printed on stdout is
 * held, then written with every line cut to width (0: nothing is done). */
struct term_cut {
	int width;
	FILE *saved, *mem;
	char *buf;
	size_t len;
};
void term_cut_begin(struct term_cut *t, int width);
void term_cut_end(struct term_cut *t);

#endif
