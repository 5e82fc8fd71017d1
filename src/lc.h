/* lc.h - libcrypto, loaded the first time a digest or key is needed.
 *
 * Loading libcrypto at start-up (4.5 MB, ~4,000 relocations) cost ~1.8 ms of every program's
 * start here, a third of `qinspect --help` and a fifth of a header-only `qinspect --json`, which
 * hash nothing. So the programs do not link it: each file that calls libcrypto includes this
 * header after the OpenSSL headers, which turns those calls into calls through a table that
 * qtk_lc() fills with dlsym() from the system's libcrypto (the soname the build found) the
 * first time any of them is made. Where libcrypto cannot be loaded the process stops with a
 * message naming it and status 127, what the dynamic loader does for a missing library of a
 * program that links it. Tests that call libcrypto themselves link it. */
#ifndef QTK_LC_H
#define QTK_LC_H

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#define QTK_LC_SYMS(X)                                                                             \
	X(BIO_ctrl) X(BIO_free) X(BIO_new) X(BIO_new_mem_buf) X(BIO_s_mem) X(EVP_Digest)               \
	X(EVP_DigestFinal_ex) X(EVP_DigestInit_ex) X(EVP_DigestSign) X(EVP_DigestSignInit)            \
	X(EVP_DigestUpdate) X(EVP_DigestVerify) X(EVP_DigestVerifyInit) X(EVP_MD_CTX_copy_ex)         \
	X(EVP_MD_CTX_free)                                                                         \
	X(EVP_MD_CTX_new) X(EVP_PKEY_free) X(EVP_PKEY_get0_type_name) X(EVP_PKEY_get_base_id)         \
	X(EVP_PKEY_get_utf8_string_param) X(EVP_sha256) X(EVP_sha384) X(EVP_sha512)                   \
	X(PEM_read_bio_PUBKEY) X(PEM_read_bio_PrivateKey) X(PEM_write_bio_PUBKEY)

typedef struct qtk_lc_api {
#define QTK_LC_PTR(f) __typeof__(f) *f;
	QTK_LC_SYMS(QTK_LC_PTR)
#undef QTK_LC_PTR
} qtk_lc_api;

/* The table, loaded on the first call (thread-safe). */
const qtk_lc_api *qtk_lc(void);

#ifndef QTK_LC_IMPL
#define BIO_ctrl (*qtk_lc()->BIO_ctrl)
#define BIO_free (*qtk_lc()->BIO_free)
#define BIO_new (*qtk_lc()->BIO_new)
#define BIO_new_mem_buf (*qtk_lc()->BIO_new_mem_buf)
#define BIO_s_mem (*qtk_lc()->BIO_s_mem)
#define EVP_Digest (*qtk_lc()->EVP_Digest)
#define EVP_DigestFinal_ex (*qtk_lc()->EVP_DigestFinal_ex)
#define EVP_DigestInit_ex (*qtk_lc()->EVP_DigestInit_ex)
#define EVP_DigestSign (*qtk_lc()->EVP_DigestSign)
#define EVP_DigestSignInit (*qtk_lc()->EVP_DigestSignInit)
#define EVP_DigestUpdate (*qtk_lc()->EVP_DigestUpdate)
#define EVP_DigestVerify (*qtk_lc()->EVP_DigestVerify)
#define EVP_DigestVerifyInit (*qtk_lc()->EVP_DigestVerifyInit)
#define EVP_MD_CTX_copy_ex (*qtk_lc()->EVP_MD_CTX_copy_ex)
#define EVP_MD_CTX_free (*qtk_lc()->EVP_MD_CTX_free)
#define EVP_MD_CTX_new (*qtk_lc()->EVP_MD_CTX_new)
#define EVP_PKEY_free (*qtk_lc()->EVP_PKEY_free)
#define EVP_PKEY_get0_type_name (*qtk_lc()->EVP_PKEY_get0_type_name)
#define EVP_PKEY_get_base_id (*qtk_lc()->EVP_PKEY_get_base_id)
#define EVP_PKEY_get_utf8_string_param (*qtk_lc()->EVP_PKEY_get_utf8_string_param)
#define EVP_sha256 (*qtk_lc()->EVP_sha256)
#define EVP_sha384 (*qtk_lc()->EVP_sha384)
#define EVP_sha512 (*qtk_lc()->EVP_sha512)
#define PEM_read_bio_PUBKEY (*qtk_lc()->PEM_read_bio_PUBKEY)
#define PEM_read_bio_PrivateKey (*qtk_lc()->PEM_read_bio_PrivateKey)
#define PEM_write_bio_PUBKEY (*qtk_lc()->PEM_write_bio_PUBKEY)
#endif
#endif
