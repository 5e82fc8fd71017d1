#!/usr/bin/env python3
"""bom_check.py FORMAT FILE: validate an AI-BOM against the schemas in tests/schemas/.
FORMAT is cyclonedx or spdx. Exit 0 valid, 1 invalid, 77 when python3-jsonschema is absent."""
import json
import os
import sys
import warnings

warnings.simplefilter("ignore")
try:
    import jsonschema
except ImportError:
    print("skip: python3-jsonschema is not installed")
    sys.exit(77)

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas")


def load(name):
    with open(os.path.join(here, name), encoding="utf-8") as f:
        return json.load(f)


fmt, path = sys.argv[1], sys.argv[2]
with open(path, encoding="utf-8") as f:
    doc = json.load(f)
if fmt == "cyclonedx":
    schema = load("bom-1.6.schema.json")
    store = {}
    for n in ("spdx.schema.json", "jsf-0.82.schema.json"):
        s = load(n)
        store[s["$id"]] = s
        store[n] = s
    resolver = jsonschema.RefResolver(base_uri=schema["$id"], referrer=schema, store=store)
    v = jsonschema.Draft7Validator(schema, resolver=resolver)
else:
    schema = load("spdx-3.0.1.schema.json")
    v = jsonschema.Draft202012Validator(schema)
errs = sorted(v.iter_errors(doc), key=lambda e: list(e.path))
for e in errs[:10]:
    print("%s: %s: %s" % (path, "/".join(str(p) for p in e.path), e.message[:300]))
sys.exit(1 if errs else 0)
