"""Small builders for OpenAPI v3 structural schemas as used in CRDs."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# Kubernetes label value (also used for runtime, job and step names).
LABEL_VALUE = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
# RFC 1123 DNS subdomain (Kubernetes object names).
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def _with(schema: Schema, description: str | None, extra: dict[str, Any]) -> Schema:
    if description:
        schema = {"description": description, **schema}
    for key, value in extra.items():
        if value is not None:
            schema[_key(key)] = value
    return schema


_KEYS = {
    "min_length": "minLength", "max_length": "maxLength", "min_items": "minItems",
    "max_items": "maxItems", "min_properties": "minProperties", "max_properties": "maxProperties",
    "list_type": "x-kubernetes-list-type", "list_map_keys": "x-kubernetes-list-map-keys",
    "map_type": "x-kubernetes-map-type", "rules": "x-kubernetes-validations",
}


def _key(name: str) -> str:
    return _KEYS.get(name, name)


def string(description: str | None = None, **extra: Any) -> Schema:
    return _with({"type": "string"}, description, extra)


def integer(description: str | None = None, fmt: str = "int32", **extra: Any) -> Schema:
    return _with({"type": "integer", "format": fmt}, description, extra)


def boolean(description: str | None = None, **extra: Any) -> Schema:
    return _with({"type": "boolean"}, description, extra)


def date_time(description: str | None = None) -> Schema:
    return _with({"type": "string", "format": "date-time"}, description, {})


def obj(description: str | None, properties: dict[str, Schema],
        required: list[str] | None = None, **extra: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = sorted(required)
    return _with(schema, description, extra)


def array(description: str | None, items: Schema, **extra: Any) -> Schema:
    return _with({"type": "array", "items": items}, description, extra)


def string_list(description: str | None, max_items: int | None = None,
                item_max_length: int | None = None) -> Schema:
    item = string(max_length=item_max_length)
    return array(description, item, max_items=max_items)


def map_of(description: str | None, value: Schema, **extra: Any) -> Schema:
    return _with({"type": "object", "additionalProperties": value}, description, extra)


def string_map(description: str | None, max_properties: int | None = None) -> Schema:
    return map_of(description, string(), max_properties=max_properties)


def rule(expression: str, message: str, field_path: str | None = None,
         reason: str | None = None) -> Schema:
    """One x-kubernetes-validations entry. reason is one of FieldValueInvalid,
    FieldValueForbidden, FieldValueRequired, FieldValueDuplicate."""
    entry: Schema = {"rule": expression, "message": message}
    if field_path:
        entry["fieldPath"] = field_path
    if reason:
        entry["reason"] = reason
    return entry


def condition() -> Schema:
    """metav1.Condition with the validation controller-gen generates for it."""
    return obj(
        "Condition contains details for one aspect of the current state of this object.",
        {
            "lastTransitionTime": date_time(
                "lastTransitionTime is the last time the condition transitioned from one status "
                "to another."),
            "message": string("message is a human readable message indicating details about "
                              "the transition.", max_length=32768),
            "observedGeneration": integer(
                "observedGeneration is the .metadata.generation that the condition was set based "
                "upon.", fmt="int64", minimum=0),
            "reason": string(
                "reason contains a programmatic identifier indicating the reason for the "
                "condition's last transition, in CamelCase.",
                min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "status": string("status of the condition, one of True, False, Unknown.",
                             enum=["True", "False", "Unknown"]),
            "type": string(
                "type of condition in CamelCase or in foo.example.com/CamelCase.",
                max_length=316,
                pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"),
        },
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )


def conditions(description: str) -> Schema:
    return array(description, condition(), max_items=16, list_type="map", list_map_keys=["type"])


def relative_path_rule(field: str, what: str) -> Schema:
    """A relative path without '..' segments (no absolute paths, no traversal)."""
    return rule(
        f"!self.{field}.startsWith('/') && !self.{field}.split('/').exists(s, s == '..')",
        f"{what} must be a relative path that does not contain '..'",
        field_path=f".{field}")
