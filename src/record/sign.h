/* sign.h - model signatures in the OpenSSF model signing format (docs/provenance.md, section 5).
 *
 * A signature is a Sigstore bundle v0.3 (JSON) carrying public-key verification material
 * (publicKey.hint = hex SHA-256 of the key's SubjectPublicKeyInfo PEM) and a DSSE envelope
 * whose payload is an in-toto Statement v1 with predicate type
 * https://model_signing/signature/v1.0: the model's files (or shards of files) with their
 * SHA-256, the subject's digest being SHA-256 over those digests in order. qtk adds
 * predicate.qtk_record (a deployment record: per-tensor content digests, roots, metadata
 * digests, the embedded record); model_signing's verifier reads only "serialization" and
 * "resources" and ignores other predicate fields.
 *
 * The DSSE signature is over PAE(payloadType, payload) =
 *   "DSSEv1" SP len(type) SP type SP len(payload) SP payload   (lengths in ASCII decimal).
 * Keys: Ed25519, ECDSA P-256 (SHA-256), P-384 (SHA-384), P-521 (SHA-512), PEM.
 */
#ifndef QTK_SIGN_H
#define QTK_SIGN_H
#include "qtk_util.h"
#include <cJSON.h>

#define QTK_SIG_BUNDLE_MEDIA "application/vnd.dev.sigstore.bundle.v0.3+json"
#define QTK_SIG_PAYLOAD_TYPE "application/vnd.in-toto+json"
#define QTK_SIG_STATEMENT "https://in-toto.io/Statement/v1"
#define QTK_SIG_PREDICATE "https://model_signing/signature/v1.0"
#define QTK_SIG_FILE "model.sig"
/* Caps: the bundle file (a qtk_record of a large model is tens of MiB, base64 adds a third),
 * a key file, a signature value. */
#define QTK_SIG_CAP (160u << 20)
#define QTK_SIG_KEY_CAP (64u << 10)
#define QTK_SIG_MAX_SIG 1024u

/* One resource: a file ("path", or "." for a model that is one file) or a shard
 * ("path:start:end") and its digest. */
typedef struct qtk_sig_item {
	char *name;
	char *alg;            /* "sha256" or "sha256-sharded-<shard_size>" */
	uint8_t digest[32];
} qtk_sig_item;

typedef struct qtk_sig_manifest {
	char *model_name;     /* subject name (informative) */
	uint8_t root[32];     /* subject digest: SHA-256 over the items' digests in order */
	bool shards;          /* serialization "shards" (else "files") */
	uint64_t shard_size;
	bool allow_symlinks;
	size_t nignore;
	char **ignore;        /* serialization.ignore_paths, relative to the model */
	size_t n;
	qtk_sig_item *it;     /* sorted as model_signing sorts (path components, then offsets) */
	cJSON *qtk_record;    /* predicate.qtk_record (validated as a provenance record), or NULL */
} qtk_sig_manifest;

void qtk_sig_manifest_free(qtk_sig_manifest *m);

/* The parts of a bundle: payload and signature (decoded), the key hint. */
typedef struct qtk_sig_bundle {
	uint8_t *payload;
	size_t npayload;
	uint8_t *sig;
	size_t nsig;
	char hint[65];        /* "" when the bundle has none */
} qtk_sig_bundle;

void qtk_sig_bundle_free(qtk_sig_bundle *b);

/* Read a bundle strictly: JSON, mediaType v0.3, public-key verification material only,
 * dsseEnvelope with payloadType application/vnd.in-toto+json, one signature, strict base64.
 * QTK_E_DATA naming the field. */
int qtk_sig_bundle_parse(const uint8_t *buf, size_t n, const char *file, qtk_sig_bundle *out, qtk_err *err);

/* Read the Statement (the payload, after the signature checked out): _type, one subject,
 * predicate type v1.0, serialization (sha256 files or shards), resources (each once, digests
 * 64 hex), the subject digest equal to the digest over the resources, and qtk_record when
 * present. QTK_E_DATA naming the field. */
int qtk_sig_statement_parse(const uint8_t *p, size_t n, const char *file, qtk_sig_manifest *out, qtk_err *err);

/* Render the Statement for m (sorted items, root computed here) with qtk_record (may be NULL;
 * a parsed record, or a raw item holding a record's canonical text): canonical JSON text
 * (qtk_free). */
int qtk_sig_statement(qtk_sig_manifest *m, const cJSON *qtk_record, char **json, qtk_err *err);

/* The bundle for a signed payload, its JSON text handed to put a piece at a time (the payload's
 * base64 in pieces of 16 KB): 0, or put's error (its message set by put), or QTK_E_IO out of
 * memory (err set). */
int qtk_sig_bundle_write(const uint8_t *payload, size_t n, const uint8_t *sig, size_t nsig, const char *hint,
			 int (*put)(void *ctx, const uint8_t *p, size_t n), void *ctx, qtk_err *err);

/* PAE(QTK_SIG_PAYLOAD_TYPE, payload): a new buffer (qtk_free). */
int qtk_sig_pae(const uint8_t *payload, size_t n, uint8_t **out, size_t *outn);
/* PAE's header for a payload of n bytes (the message is the header, then the payload), written
 * into head; its length (less than QTK_SIG_PAE_HEAD): for a message made in place, the payload
 * written behind room for the header. */
#define QTK_SIG_PAE_HEAD 128
int qtk_sig_pae_head(size_t n, char head[QTK_SIG_PAE_HEAD]);

/* Keys (an EVP_PKEY, opaque here). Load a PEM private key (signing) or a public key (a
 * private key is accepted too: its public half is used). QTK_E_DATA for an unreadable,
 * encrypted or unsupported key (naming its type), QTK_E_IO when the file cannot be read. */
typedef struct qtk_sig_key qtk_sig_key;
int qtk_sig_key_load(const char *path, bool private_key, qtk_sig_key **out, qtk_err *err);
void qtk_sig_key_free(qtk_sig_key *k);
/* "Ed25519", "ECDSA P-256" ... */
const char *qtk_sig_key_kind(const qtk_sig_key *k);
/* Hex SHA-256 of the public key as SubjectPublicKeyInfo PEM (the bundle's publicKey.hint). */
int qtk_sig_key_hint(const qtk_sig_key *k, char hex[65]);
/* Sign / verify msg (ECDSA: DER signature over the curve's hash; Ed25519: pure). verify
 * returns 0 when valid, 1 when not. */
int qtk_sig_sign(const qtk_sig_key *k, const uint8_t *msg, size_t n, uint8_t **sig, size_t *nsig, qtk_err *err);
int qtk_sig_verify(const qtk_sig_key *k, const uint8_t *msg, size_t n, const uint8_t *sig, size_t nsig);

/* The resources of a model the way model_signing serializes it. root: the model path (a
 * directory or a file). rel: names relative to root's directory ("." = root itself), or NULL
 * to walk root (a directory) recursively, leaving out m->ignore (matched as path prefixes by
 * component). Sets m->allow_symlinks when a file is reached through a symbolic link. Fills
 * m->it sorted (model_signing's order); for shards m->shards and m->shard_size must be set. */
int qtk_sig_hash(const char *root, const char *const *rel, size_t nrel, qtk_sig_manifest *m, qtk_err *err);

/* Sort items in model_signing's order (by path component, then shard start and end). */
void qtk_sig_sort(qtk_sig_manifest *m);
#endif
