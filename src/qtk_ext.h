/* qtk_ext.h - libqtk's extension interface: everything qtk's own programs
 * (qconvert, qinspect, qverify) use beyond the public qtk.h. The programs
 * include this header and qtk.h, never internal.h nor a layer's header
 * directly; what is declared through it is, by layer (docs/architecture.md):
 *
 *   support   qtk_util.h        caps, files, buffers, atomic output files, threads
 *             text.h            the one sanitiser for untrusted strings
 *             json.h            strict JSON parser and the JSON string writer
 *   codecs    dequant.h quant.h imatrix.h   ggml / AWQ / GPTQ decoders and encoders
 *   families  family/family.h   model-family descriptors, canonical names, Q/K rows
 *             family/hfmap.h    HF config.json <-> GGUF metadata and tokenizers
 *             family/mix.h      llama.cpp's quantization mixes
 *   schemes   scheme/scheme.h   packed-scheme descriptors (AWQ, GPTQ)
 *             scheme/qgroups.h  integer groups and the exact transcodes
 *   values    view/decode.h     decoded rows of any tensor, whatever its layout
 *             view/stats.h      value statistics of any tensor, in row chunks
 *   records   record/digest.h   content digests (two tiers) of every tensor
 *             record/prov.h     provenance records
 *             record/audit.h    executable content and chat-template audit
 *
 * Containers are reached only through qtk.h (qtk_open, qtk_writer_*, the
 * output kinds). */
#ifndef QTK_EXT_H
#define QTK_EXT_H

#include "qtk.h"
#include "qtk_util.h"
#include "text.h"
#include "json.h"
#include "dequant.h"
#include "quant.h"
#include "imatrix.h"
#include "family/family.h"
#include "family/hfmap.h"
#include "family/mix.h"
#include "scheme/scheme.h"
#include "scheme/qgroups.h"
#include "view/decode.h"
#include "view/stats.h"
#include "record/digest.h"
#include "record/prov.h"
#include "record/audit.h"
#include "record/meta.h"
#include "record/sign.h"

#endif
