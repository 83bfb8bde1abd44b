"""Structural schemas for the Kubernetes core types embedded in kruntimes CRDs.

The schemas are derived from the Kubernetes OpenAPI v3 document of the pinned
Kubernetes release (k8s.io/kubernetes api/openapi-spec/v3/api__v1_openapi.json),
converted the way controller-gen converts Go types:

- `$ref`s are inlined; descriptions of nested core fields are dropped to keep the
  CRDs small (the Runtime CRD embeds a whole PodTemplateSpec);
- defaults are kept only for fields that carry a `+default=` marker in the Go
  source of k8s.io/api and k8s.io/apimachinery (openapi-gen also emits zero-value
  defaults for required fields; controller-gen does not, and neither do we);
- Quantity and IntOrString become `x-kubernetes-int-or-string` schemas, Time becomes
  a date-time string, and an embedded ObjectMeta becomes the restricted metadata
  schema (labels, annotations, finalizers, name, namespace) so that template
  labels and annotations are preserved instead of pruned;
- list/map topology extensions are kept, patch-strategy and union extensions are
  dropped (they are not part of a CRD schema).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import Any

Schema = dict[str, Any]

K8S_VERSION = "v1.34.4"
K8S_STAGING_VERSION = "v0.34.4"

QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

REF_PREFIX = "#/components/schemas/"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
TIMES = {"io.k8s.apimachinery.pkg.apis.meta.v1.Time", "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"}
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

KEPT_KEYS = {
    "type", "format", "required", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
}
DROPPED_KEYS = {
    "description", "default", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key",
    "x-kubernetes-unions", "discriminator",
}


def quantity() -> Schema:
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": True,
    }


def int_or_string() -> Schema:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def embedded_object_meta() -> Schema:
    return {
        "type": "object",
        "properties": {
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


def _gomodcache() -> str:
    env = os.environ.get("GOMODCACHE")
    if env:
        return env
    try:
        return subprocess.run(["go", "env", "GOMODCACHE"], check=True, capture_output=True,
                              text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.path.expanduser("~/go/pkg/mod")


def default_paths() -> tuple[str, list[str]]:
    """Locations of the OpenAPI document and the Go sources holding +default markers.

    They are in the Go module cache once `go mod download` ran in scripts/k8s-bin
    (which pins the same Kubernetes release). Override with KRUNTIMES_K8S_OPENAPI and
    KRUNTIMES_K8S_TYPES (colon-separated list of types.go files).
    """
    mod = _gomodcache()
    openapi = os.environ.get("KRUNTIMES_K8S_OPENAPI") or os.path.join(
        mod, f"k8s.io/kubernetes@{K8S_VERSION}/api/openapi-spec/v3/api__v1_openapi.json")
    types_env = os.environ.get("KRUNTIMES_K8S_TYPES")
    types = types_env.split(":") if types_env else [
        os.path.join(mod, f"k8s.io/api@{K8S_STAGING_VERSION}/core/v1/types.go"),
        os.path.join(mod, f"k8s.io/apimachinery@{K8S_STAGING_VERSION}/pkg/apis/meta/v1/types.go"),
    ]
    return openapi, types


_STRUCT_RE = re.compile(r"^type\s+(\w+)\s+struct\s*\{")
_FIELD_RE = re.compile(r"`json:\"([^\",]*)")
_EMBEDDED_RE = re.compile(r"^(\w+)\s+`json:\",inline")


def default_markers(go_files: list[str]) -> set[tuple[str, str]]:
    """(GoTypeName, jsonFieldName) pairs whose field has a `+default=` marker, including
    fields inherited from embedded (json:",inline") structs."""
    markers: set[tuple[str, str]] = set()
    embeds: dict[str, list[str]] = {}
    for path in go_files:
        current = None
        comments: list[str] = []
        with open(path, encoding="utf-8") as handle:
            for raw in handle:
                line = raw.strip()
                match = _STRUCT_RE.match(line)
                if match:
                    current, comments = match.group(1), []
                    continue
                if line.startswith("//"):
                    comments.append(line)
                    continue
                embedded = _EMBEDDED_RE.match(line)
                if current and embedded:
                    embeds.setdefault(current, []).append(embedded.group(1))
                field = _FIELD_RE.search(line)
                if current and field and any("+default=" in c for c in comments):
                    markers.add((current, field.group(1)))
                comments = []
                if line == "}":
                    current = None
    changed = True
    while changed:
        changed = False
        for outer, inners in embeds.items():
            for inner in inners:
                for type_name, field in list(markers):
                    if type_name == inner and (outer, field) not in markers:
                        markers.add((outer, field))
                        changed = True
    return markers


class CoreSchemas:
    """Converts Kubernetes OpenAPI v3 component schemas into CRD structural schemas."""

    def __init__(self, openapi_path: str | None = None, go_files: list[str] | None = None):
        default_openapi, default_go = default_paths()
        openapi_path = openapi_path or default_openapi
        go_files = go_files or default_go
        for path in [openapi_path, *go_files]:
            if not os.path.exists(path):
                raise SystemExit(
                    f"missing {path}: run `go mod download` in scripts/k8s-bin "
                    "(or set KRUNTIMES_K8S_OPENAPI / KRUNTIMES_K8S_TYPES)")
        with open(openapi_path, encoding="utf-8") as handle:
            self.components: dict[str, Schema] = json.load(handle)["components"]["schemas"]
        self.markers = default_markers(go_files)

    def schema(self, name: str) -> Schema:
        """The converted schema of component `name`, e.g. io.k8s.api.core.v1.EnvVar."""
        return self._component(name)

    def volume_source(self) -> Schema:
        """corev1.VolumeSource: corev1.Volume without its name (VolumeSource is inlined there)."""
        volume = self._component("io.k8s.api.core.v1.Volume")
        volume["properties"].pop("name")
        volume.pop("required", None)
        return volume

    def _component(self, name: str) -> Schema:
        if name == QUANTITY:
            return quantity()
        if name == INT_OR_STRING:
            return int_or_string()
        if name in TIMES:
            return {"type": "string", "format": "date-time"}
        if name == OBJECT_META:
            return embedded_object_meta()
        return self._convert(self.components[name], name.rsplit(".", 1)[-1])

    def _convert(self, node: Schema, type_name: str | None) -> Schema:
        ref = _ref_of(node)
        if ref is not None:
            return self._component(ref)
        out: Schema = {}
        for key, value in node.items():
            if key in DROPPED_KEYS or key == "allOf":
                continue
            if key == "properties":
                out["properties"] = {
                    prop: self._property(type_name, prop, sub) for prop, sub in value.items()}
            elif key == "items":
                out["items"] = self._convert(value, None)
            elif key == "additionalProperties":
                out["additionalProperties"] = self._convert(value, None)
            elif key in KEPT_KEYS:
                out[key] = value
            else:
                raise SystemExit(f"unexpected OpenAPI keyword {key!r} in {type_name}")
        return out

    def _property(self, type_name: str | None, prop: str, node: Schema) -> Schema:
        out = self._convert(node, None)
        if type_name and (type_name, prop) in self.markers and "default" in node:
            out["default"] = node["default"]
        return out


def _ref_of(node: Schema) -> str | None:
    if "$ref" in node:
        return node["$ref"].removeprefix(REF_PREFIX)
    all_of = node.get("allOf")
    if all_of and len(all_of) == 1 and "$ref" in all_of[0]:
        return all_of[0]["$ref"].removeprefix(REF_PREFIX)
    return None
