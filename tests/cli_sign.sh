#!/bin/sh
# CLI tests for qverify --sign / --verify-signature (docs/provenance.md, section 5): keys made
# with `openssl genpkey`, a sample model signed and verified, each tampering case named with
# exit 1, hostile signature and key files exit 3, the DSSE signature checked independently
# with openssl over the PAE bytes, and model_signing's own v1.1.0 key-signed test vector
# (tests/data/oms-v1.1.0-key, from sigstore/model-transparency scripts/tests) verified.
# Prints "N passed, N failed".
B=${QTK_BUILD:-build}
BIN=${QTK_BIN:-bin}
V=$BIN/qverify
Q=$BIN/qconvert
T=$(mktemp -d /tmp/qtk-sign-XXXXXX)
trap 'rm -rf "$T"' EXIT
pass=0; fail=0
SOURCE_DATE_EPOCH=1700000000; export SOURCE_DATE_EPOCH

ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
run() {
	name=$1; want=$2; shift 2
	"$@" >"$T/out" 2>"$T/err"
	got=$?
	if [ "$got" -eq "$want" ]; then ok; else bad "$name: exit $got, expected $want"; sed 's/^/  stdout: /' "$T/out" | head -8; sed 's/^/  stderr: /' "$T/err" | head -5; fi
}
out_has() { if grep -q -- "$2" "$T/out"; then ok; else bad "$1: stdout lacks '$2'"; head -8 "$T/out"; fi; }
err_has() { if grep -q -- "$2" "$T/err"; then ok; else bad "$1: stderr lacks '$2'"; head -5 "$T/err"; fi; }
flip_byte() {
	v=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
	n=$(( (v + 1) % 256 ))
	printf "\\$(printf %03o "$n")" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
# byte offset of the first occurrence of a string in a file
offset_of() { grep -boa -- "$2" "$1" | head -n 1 | cut -d: -f1; }

if ! command -v openssl >/dev/null 2>&1; then
	echo "skipped: openssl CLI not installed"; echo "0 passed, 0 failed"; exit 0
fi

# ---- the reference: a signature made by model_signing 1.1.0 (ECDSA P-384, "files") ----------
R=$T/ref; cp -r tests/data/oms-v1.1.0-key "$R"
run "reference vector" 0 "$V" --verify-signature tests/data/oms-v1.1.0-key.pub.pem "$R"
out_has "reference vector" "ECDSA P-384 signature by key e8450dec4eb99dae"
out_has "reference vector" "2 files match the signed SHA-256 digests"
printf 'x' >>"$R/signme-2"
run "reference vector, edited file" 1 "$V" --verify-signature tests/data/oms-v1.1.0-key.pub.pem "$R"
out_has "reference vector, edited file" "'signme-2' content differs from the signed digest"

# ---- keys ---------------------------------------------------------------------------------------
openssl genpkey -algorithm ed25519 -out "$T/ed.pem" 2>/dev/null && openssl pkey -in "$T/ed.pem" -pubout -out "$T/ed.pub" || bad "ed25519 key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/ec.pem" 2>/dev/null && openssl pkey -in "$T/ec.pem" -pubout -out "$T/ec.pub" || bad "P-256 key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/ec2.pem" 2>/dev/null && openssl pkey -in "$T/ec2.pem" -pubout -out "$T/ec2.pub" || bad "P-256 key 2"

S=$T/samples
"$B/samples/gen" "$S" >/dev/null || bad "sample generator"
G=$T/m.gguf
# a model with an embedded provenance record: a copy through qconvert
"$Q" "$S/tiny-llama-f32.gguf" "$G" >/dev/null 2>&1 || bad "qconvert copy"

# ---- sign and verify: one file, a directory, a split set ------------------------------------------
run "sign file (P-256)" 0 "$V" --sign "$T/ec.pem" "$G"
out_has "sign file" "wrote $G.sig: ECDSA P-256 key"
[ -f "$G.sig" ] && ok || bad "sign file: no $G.sig"
run "verify file" 0 "$V" --verify-signature "$T/ec.pub" "$G"
out_has "verify file" "21 tensors match the signature"
out_has "verify file" "signed_record: ok"
run "verify file, private key as the key" 0 "$V" --verify-signature "$T/ec.pem" "$G"
run "sign is deterministic" 0 "$V" --sign "$T/ed.pem" --signature "$T/a.sig" "$G"
run "sign is deterministic 2" 0 "$V" --sign "$T/ed.pem" --signature "$T/b.sig" "$G"
cmp -s "$T/a.sig" "$T/b.sig" && ok || bad "two Ed25519 signatures of one model differ"
run "verify --json" 0 "$V" --json --verify-signature "$T/ed.pub" --signature "$T/a.sig" "$G"
out_has "verify --json" '"mode":.*"verify-signature"'

H=$T/hf; cp -r "$S/tiny-llama" "$H"
run "sign directory (Ed25519)" 0 "$V" --sign "$T/ed.pem" "$H"
[ -f "$H/model.sig" ] && ok || bad "sign directory: no model.sig inside"
run "verify directory" 0 "$V" --verify-signature "$T/ed.pub" "$H"
out_has "verify directory" "5 files match"
run "sign directory, shards" 0 "$V" --sign "$T/ec.pem" --shard-size 1000000 --signature "$T/shards.sig" "$H"
run "verify directory, shards" 0 "$V" --verify-signature "$T/ec.pub" --signature "$T/shards.sig" "$H"
out_has "verify directory, shards" "shards match"

P=$T/split; mkdir -p "$P"
"$Q" --split-max-size 3M "$G" "$P/s.gguf" >/dev/null 2>&1 || bad "qconvert split"
run "sign split set" 0 "$V" --sign "$T/ec.pem" "$P/s-00001-of-00003.gguf"
run "verify split set" 0 "$V" --verify-signature "$T/ec.pub" "$P/s-00001-of-00003.gguf"
out_has "verify split set" "3 files match"

# ---- independent check of the DSSE signature with openssl over PAE(payload) ----------------------
sed -n 's/.*"payload":"\([^"]*\)".*/\1/p' "$G.sig" | base64 -d >"$T/payload" 2>/dev/null || bad "payload base64"
sed -n 's/.*"sig":"\([^"]*\)".*/\1/p' "$G.sig" | base64 -d >"$T/sig.der" 2>/dev/null || bad "sig base64"
{ printf 'DSSEv1 28 application/vnd.in-toto+json %s ' "$(wc -c <"$T/payload" | tr -d ' ')"; cat "$T/payload"; } >"$T/pae"
if openssl dgst -sha256 -verify "$T/ec.pub" -signature "$T/sig.der" "$T/pae" >/dev/null 2>&1; then ok; else bad "openssl does not verify the ECDSA signature over PAE"; fi
sed -n 's/.*"payload":"\([^"]*\)".*/\1/p' "$T/a.sig" | base64 -d >"$T/payload2"
sed -n 's/.*"sig":"\([^"]*\)".*/\1/p' "$T/a.sig" | base64 -d >"$T/sig2.bin"
{ printf 'DSSEv1 28 application/vnd.in-toto+json %s ' "$(wc -c <"$T/payload2" | tr -d ' ')"; cat "$T/payload2"; } >"$T/pae2"
if openssl pkeyutl -verify -pubin -inkey "$T/ed.pub" -rawin -in "$T/pae2" -sigfile "$T/sig2.bin" >/dev/null 2>&1; then ok; else bad "openssl does not verify the Ed25519 signature over PAE"; fi
# the key hint: SHA-256 of the public key's PEM
h=$(openssl pkey -pubin -in "$T/ec.pub" | sha256sum | cut -c1-64)
grep -q "\"hint\":\"$h\"" "$G.sig" && ok || bad "key hint is not the SHA-256 of the public key PEM"
grep -q '"predicateType":"https://model_signing/signature/v1.0"' "$T/payload" && ok || bad "predicate type"
grep -q '"resources":\[{"algorithm":"sha256","digest":"'"$(sha256sum <"$G" | cut -c1-64)"'","name":"."}\]' "$T/payload" && ok || bad "resources of a one-file model"

# ---- tampering -----------------------------------------------------------------------------------
run "wrong key" 1 "$V" --verify-signature "$T/ec2.pub" "$G"
out_has "wrong key" "key mismatch"
# a signature without the hint: the signature itself fails
sed 's/"hint":"[0-9a-f]*"//; s/"publicKey":{}/"publicKey":{}/' "$G.sig" >"$T/nohint.sig"
run "wrong key, no hint" 1 "$V" --verify-signature "$T/ec2.pub" --signature "$T/nohint.sig" "$G"
out_has "wrong key, no hint" "does not verify"
# an edited statement (the signed record): re-encoded payload, same signature
sed 's/"name":"model.layers.0/"name":"model.layers.9/' "$T/payload" | base64 -w0 >"$T/p64"
sed "s|\"payload\":\"[^\"]*\"|\"payload\":\"$(cat "$T/p64")\"|" "$G.sig" >"$T/edited.sig"
run "edited signed statement" 1 "$V" --verify-signature "$T/ec.pub" --signature "$T/edited.sig" "$G"
out_has "edited signed statement" "does not verify"
# an edited file: general.name in the header (tensors unchanged)
cp "$G" "$T/e.gguf"; cp "$G.sig" "$T/e.gguf.sig"
o=$(offset_of "$T/e.gguf" "general.name"); flip_byte "$T/e.gguf" $((o + 12 + 8 + 8 + 1))
run "edited file" 1 "$V" --verify-signature "$T/ec.pub" "$T/e.gguf"
out_has "edited file" "'.' content differs from the signed digest"
out_has "edited file" "21 tensors match the signature"
run "edited file, --content" 0 "$V" --verify-signature "$T/ec.pub" --content "$T/e.gguf"
out_has "edited file, --content" "signed_files: note"
# an edited embedded record (its time stamp: still a valid record)
cp "$G" "$T/r.gguf"; cp "$G.sig" "$T/r.gguf.sig"
o=$(offset_of "$T/r.gguf" '"time":"2023'); flip_byte "$T/r.gguf" $((o + 11))
run "edited record" 1 "$V" --verify-signature "$T/ec.pub" "$T/r.gguf"
out_has "edited record" "signed_record: failed: the embedded provenance record (kv qtk.provenance) differs"
# an edited tensor: the last byte of the file is tensor data
cp "$G" "$T/t.gguf"; cp "$G.sig" "$T/t.gguf.sig"
flip_byte "$T/t.gguf" $(( $(wc -c <"$T/t.gguf") - 1 ))
run "edited tensor" 1 "$V" --verify-signature "$T/ec.pub" "$T/t.gguf"
out_has "edited tensor" "tensor 'lm_head.weight' (stored as 'output.weight'): changed"
out_has "edited tensor" "tensors: failed: 1 of 21"
# re-containered: GGUF -> safetensors keeps every tensor; --content accepts it
"$Q" "$G" "$T/rc.safetensors" >/dev/null 2>&1 || bad "qconvert to safetensors"
run "re-containered" 1 "$V" --verify-signature "$T/ec.pub" --signature "$G.sig" "$T/rc.safetensors"
run "re-containered, --content" 0 "$V" --verify-signature "$T/ec.pub" --signature "$G.sig" --content "$T/rc.safetensors"
out_has "re-containered, --content" "tensors: ok"
# reordered shards
mv "$P/s-00002-of-00003.gguf" "$P/x"; mv "$P/s-00003-of-00003.gguf" "$P/s-00002-of-00003.gguf"; mv "$P/x" "$P/s-00003-of-00003.gguf"
run "reordered shards" 1 "$V" --verify-signature "$T/ec.pub" "$P/s-00001-of-00003.gguf"
out_has "reordered shards" "'s-00002-of-00003.gguf' holds the content signed for 's-00003-of-00003.gguf' (reordered)"
# a file added to the directory
echo x >"$H/extra.txt"
run "extra file" 1 "$V" --verify-signature "$T/ed.pub" "$H"
out_has "extra file" "'extra.txt' not in the signature"

# ---- hostile signature and key files: exit 3 with a message ----------------------------------
hostile() {
	printf '%s' "$2" >"$T/h.sig"
	run "hostile signature: $1" 3 "$V" --verify-signature "$T/ec.pub" --signature "$T/h.sig" "$G"
	err_has "hostile signature: $1" "$3"
}
hostile "bad JSON" '{"mediaType":' "invalid json"
hostile "not an object" '[1]' "not a Sigstore bundle"
hostile "wrong mediaType" '{"mediaType":"application/vnd.dev.sigstore.bundle+json;version=0.1"}' "unsupported media type"
hostile "bad base64" '{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{}},"dsseEnvelope":{"payload":"@@@=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AAAA"}]}}' "must be a base64 string"
hostile "two signatures" '{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{}},"dsseEnvelope":{"payload":"","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"AAAA"},{"sig":"AAAA"}]}}' "exactly one signature"
hostile "certificate" '{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"certificate":{}}}' "certificate"
hostile "unknown field" '{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","extra":1}' "unknown field"
hostile "huge signature value" "{\"mediaType\":\"application/vnd.dev.sigstore.bundle.v0.3+json\",\"verificationMaterial\":{\"publicKey\":{}},\"dsseEnvelope\":{\"payload\":\"\",\"payloadType\":\"application/vnd.in-toto+json\",\"signatures\":[{\"sig\":\"$(head -c 3000 /dev/zero | base64 -w0)\"}]}}" "1 to 1024 bytes"
hostile "bad hint" '{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"XYZ"}}}' "hint"
printf 'not a key\n' >"$T/bad.pem"
run "hostile key file" 3 "$V" --verify-signature "$T/bad.pem" "$G"
err_has "hostile key file" "cannot read a public key"
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out "$T/rsa.pem" 2>/dev/null
run "wrong key type" 3 "$V" --sign "$T/rsa.pem" --signature "$T/rsa.sig" "$G"
err_has "wrong key type" "unsupported key type 'RSA'"
[ ! -f "$T/rsa.sig" ] && ok || bad "a signature was written for an unsupported key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:secp256k1 -out "$T/k1.pem" 2>/dev/null
run "unsupported curve" 3 "$V" --sign "$T/k1.pem" --signature "$T/k1.sig" "$G"
err_has "unsupported curve" "unsupported elliptic curve"
head -c 200000 /dev/zero >"$T/huge.pem"
run "huge key file" 3 "$V" --verify-signature "$T/huge.pem" "$G"
run "usage: --signature without a mode" 2 "$V" --signature "$T/a.sig" "$G"
run "usage: --content without --verify-signature" 2 "$V" --content "$G"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
