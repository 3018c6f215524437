#!/usr/bin/env python3
"""Compare ferrometal's CRDs with baremetal-operator's, field path by field path.

Usage: scripts/crd-diff.py UPSTREAM_CRD_DIR [OURS_YAML]

UPSTREAM_CRD_DIR is baremetal-operator's `config/base/crds/bases/` (a checkout of the
repository); OURS_YAML defaults to `deploy/crds/ferrometal.yaml`. For every metal3.io kind
upstream serves, prints the schema paths upstream has and we lack ("missing"), those we add
("extra"), paths whose type differs, and the upstream constraints (required, enum, pattern,
bounds, defaults, list and map types) ours relaxes. Exits 1 when a kind or path is missing.
"""

import glob
import os
import sys

import yaml


# Constraints upstream may set that a served schema must keep (ours may add bounds of its own).
RULES = (
    "required",
    "enum",
    "pattern",
    "minimum",
    "maximum",
    "minLength",
    "default",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)


def rules(schema, prefix=""):
    """The constraints of every schema node, by path ("" is the root)."""
    out = {}
    if not isinstance(schema, dict):
        return out
    here = {k: schema[k] for k in RULES if k in schema}
    if here:
        out[prefix] = here
    for name, sub in (schema.get("properties") or {}).items():
        if prefix == "" and name in ("apiVersion", "kind", "metadata"):
            continue
        out.update(rules(sub, f"{prefix}.{name}" if prefix else name))
    for key, mark in (("items", "[]"), ("additionalProperties", "{}")):
        if isinstance(schema.get(key), dict):
            out.update(rules(schema[key], prefix + mark))
    return out


def looser(up, me):
    """The constraints upstream has that ours lacks or sets differently, as text."""
    out = []
    for path, constraints in sorted(up.items()):
        mine = me.get(path, {})
        for key, value in constraints.items():
            if key == "required":
                lost = sorted(set(value) - set(mine.get("required", [])))
                if lost:
                    out.append(f"{path or '<root>'}: required {lost} not required")
            elif key == "enum":
                # Order does not matter; a null ours admits for an optional field is not a rule.
                if set(map(repr, value)) != set(map(repr, mine.get("enum", []))) - {"None"}:
                    out.append(f"{path or '<root>'}: enum {value!r}, ours {mine.get(key)!r}")
            elif mine.get(key) != value:
                out.append(f"{path or '<root>'}: {key} {value!r}, ours {mine.get(key)!r}")
    return out


def paths(schema, prefix=""):
    """Every property path of an OpenAPI v3 schema, with its type ("[]" marks array items)."""
    out = {}
    if not isinstance(schema, dict):
        return out
    for name, sub in (schema.get("properties") or {}).items():
        p = f"{prefix}.{name}" if prefix else name
        out[p] = sub.get("type", "")
        out.update(paths(sub, p))
    items = schema.get("items")
    if isinstance(items, dict):
        out.update(paths(items, prefix + "[]"))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out.update(paths(extra, prefix + "{}"))
    return out


def crds_by_kind(docs):
    out = {}
    for doc in docs:
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        if spec["group"] != "metal3.io":
            continue
        for version in spec["versions"]:
            schema = version.get("schema", {}).get("openAPIV3Schema", {})
            # Every object has these; the API server serves them whether a CRD lists them or not.
            found = {
                p: t
                for p, t in paths(schema).items()
                if p not in ("apiVersion", "kind", "metadata")
            }
            out[(spec["names"]["kind"], version["name"])] = {
                "paths": found,
                "rules": rules(schema),
                "scope": spec.get("scope"),
                "shortNames": sorted(spec["names"].get("shortNames") or []),
                "plural": spec["names"]["plural"],
                "subresources": sorted((version.get("subresources") or {}).keys()),
                "printer": [c["name"] for c in version.get("additionalPrinterColumns") or []],
            }
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    upstream_docs = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.yaml"))):
        with open(path) as f:
            upstream_docs.extend(yaml.safe_load_all(f))
    ours_path = sys.argv[2] if len(sys.argv) > 2 else "deploy/crds/ferrometal.yaml"
    with open(ours_path) as f:
        ours = crds_by_kind(yaml.safe_load_all(f))
    upstream = crds_by_kind(upstream_docs)

    total_missing = 0
    total_looser = 0
    for key in sorted(upstream):
        kind, version = key
        up = upstream[key]
        if key not in ours:
            print(f"{kind} {version}: NOT SERVED ({len(up['paths'])} paths)")
            total_missing += len(up["paths"]) + 1
            continue
        me = ours[key]
        missing = sorted(set(up["paths"]) - set(me["paths"]))
        extra = sorted(set(me["paths"]) - set(up["paths"]))
        typed = sorted(
            p
            for p in set(up["paths"]) & set(me["paths"])
            if up["paths"][p] != me["paths"][p] and up["paths"][p] and me["paths"][p]
        )
        meta = [
            f"{field}: upstream {up[field]!r}, ours {me[field]!r}"
            for field in ("scope", "plural", "shortNames", "subresources")
            if up[field] != me[field]
        ]
        print(
            f"{kind} {version}: {len(up['paths'])} upstream paths, "
            f"{len(missing)} missing, {len(extra)} extra, {len(typed)} typed differently"
        )
        for p in missing:
            print(f"  missing {p} ({up['paths'][p]})")
        for p in typed:
            print(f"  type    {p}: upstream {up['paths'][p]}, ours {me['paths'][p]}")
        for p in extra:
            print(f"  extra   {p}")
        for m in meta:
            print(f"  names   {m}")
        lost = looser(up["rules"], me["rules"])
        for r in lost:
            print(f"  rule    {r}")
        total_missing += len(missing)
        total_looser += len(lost)
    print(f"total missing: {total_missing}; upstream rules ours relaxes: {total_looser}")
    return 1 if total_missing else 0


if __name__ == "__main__":
    sys.exit(main())
