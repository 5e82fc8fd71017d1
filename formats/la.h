/* la.h - libarchive, loaded the first time an archive is read or written.
 *
 * Most runs never touch an archive, and loading libarchive with what it links (libxml2, ICU,
 * libstdc++, nettle, ...) cost about a third of every program's start-up. So the programs do
 * not link it: archive_read.c and archive_write.c include this header after <archive.h>, which
 * turns each libarchive call they make into a call through a table that qtk_la_load() fills
 * with dlsym() from the system's shared libarchive (the soname the build found). Calls are made
 * only on objects from archive_{read,write}_new, each preceded by qtk_la_load(). */
#ifndef QTK_LA_H
#define QTK_LA_H

#include <archive.h>
#include <archive_entry.h>

#define QTK_LA_SYMS(X) \
	X(archive_entry_filetype) X(archive_entry_free) X(archive_entry_hardlink) \
	X(archive_entry_mode) X(archive_entry_new) X(archive_entry_pathname) \
	X(archive_entry_set_filetype) X(archive_entry_set_gid) X(archive_entry_set_mtime) \
	X(archive_entry_set_pathname) X(archive_entry_set_perm) X(archive_entry_set_size) \
	X(archive_entry_set_uid) X(archive_entry_size) X(archive_entry_size_is_set) \
	X(archive_entry_sparse_count) X(archive_error_string) X(archive_filter_bytes) \
	X(archive_filter_code) X(archive_filter_count) X(archive_filter_name) \
	X(archive_read_data) X(archive_read_data_block) X(archive_read_free) X(archive_read_new) \
	X(archive_read_next_header) X(archive_read_open_fd) X(archive_read_support_filter_gzip) \
	X(archive_read_support_filter_zstd) X(archive_read_support_format_raw) \
	X(archive_read_support_format_tar) X(archive_read_support_format_zip_seekable) \
	X(archive_write_close) X(archive_write_data) X(archive_write_free) X(archive_write_header) \
	X(archive_write_new) X(archive_write_open) X(archive_write_set_bytes_in_last_block) \
	X(archive_write_set_format_pax_restricted) X(archive_write_set_format_zip) \
	X(archive_write_zip_set_compression_deflate) X(archive_write_zip_set_compression_store)

typedef struct qtk_la_api {
#define QTK_LA_PTR(f) __typeof__(f) *f;
	QTK_LA_SYMS(QTK_LA_PTR)
#undef QTK_LA_PTR
} qtk_la_api;

extern qtk_la_api qtk_la;

/* Load libarchive once (thread-safe). 0, or -1 with the reason in qtk_la_error(). */
int qtk_la_load(void);
const char *qtk_la_error(void);

#ifndef QTK_LA_IMPL
#define archive_entry_filetype (*qtk_la.archive_entry_filetype)
#define archive_entry_free (*qtk_la.archive_entry_free)
#define archive_entry_hardlink (*qtk_la.archive_entry_hardlink)
#define archive_entry_mode (*qtk_la.archive_entry_mode)
#define archive_entry_new (*qtk_la.archive_entry_new)
#define archive_entry_pathname (*qtk_la.archive_entry_pathname)
#define archive_entry_set_filetype (*qtk_la.archive_entry_set_filetype)
#define archive_entry_set_gid (*qtk_la.archive_entry_set_gid)
#define archive_entry_set_mtime (*qtk_la.archive_entry_set_mtime)
#define archive_entry_set_pathname (*qtk_la.archive_entry_set_pathname)
#define archive_entry_set_perm (*qtk_la.archive_entry_set_perm)
#define archive_entry_set_size (*qtk_la.archive_entry_set_size)
#define archive_entry_set_uid (*qtk_la.archive_entry_set_uid)
#define archive_entry_size (*qtk_la.archive_entry_size)
#define archive_entry_size_is_set (*qtk_la.archive_entry_size_is_set)
#define archive_entry_sparse_count (*qtk_la.archive_entry_sparse_count)
#define archive_error_string (*qtk_la.archive_error_string)
#define archive_filter_bytes (*qtk_la.archive_filter_bytes)
#define archive_filter_code (*qtk_la.archive_filter_code)
#define archive_filter_count (*qtk_la.archive_filter_count)
#define archive_filter_name (*qtk_la.archive_filter_name)
#define archive_read_data (*qtk_la.archive_read_data)
#define archive_read_data_block (*qtk_la.archive_read_data_block)
#define archive_read_free (*qtk_la.archive_read_free)
#define archive_read_new (*qtk_la.archive_read_new)
#define archive_read_next_header (*qtk_la.archive_read_next_header)
#define archive_read_open_fd (*qtk_la.archive_read_open_fd)
#define archive_read_support_filter_gzip (*qtk_la.archive_read_support_filter_gzip)
#define archive_read_support_filter_zstd (*qtk_la.archive_read_support_filter_zstd)
#define archive_read_support_format_raw (*qtk_la.archive_read_support_format_raw)
#define archive_read_support_format_tar (*qtk_la.archive_read_support_format_tar)
#define archive_read_support_format_zip_seekable (*qtk_la.archive_read_support_format_zip_seekable)
#define archive_write_close (*qtk_la.archive_write_close)
#define archive_write_data (*qtk_la.archive_write_data)
#define archive_write_free (*qtk_la.archive_write_free)
#define archive_write_header (*qtk_la.archive_write_header)
#define archive_write_new (*qtk_la.archive_write_new)
#define archive_write_open (*qtk_la.archive_write_open)
#define archive_write_set_bytes_in_last_block (*qtk_la.archive_write_set_bytes_in_last_block)
#define archive_write_set_format_pax_restricted (*qtk_la.archive_write_set_format_pax_restricted)
#define archive_write_set_format_zip (*qtk_la.archive_write_set_format_zip)
#define archive_write_zip_set_compression_deflate (*qtk_la.archive_write_zip_set_compression_deflate)
#define archive_write_zip_set_compression_store (*qtk_la.archive_write_zip_set_compression_store)
#endif

#endif
