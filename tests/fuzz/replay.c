/* replay.c - a plain main() for the fuzz targets: runs LLVMFuzzerTestOneInput
 * over every file named on the command line and every regular file in the
 * directories named (sorted, dot-files skipped). Prints one line per input
 * with -v. Exit status 0 when every input ran (a crash ends the process). */
#include "fuzz.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLAY_CAP (64u << 20)

static int verbose;

static int run_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > REPLAY_CAP) {
		fprintf(stderr, "replay: %s: cannot read (or too large)\n", path);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	size_t n = (size_t)st.st_size, got = 0;
	uint8_t *d = malloc(n ? n : 1);
	if (!d) {
		close(fd);
		return 1;
	}
	while (got < n) {
		ssize_t r = read(fd, d + got, n - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (got != n) {
		free(d);
		fprintf(stderr, "replay: %s: short read\n", path);
		return 1;
	}
	if (verbose)
		fprintf(stderr, "replay: %s\n", path);
	LLVMFuzzerTestOneInput(d, n);
	free(d);
	return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_dir(const char *dir, int *count)
{
	DIR *dd = opendir(dir);
	if (!dd) {
		fprintf(stderr, "replay: %s: cannot open directory\n", dir);
		return 1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dd))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof *names);
			if (!nn)
				abort();
			names = nn;
		}
		size_t l = strlen(dir) + strlen(e->d_name) + 2;
		if (!(names[n] = malloc(l)))
			abort();
		snprintf(names[n], l, "%s/%s", dir, e->d_name);
		n++;
	}
	closedir(dd);
	qsort(names, n, sizeof *names, cmp_str);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			rc |= run_file(names[i]);
			(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	int rc = 0, count = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (strcmp(argv[i], "-v") == 0) {
			verbose = 1;
			continue;
		}
		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			rc |= run_dir(argv[i], &count);
		} else {
			rc |= run_file(argv[i]);
			count++;
		}
	}
	printf("replayed %d inputs\n", count);
	return rc;
}
