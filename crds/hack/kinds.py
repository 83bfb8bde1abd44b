"""The kruntimes.io/v1alpha1 API: one builder per kind.

Comments tagged `upstream` mirror the upstream Go types (markers and CEL rules, with
their exact messages); `seed 000` marks fields and rules added by the workflow data
sharing design; `kruntimes` marks validation we add so that a bad manifest is
rejected at admission with a message instead of failing later.
"""

from __future__ import annotations

from typing import Any

from core_schemas import CoreSchemas, quantity
from schema import (DNS_SUBDOMAIN, LABEL_VALUE, Schema, array, boolean, conditions, date_time,
                    integer, map_of, obj, relative_path_rule, rule, string, string_list,
                    string_map)

GROUP = "kruntimes.io"
VERSION = "v1alpha1"
CATEGORIES = ["kruntimes"]
AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

# Go time.ParseDuration syntax without a sign ("30s", "1m30s", "1.5h", "0").
DURATION_RE = r"^(0|(([0-9]+([.][0-9]*)?|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
# jobs.<job>.artifacts.<artifact-name> (seed 000). The job is the text before the first
# ".artifacts."; artifact names are file names (no "/").
ARTIFACT_FROM_RE = r"^jobs[.]([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9][.]artifacts[.][^/]+$"
# A relative path without ".." segments (seed 000: absolute paths and path traversal are
# rejected). Equivalent to schema.relative_path_rule: the first segment is non-empty (no
# leading "/") and no segment is "..".
_SEGMENT = r"([^/.][^/]*|[.]([^/.][^/]*)?|[.][.][^/]+)"
RELATIVE_PATH_RE = f"^{_SEGMENT}(/{_SEGMENT}?)*$"


def label_value(description: str, **extra: Any) -> Schema:
    return string(description, min_length=1, max_length=63, pattern=LABEL_VALUE, **extra)


def dns_subdomain(description: str, **extra: Any) -> Schema:
    return string(description, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, **extra)


def duration(description: str, field: str) -> Schema:
    return string(description, max_length=64, rules=[rule(
        f"self.matches('{DURATION_RE}')",
        f"{field} must be a non-negative duration such as 30s, 1m30s or 1h (units ns, us, ms, s, m, h)")])


def one_way_true(field: str) -> Schema:
    return rule(
        f"!has(oldSelf.{field}) || !oldSelf.{field} || (has(self.{field}) && self.{field})",
        f"{field} may not transition from true to false", field_path=f".{field}",
        reason="FieldValueForbidden")


def resource_list(description: str) -> Schema:
    return map_of(description, quantity())


# --------------------------------------------------------------------------------------
# crd envelope


def crd(kind: str, plural: str, short_names: list[str], columns: list[dict[str, str]],
        spec: Schema, status: Schema, description: str,
        selectable_fields: list[str] | None = None,
        metadata: Schema | None = None) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns + [AGE],
        "schema": {"openAPIV3Schema": obj(description, {
            "apiVersion": string("APIVersion defines the versioned schema of this representation "
                                 "of an object."),
            "kind": string("Kind is a string value representing the REST resource this object "
                           "represents."),
            "metadata": metadata or {"type": "object"},
            "spec": spec,
            "status": status,
        }, required=["spec"])},
    }
    if selectable_fields:
        version["selectableFields"] = [{"jsonPath": path} for path in selectable_fields]
    names: dict[str, Any] = {
        "kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
        "categories": CATEGORIES,
    }
    if short_names:
        names["shortNames"] = short_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def column(name: str, path: str, kind: str = "string") -> dict[str, str]:
    return {"name": name, "type": kind, "jsonPath": path}


# --------------------------------------------------------------------------------------
# shared types


def artifact_store_spec(description: str) -> Schema:
    """upstream RuntimeArtifactStoreSpec."""
    return obj(description, {
        "driver": string("Driver identifies the artifact storage backend.",
                         enum=["filesystem", "s3"]),
        "filesystem": obj("Filesystem configures a PVC-backed artifact store.", {
            "volumeClaimName": string(
                "VolumeClaimName is the PVC mounted into runtimed for durable artifact storage.",
                min_length=1, max_length=253),
        }, required=["volumeClaimName"]),
        "s3": obj("S3 configures an S3-compatible object artifact store.", {
            "bucket": string("Bucket is the S3 bucket used to store artifacts.", min_length=1,
                             pattern="^[^/]+$"),
            "prefix": string("Prefix is prepended to generated artifact object keys.",
                             max_length=1024),
            "region": string("Region overrides the AWS SDK region.", max_length=128),
            "endpoint": string("Endpoint configures a custom S3-compatible service endpoint "
                               "(scheme and host).", max_length=2048),
            "forcePathStyle": boolean("ForcePathStyle enables path-style S3 addressing."),
            "credentialsSecretName": string(
                "CredentialsSecretName names a Secret whose keys are exposed to runtimed as "
                "environment variables for the AWS SDK credential chain.",
                min_length=1, max_length=253),
            "uploadPartSize": integer("UploadPartSize overrides the multipart upload part size "
                                      "in bytes.", fmt="int64", minimum=5242880),
            "uploadConcurrency": integer("UploadConcurrency overrides the number of concurrent "
                                         "multipart upload workers.", minimum=1),
        }, required=["bucket"]),
    }, required=["driver"], rules=[rule(
        "(self.driver == 'filesystem' && has(self.filesystem) && !has(self.s3)) || "
        "(self.driver == 's3' && has(self.s3) && !has(self.filesystem))",
        "exactly one artifact store configuration matching driver must be set")])


def artifact_ref(description: str) -> Schema:
    """upstream ArtifactRef: compact, immutable coordinates of an artifact in a store."""
    location = obj("Location contains driver-specific storage coordinates.", {
        "filesystem": obj("Filesystem identifies an artifact in a filesystem store.", {
            "path": string("Path is relative to the artifact store root.", min_length=1,
                           max_length=4096),
            "volumeClaimName": string("VolumeClaimName identifies the PVC backing the "
                                      "filesystem store.", max_length=253),
        }, required=["path"]),
        "s3": obj("S3 identifies an artifact in an S3-compatible object store.", {
            "bucket": string("Bucket is the object store bucket.", min_length=1, max_length=255),
            "key": string("Key is the object key within the bucket.", min_length=1,
                          max_length=4096),
        }, required=["bucket", "key"]),
    }, rules=[rule("has(self.filesystem) != has(self.s3)",
                   "exactly one artifact location must be set")])
    return obj(description, {
        "name": string("Name is the logical artifact name.", min_length=1, max_length=255),
        "driver": string("Driver identifies the ArtifactStore implementation.",
                         enum=["filesystem", "s3"]),
        "type": string("Type describes how the artifact content is represented.",
                       enum=["file", "directory", "archive", "blob"]),
        "location": location,
        "sizeBytes": integer("SizeBytes is the stored artifact size.", fmt="int64", minimum=0),
        "digest": string("Digest is the content digest including its algorithm prefix, "
                         "e.g. sha256:<hex>.", max_length=256),
        "contentType": string("ContentType is the detected media type.", max_length=255),
        "createdAt": date_time("CreatedAt records when the artifact was stored."),
    }, required=["name", "driver", "type", "location", "sizeBytes", "createdAt"], rules=[rule(
        "(self.driver == 'filesystem' && has(self.location.filesystem)) || "
        "(self.driver == 's3' && has(self.location.s3))",
        "artifact location must match driver")])


def label_selector(core: CoreSchemas) -> Schema:
    """metav1.LabelSelector, bounded for CEL and with operator/values checked."""
    selector = core.schema("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
    expressions = selector["properties"]["matchExpressions"]
    expressions["maxItems"] = 32
    requirement = expressions["items"]
    requirement["properties"]["operator"]["enum"] = ["In", "NotIn", "Exists", "DoesNotExist"]
    requirement["x-kubernetes-validations"] = [rule(
        "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : "
        "(!has(self.values) || size(self.values) == 0)",
        "values must be non-empty when operator is In or NotIn and empty when operator is "
        "Exists or DoesNotExist", field_path=".values")]
    selector["properties"]["matchLabels"]["maxProperties"] = 64
    selector["description"] = "LabelSelector selects active namespace-local Runs by label."
    return selector


# --------------------------------------------------------------------------------------
# Runtime


def runtime_crd(core: CoreSchemas) -> dict[str, Any]:
    template = core.schema("io.k8s.api.core.v1.PodTemplateSpec")
    template["required"] = ["spec"]
    template["description"] = (
        "Template defines the Runtime Pod. The first container must be named \"runtime\". The "
        "controller injects the \"runtimed\" sidecar and the \"workspace\" and \"artifact-store\" "
        "volumes.")
    workspace = core.volume_source()
    sources = sorted(workspace["properties"])
    workspace["description"] = (
        "Workspace is the Kubernetes volume source backing the /workspace volume of every "
        "Runtime Pod, with the fields of core/v1 VolumeSource inlined (for example "
        "workspace.persistentVolumeClaim.claimName or workspace.emptyDir.sizeLimit). When no "
        "source is set the controller uses emptyDir.")
    workspace["x-kubernetes-validations"] = [rule(
        " + ".join(f"(has(self.{source}) ? 1 : 0)" for source in sources) + " <= 1",
        "at most one workspace volume source may be set")]
    containers = ".template.spec.containers"
    spec = obj("RuntimeSpec defines a pool of warm Runtime Pods.", {
        "template": template,
        "port": integer("Port is the gRPC port of the Runtime Server in the runtime container.",
                        default=9091, minimum=1, maximum=65535),
        "replicas": integer(
            "Replicas is the number of Runtime Pods. When set the Runtime Pods are managed by a "
            "Deployment; when unset by a DaemonSet (one Runtime Pod per eligible node).",
            minimum=1),
        "daemonImage": string("DaemonImage overrides the runtimed sidecar image.",
                              max_length=2048),
        "capacity": obj("Capacity declares the logical capacity of each Runtime Pod.", {
            "resources": resource_list(
                "Resources maps logical resource names to their per-Pod capacity. The built-in "
                "\"runs\" resource limits concurrent Runs (default 2)."),
        }),
        "artifactStore": artifact_store_spec(
            "ArtifactStore configures durable artifact storage for Runs executed by this "
            "Runtime."),
        "workspace": workspace,
    }, required=["template"], rules=[
        rule(f"self{containers}.size() > 0 && self{containers}[0].name == 'runtime'",
             "template.spec.containers[0] must be named runtime", field_path=containers),
        rule(f"self{containers}.size() == 0 || (has(self{containers}[0].image) && "
             f"self{containers}[0].image.size() > 0 && self{containers}[0].image.size() <= 2048)",
             "the runtime container image must contain between 1 and 2048 characters",
             field_path=containers),
        rule("!has(self.template.spec.restartPolicy) || "
             "self.template.spec.restartPolicy == 'Always'",
             "template.spec.restartPolicy must be Always",
             field_path=".template.spec.restartPolicy"),
        rule("!has(self.template.spec.ephemeralContainers) || "
             "self.template.spec.ephemeralContainers.size() == 0",
             "template.spec.ephemeralContainers is not supported in a Deployment",
             field_path=".template.spec.ephemeralContainers", reason="FieldValueForbidden"),
        rule("!has(self.template.spec.serviceAccountName) || self.template.spec.serviceAccountName"
             ".matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
             "template.spec.serviceAccountName must be a valid DNS subdomain",
             field_path=".template.spec.serviceAccountName"),
    ])
    status = obj("RuntimeStatus is the observed state of a Runtime.", {
        "readyReplicas": integer("ReadyReplicas is the number of ready Runtime Pods."),
        "conditions": conditions("Conditions are the latest observations of the Runtime."),
    })
    metadata = obj(None, {"name": string(
        "Runtime names are used as the value of the runtime=<name> Pod label.", max_length=63)})
    return crd("Runtime", "runtimes", ["rt"], [
        column("Image", ".spec.template.spec.containers[0].image"),
        column("Replicas", ".spec.replicas", "integer"),
        column("Ready", ".status.readyReplicas", "integer"),
    ], spec, status, "Runtime is a pool of warm Runtime Pods that execute Runs.",
        metadata=metadata)


# --------------------------------------------------------------------------------------
# Run


# Supported Run affinity topology keys, in enum order (the apiserver lists them in this order
# in "Unsupported value" messages). The Node label keys are a kruntimes addition; upstream
# only has kruntimes.io/runtime-pod.
RUN_AFFINITY_TOPOLOGY_KEYS = [
    "kruntimes.io/runtime-pod",
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
]


def run_affinity(core: CoreSchemas) -> Schema:
    term = obj("RunAffinityTerm matches active namespace-local Runs for one topology.", {
        "labelSelector": label_selector(core),
        "topologyKey": string("TopologyKey identifies the topology; kruntimes.io/runtime-pod "
                              "means the same assigned Runtime Pod, the Node label keys "
                              "kubernetes.io/hostname, topology.kubernetes.io/zone and "
                              "topology.kubernetes.io/region mean the same value of that label "
                              "on the Node of the assigned Runtime Pod.",
                              enum=RUN_AFFINITY_TOPOLOGY_KEYS),
    }, required=["labelSelector", "topologyKey"], rules=[rule(
        "has(self.labelSelector) && ((has(self.labelSelector.matchLabels) && "
        "size(self.labelSelector.matchLabels) > 0) || (has(self.labelSelector.matchExpressions) "
        "&& size(self.labelSelector.matchExpressions) > 0))",
        "labelSelector must not be empty", field_path=".labelSelector")])
    weighted = obj("WeightedRunAffinityTerm applies a weight to a preferred Run affinity term.", {
        "weight": integer("Weight is the relative preference weight.", minimum=1, maximum=100),
        "runAffinityTerm": term,
    }, required=["weight", "runAffinityTerm"])
    rules = obj("RunAffinityRules contains required and preferred Run affinity terms.", {
        "requiredDuringSchedulingIgnoredDuringExecution": array(
            "Hard placement constraints: every term must be satisfied.", term, max_items=32),
        "preferredDuringSchedulingIgnoredDuringExecution": array(
            "Soft placement preferences used for scoring.", weighted, max_items=32),
    })
    return obj("Affinity constrains or prefers placement relative to other active Runs.", {
        "runAffinity": {**rules, "description": "RunAffinity requires or prefers sharing a "
                        "topology with matching active Runs."},
        "runAntiAffinity": {**rules, "description": "RunAntiAffinity requires or prefers "
                            "avoiding a topology with matching active Runs."},
    })


def run_spec(core: CoreSchemas) -> Schema:
    source = obj("Source specifies where the code to run comes from.", {
        "inline": string("Inline is a standalone script (task mode) or the inline function "
                         "source (function mode).", max_length=262144),
        "inlinePath": string("InlinePath is the relative file path where runtimed materializes "
                             "inline function source.", min_length=1, max_length=4096),
        "repoURL": string("RepoURL is the Git repository to clone (https, ssh or git@host:path).",
                          max_length=2048),
        "commitSHA": string("CommitSHA is the commit (or ref) to check out.", max_length=256),
    }, rules=[
        rule("!(has(self.inline) && has(self.repoURL))", "inline and repoURL are mutually "
             "exclusive"),
        rule("!has(self.commitSHA) || has(self.repoURL)", "commitSHA requires repoURL",
             field_path=".commitSHA"),
        rule("!has(self.inlinePath) || (!self.inlinePath.startsWith('/') && "
             "!self.inlinePath.split('/').exists(segment, size(segment) == 0 || segment == '.' || "
             "segment == '..'))",
             "inlinePath must be a relative file path without empty, '.' or '..' segments",
             field_path=".inlinePath"),
    ])
    mode = obj("Mode contains the execution-mode-specific configuration; exactly one of task, "
               "function or session. Defaults to task mode (seed 000 Run examples omit it).", {
        "task": obj("Task configures one-shot process execution.", {
            "entrypoint": string("Entrypoint is the relative script file to execute for "
                                 "non-inline sources.", max_length=4096),
            "args": string_list("Args are passed to the runtime for non-inline sources.",
                                max_items=256, item_max_length=8192),
        }),
        "function": obj("Function keeps the Run Ready on its Runtime Pod with its handler "
                        "registered, callable through the Runtime Gateway at status.endpoint, "
                        "until it is cancelled, times out or stays idle.", {
            "handler": string("Handler is file.function (bash: the function of that file in the "
                              "working directory) or pkg.module.function (python: imported once "
                              "at registration).", max_length=512),
            "idleTimeoutSeconds": integer("IdleTimeoutSeconds ends the Run (Timeout, reason "
                                          "IdleTimeout) after this long without a call; default "
                                          "600.", minimum=1),
        }),
        "session": obj("Session keeps the Run Ready on its Runtime Pod for interactive "
                       "operations through sessions.kruntimes.io (seed 004) until it is "
                       "cancelled, times out or stays idle.", {
            "command": string_list("Command is the default process an operation starts "
                                   "(argv, run in the Run working directory with the Run env); "
                                   "empty means the Runtime's shell (bash, or python3 -i).",
                                   max_items=64, item_max_length=4096),
            "idleTimeoutSeconds": integer("IdleTimeoutSeconds ends the session (Succeeded, "
                                          "reason SessionIdle) after this long without an "
                                          "attached operation; default 600.", minimum=1,
                                          maximum=86400),
        }),
    }, default={"task": {}}, rules=[rule("(has(self.task) ? 1 : 0) + (has(self.function) ? 1 : 0) "
                                         "+ (has(self.session) ? 1 : 0) == 1",
                                         "exactly one of task, function or session must be set")])
    workspace = obj("Workspace references a namespace-local PersistentWorkspace used by this "
                    "Run (seed 000 shape; kind and apiGroup default).", {
        "name": dns_subdomain("Name is the PersistentWorkspace name in the Run namespace."),
        "kind": string("Kind identifies the workspace provider kind.",
                       default="PersistentWorkspace", enum=["PersistentWorkspace"]),
        "apiGroup": string("APIGroup identifies the served workspace API group and version.",
                           default="kruntimes.io/v1alpha1", enum=["kruntimes.io/v1alpha1"]),
    }, required=["name"])
    artifact_input = obj("ArtifactInput stages one stored artifact into the Run working "
                         "directory before execution (seed 000).", {
        "artifactRef": artifact_ref("ArtifactRef is the immutable reference of the artifact to "
                                    "stage, as published in a Run's status.artifactRefs."),
        "path": string("Path is the destination relative to the Run working directory; it may "
                       "not start with '/' or contain a '..' segment. A file artifact is copied "
                       "to it; a directory artifact is extracted into it.",
                       min_length=1, max_length=4096),
    }, required=["artifactRef", "path"], rules=[relative_path_rule("path", "path")])
    retry = obj("RetryPolicy is the retry strategy for the Run; unset means no retries.", {
        "maxAttempts": integer("MaxAttempts is the maximum number of attempts including the "
                               "first (default 1).", minimum=1, maximum=100),
        "backoff": duration("Backoff is the initial delay between attempts; it doubles per "
                            "retry, capped at 60s (default 1s).", "backoff"),
        "retryableReasons": string_list("RetryableReasons lists the failure reasons eligible "
                                        "for retry; empty means every reason except Cancelled.",
                                        max_items=32, item_max_length=128),
    })
    env_var = core.schema("io.k8s.api.core.v1.EnvVar")
    return obj("RunSpec defines one execution on a Runtime.", {
        "runtime": label_value("Runtime is the name of the Runtime (Pod label runtime=<name>) in "
                               "the same namespace."),
        "source": source,
        "mode": mode,
        "workspace": workspace,
        "affinity": run_affinity(core),
        "artifactInputs": array(
            "ArtifactInputs are stored artifacts staged into the Run working directory before "
            "execution (seed 000). Destination paths are unique.", artifact_input, max_items=32,
            list_type="map", list_map_keys=["path"]),
        "resources": obj("Resources declares the logical Runtime capacity reserved by this Run; "
                         "when omitted the Run requests one unit of \"runs\".", {
            "requests": resource_list("Requests are non-negative integer quantities of logical "
                                      "Runtime resources."),
        }),
        "env": array("Env lists environment variables for the execution (name and value).",
                     env_var, max_items=256),
        "timeout": duration("Timeout is the maximum run time measured from status.startTime; "
                            "unset means no limit.", "timeout"),
        "cancelRequested": boolean("CancelRequested requests cancellation; it may not be reset "
                                   "to false."),
        "retryPolicy": retry,
        "ttlSecondsAfterFinished": integer(
            "TTLSecondsAfterFinished deletes the Run this many seconds after "
            "status.completionTime; unset or 0 keeps it. Mutable.", minimum=0),
    }, required=["runtime"], rules=run_spec_rules())


def run_spec_rules() -> list[Schema]:
    immutable = " && ".join(
        ["self.runtime == oldSelf.runtime", "self.mode == oldSelf.mode"] + [
            f"has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f})"
            for f in ["source", "env", "timeout", "retryPolicy", "resources"]])
    return [
        rule("!has(self.mode.task) || !has(self.mode.task.entrypoint) || (has(self.source) && "
             "has(self.source.inline)) || (!self.mode.task.entrypoint.startsWith('/') && "
             "!self.mode.task.entrypoint.split('/').exists(segment, segment == '..'))",
             "mode.task.entrypoint must be a relative path that does not contain '..'",
             field_path=".mode.task.entrypoint"),
        rule("!has(self.source) || !has(self.source.inlinePath) || (has(self.mode.function) && "
             "has(self.source.inline))",
             "source.inlinePath is only valid for function mode with inline source",
             field_path=".source.inlinePath", reason="FieldValueForbidden"),
        rule("!has(self.mode.function) || !has(self.source) || !has(self.source.inline) || "
             "has(self.source.inlinePath)",
             "function mode inline source requires source.inlinePath",
             field_path=".source.inlinePath", reason="FieldValueRequired"),
        rule(immutable, "runtime, source, mode, env, timeout, retryPolicy, and resources are "
             "immutable after Run creation", reason="FieldValueForbidden"),
        rule("has(self.workspace) == has(oldSelf.workspace) && (!has(self.workspace) || "
             "self.workspace == oldSelf.workspace) && has(self.affinity) == has(oldSelf.affinity) "
             "&& (!has(self.affinity) || self.affinity == oldSelf.affinity)",
             "workspace and affinity are immutable after Run creation",
             reason="FieldValueForbidden"),
        one_way_true("cancelRequested"),
        rule("has(self.artifactInputs) == has(oldSelf.artifactInputs) && "
             "(!has(self.artifactInputs) || self.artifactInputs == oldSelf.artifactInputs)",
             "artifactInputs are immutable after Run creation", field_path=".artifactInputs",
             reason="FieldValueForbidden"),
    ]


def run_status() -> Schema:
    endpoint = obj("Endpoint is the invoke endpoint of a ready function Run.", {
        "protocol": string("Protocol identifies the endpoint protocol.", enum=["HTTPS"]),
        "url": string("URL is the invoke endpoint URL.", max_length=2048),
        "caBundle": string("CABundle is the PEM trust bundle for the endpoint.", format="byte",
                           max_length=16384),
    }, required=["protocol", "url"])
    return obj("RunStatus is the observed state of a Run.", {
        "phase": string("Phase is the lifecycle phase of the Run.", default="Pending",
                        enum=["Pending", "Scheduled", "Running", "Ready", "Succeeded", "Failed",
                              "Timeout", "Cancelled"]),
        "assignedPod": string("AssignedPod is the Runtime Pod chosen by the scheduler.",
                              max_length=253),
        "assignedPodUID": string("AssignedPodUID is the UID of AssignedPod; set and cleared "
                                 "together with it.", max_length=253),
        "endpoint": endpoint,
        "message": string("Message is a diagnostic summary, not logs.", max_length=4096),
        "startTime": date_time("StartTime is when the Run was claimed by runtimed."),
        "completionTime": date_time("CompletionTime is when the Run reached a terminal phase."),
        "outputs": string_map("Outputs are the key-value pairs written to $KRUNTIME_OUTPUTS.",
                              max_properties=64),
        "artifactRefs": array("ArtifactRefs point to artifacts stored outside etcd.",
                              artifact_ref("ArtifactRef is compact metadata of one stored "
                                           "artifact."), max_items=32),
        "artifactStore": artifact_store_spec("ArtifactStore is the cleanup snapshot of the "
                                             "Runtime artifact store captured before upload."),
        "attempt": integer("Attempt is the current 1-based execution attempt."),
        "conditions": conditions("Conditions are Scheduled, Running and Completed."),
    }, required=["phase"])


def run_crd(core: CoreSchemas) -> dict[str, Any]:
    return crd("Run", "runs", ["rn"], [
        column("Phase", ".status.phase"),
        column("Assigned Pod", ".status.assignedPod"),
        column("Runtime", ".spec.runtime"),
    ], run_spec(core), run_status(), "Run is one execution on a warm Runtime Pod.",
        selectable_fields=[".status.assignedPod", ".spec.runtime"])


# --------------------------------------------------------------------------------------
# PersistentWorkspace


def persistent_workspace_crd() -> dict[str, Any]:
    lost_or_released = "['Lost', 'Released']"
    spec = obj("PersistentWorkspaceSpec defines a workspace boundary and its lifecycle.", {
        "runtime": label_value("Runtime is the Runtime whose workspace volume backs this "
                               "workspace."),
        "mode": string("Mode controls how the workspace is bound.", default="RuntimePodLocal",
                       enum=["RuntimePodLocal"]),
        "ttlSecondsAfterUnused": integer(
            "TTLSecondsAfterUnused is how long an unused workspace is kept before cleanup "
            "(DeleteAfterTTL only); unset means never deleted automatically.", minimum=0),
        "cleanupPolicy": string("CleanupPolicy controls automatic cleanup.",
                                default="DeleteAfterTTL", enum=["DeleteAfterTTL", "Retain"]),
    }, required=["runtime"], rules=[rule(
        "self.runtime == oldSelf.runtime && (has(self.mode) ? self.mode : 'RuntimePodLocal') == "
        "(has(oldSelf.mode) ? oldSelf.mode : 'RuntimePodLocal')",
        "runtime and mode are immutable after PersistentWorkspace creation",
        reason="FieldValueForbidden")])
    status = obj("PersistentWorkspaceStatus is the observed binding and lifecycle.", {
        "phase": string("Phase is the lifecycle phase.", default="Pending",
                        enum=["Pending", "Bound", "Lost", "Released"]),
        "runtime": string("Runtime is the observed Runtime backing this workspace.",
                          max_length=63),
        "boundPod": string("BoundPod is the Runtime Pod holding the workspace data.",
                           max_length=253),
        "boundPodUID": string("BoundPodUID is the UID of BoundPod at binding time; it fences "
                              "the binding against Pod-name reuse (seed 000).", max_length=253),
        "path": string("Path is the runtime-local workspace path, "
                       "/workspace/persistent/<workspace-name>.", max_length=4096),
        "lastUsedTime": date_time("LastUsedTime is when the last active Run using this "
                                  "workspace became terminal."),
        "conditions": conditions("Conditions are Bound (True/Bound; False/NoReadyRuntimePods while "
                                 "waiting, False/PodLost once Lost), PodAvailable (True/PodReady or "
                                 "False/PodNotReady for the bound Pod) and Released (True/Deleting or "
                                 "True/TTLExpired once cleanup was requested)."),
    }, rules=[
        rule("!has(oldSelf.boundPod) || (has(self.boundPod) && self.boundPod == oldSelf.boundPod)",
             "status.boundPod may not be changed or removed once set: a workspace is never "
             "rebound", field_path=".boundPod", reason="FieldValueForbidden"),
        rule("!has(oldSelf.boundPodUID) || (has(self.boundPodUID) && "
             "self.boundPodUID == oldSelf.boundPodUID)",
             "status.boundPodUID may not be changed or removed once set: a workspace is never "
             "rebound", field_path=".boundPodUID", reason="FieldValueForbidden"),
        rule(f"!has(oldSelf.phase) || !(oldSelf.phase in {lost_or_released}) || "
             f"(has(self.phase) && self.phase in {lost_or_released})",
             "status.phase may not return to Pending or Bound once Lost or Released",
             field_path=".phase", reason="FieldValueForbidden"),
        rule("!has(self.phase) || self.phase != 'Bound' || (has(self.boundPod) && "
             "has(self.boundPodUID) && has(self.path))",
             "a Bound workspace must set status.boundPod, status.boundPodUID and status.path",
             reason="FieldValueRequired"),
    ])
    return crd("PersistentWorkspace", "persistentworkspaces", ["pw"], [
        column("Phase", ".status.phase"),
        column("Runtime", ".spec.runtime"),
        column("Bound Pod", ".status.boundPod"),
    ], spec, status, "PersistentWorkspace is a workspace bound to one Runtime Pod and shared "
        "by the Runs that reference it.", selectable_fields=[".status.boundPod", ".spec.runtime"])


# --------------------------------------------------------------------------------------
# Workflow, WorkflowRun, Action


def any_value(description: str) -> Schema:
    """A field that is a boolean/number or a ${{ }} expression string; the controller checks it."""
    return {"description": description, "x-kubernetes-preserve-unknown-fields": True}


def step_spec() -> Schema:
    # Patterns rather than CEL: a Workflow holds up to 64 jobs x 128 steps x 16 artifacts,
    # far beyond the CEL cost budget for string scanning rules.
    artifact = obj("StepArtifact imports an artifact of a needed job (seed 000).", {
        "from": string("From is jobs.<job>.artifacts.<artifact-name>; the job must be listed "
                       "in this job's needs.", min_length=1, max_length=334,
                       pattern=ARTIFACT_FROM_RE),
        "path": string("Path is the destination relative to the step's working directory; it "
                       "may not start with '/' or contain a '..' segment.", min_length=1,
                       max_length=4096, pattern=RELATIVE_PATH_RE),
    }, required=["from", "path"])
    rules = [
        rule("has(self.run) != has(self.uses)", "exactly one of run or uses must be set"),
        rule("!has(self.with) || has(self.uses)", "with can only be set when uses is set",
             field_path=".with"),
        rule("!has(self.uses) || (!has(self.args) && !has(self.env))",
             "args and env can only be set on run steps"),
        rule("!has(self.uses) || !has(self.artifacts)",
             "artifacts can only be set on run steps", field_path=".artifacts",
             reason="FieldValueForbidden"),
    ]
    return obj("StepSpec defines one step; a run step becomes one child Run.", {
        "name": label_value("Name of the step; it becomes a label value on the child Run."),
        "run": string("Run is the inline script (becomes the child Run's source.inline).",
                      max_length=262144),
        "args": string_list("Args are positional arguments for the step.", max_items=256,
                            item_max_length=8192),
        "env": string_map("Env is extra environment variables for the step.",
                          max_properties=256),
        "uses": dns_subdomain("Uses references an Action in the same namespace."),
        "with": string_map("With passes string inputs to the Action referenced by uses.",
                           max_properties=256),
        "artifacts": array(
            "Artifacts imports artifacts produced by jobs listed in needs into the step's "
            "working directory (seed 000). Destination paths are unique.", artifact,
            max_items=16, list_type="map", list_map_keys=["path"]),
        "if": string("If is a ${{ }} condition (success(), failure(), always(), cancelled(), "
                     "needs.<job>.result, ...); the step runs only when it holds.", max_length=4096),
        "continue-on-error": any_value("ContinueOnError (boolean or expression): a failure of this "
                                       "step does not fail the job."),
        "timeout-minutes": any_value("TimeoutMinutes (number or expression) bounds the step's Run."),
    }, required=["name"], rules=rules)


def job_spec() -> Schema:
    return obj("JobSpec defines a job: inline steps on one Runtime, or a call of a reusable "
               "Workflow.", {
        "runs-on": label_value("RunsOn is the Runtime for every step of the job."),
        "needs": string_list("Needs lists the jobs that must succeed before this job starts.",
                             max_items=64, item_max_length=63),
        "steps": array("Steps run sequentially within the job.", step_spec(), min_items=1,
                       max_items=128),
        "uses": dns_subdomain("Uses references a reusable Workflow in the same namespace."),
        "with": string_map("With passes string inputs to the reusable Workflow.",
                           max_properties=256),
        "outputs": string_map("Outputs maps job output names to ${{ }} expressions.",
                              max_properties=64),
        "if": string("If is a ${{ }} condition; the job runs only when it holds (default "
                     "success()).", max_length=4096),
        "strategy": {"description": "Strategy: matrix (keys to value lists, include, exclude, or an "
                     "expression), fail-fast, max-parallel. Every combination's outputs are kept.",
                     "type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "continue-on-error": any_value("ContinueOnError (boolean or expression): a failure of this "
                                       "job does not fail the WorkflowRun or its dependents."),
        "timeout-minutes": any_value("TimeoutMinutes (number or expression) bounds the whole job."),
    }, rules=[
        rule("has(self.steps) != has(self.uses)", "exactly one of steps or uses must be set"),
        rule("!has(self.with) || has(self.uses)", "with can only be set when uses is set",
             field_path=".with"),
    ])


def jobs_map(description: str) -> Schema:
    return map_of(description, job_spec(), min_properties=1, max_properties=64, rules=[rule(
        "self.all(name, size(name) <= 63 && "
        "name.matches('^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$'))",
        "job names must be valid Kubernetes label values with at most 63 characters")])


def needs_rule(scope: str) -> Schema:
    return rule("self.jobs.all(name, !has(self.jobs[name].needs) || "
                "self.jobs[name].needs.all(need, need in self.jobs && need != name))",
                f"each dependency must name another job in this {scope}", field_path=".jobs")


def io_specs(owner: str) -> dict[str, Schema]:
    return {
        "inputs": map_of(f"Inputs defines parameters accepted by this {owner}.", obj(
            "InputSpec defines one input.", {
                "type": string("Type is the input type.", default="string", enum=["string"]),
                "required": boolean("Required marks the input as required."),
                "default": string("Default is used when the caller does not pass the input.",
                                  max_length=8192),
            }), max_properties=64),
        "outputs": map_of(f"Outputs defines values exposed by this {owner}.", obj(
            "OutputSpec defines one output.", {
                "value": string("Value is a ${{ }} expression.", min_length=1, max_length=8192),
            }, required=["value"]), max_properties=64),
    }


def ready_column() -> dict[str, str]:
    return column("Ready", ".status.conditions[?(@.type=='Ready')].status")


def workflow_crd() -> dict[str, Any]:
    spec = obj("WorkflowSpec defines a reusable Workflow.", {
        **io_specs("Workflow"),
        "jobs": jobs_map("Jobs maps job names to jobs; jobs run in parallel unless ordered by "
                         "needs."),
    }, required=["jobs"], rules=[needs_rule("workflow")])
    status = obj("WorkflowStatus is the observed state of a Workflow definition.", {
        "conditions": conditions("Conditions report definition-level validation (Ready)."),
    })
    return crd("Workflow", "workflows", ["wf"], [ready_column()], spec, status,
               "Workflow is a reusable, GitHub-Actions-shaped workflow definition.")


def workflow_run_status() -> Schema:
    step_phase = ["Pending", "Running", "Succeeded", "Failed", "Skipped"]
    action_step = obj("ActionStepStatus tracks one Action-internal child Run.", {
        "name": label_value("Name is the Action-local step name."),
        "phase": string("Phase of the Action step.", enum=step_phase),
        "runName": string("RunName is the child Run.", max_length=253),
        "outputs": string_map("Outputs of the Action step.", max_properties=64),
    }, required=["name", "phase"])
    step = obj("StepStatus tracks one job step.", {
        "name": label_value("Name is the step name."),
        "phase": string("Phase of the step.", enum=step_phase),
        "runName": string("RunName is the child Run of a run step.", max_length=253),
        "outputs": string_map("Outputs of the step.", max_properties=64),
        "actionSteps": array("ActionSteps tracks the child Runs of an Action-call step.",
                             action_step, max_items=128),
    }, required=["name", "phase"], **{"x-kubernetes-preserve-unknown-fields": True})
    job = obj("JobStatus tracks one job.", {
        "phase": string("Phase of the job.", enum=["Pending", "Waiting", "Running", "Succeeded",
                                                    "Failed", "Skipped"]),
        "pre": string_list("Pre is the sorted list of jobs this job needs.", max_items=64,
                           item_max_length=63),
        "workflowRunName": string("WorkflowRunName is the child WorkflowRun of a uses job.",
                                  max_length=253),
        "outputs": string_map("Outputs of the job.", max_properties=64),
        "steps": array("Steps in job order.", step, max_items=128),
        "artifacts": map_of(
            "Artifacts maps each artifact name to the reference from the last successful child "
            "Run that produced it (seed 000).",
            artifact_ref("ArtifactRef is compact metadata of one stored artifact."),
            max_properties=64),
    }, required=["phase"], **{"x-kubernetes-preserve-unknown-fields": True})
    return obj("WorkflowRunStatus is the observed state of a WorkflowRun.", {
        "phase": string("Phase of the WorkflowRun.", default="Pending",
                        enum=["Pending", "Running", "Succeeded", "Failed", "Cancelled"]),
        "jobs": map_of("Jobs tracks each job by name.", job, max_properties=64),
        "snapshotName": string("SnapshotName is the ControllerRevision holding the execution "
                               "snapshot: the Actions the run uses, frozen at start (called "
                               "Workflows bind when their call becomes ready).", max_length=253),
        "message": string("Message is a human-readable status or error message.",
                          max_length=4096),
        "conditions": conditions("Conditions are Accepted, WaitingForWorkspace (True while a "
                                 "job's step Run waits for its job workspace) and WorkspaceLost."),
    }, required=["phase"])


def workflow_run_crd() -> dict[str, Any]:
    spec = obj("WorkflowRunSpec defines one workflow execution.", {
        "jobs": jobs_map("Jobs maps job names to jobs; immutable after creation."),
        "cancelRequested": boolean("CancelRequested requests cancellation; it may not be reset "
                                   "to false."),
    }, required=["jobs"], rules=[
        needs_rule("WorkflowRun"),
        rule("self.jobs == oldSelf.jobs", "jobs are immutable after WorkflowRun creation",
             field_path=".jobs", reason="FieldValueForbidden"),
        one_way_true("cancelRequested"),
    ])
    return crd("WorkflowRun", "workflowruns", ["wfr"], [column("Phase", ".status.phase")], spec,
               workflow_run_status(), "WorkflowRun is one execution of a set of jobs.")


def action_crd() -> dict[str, Any]:
    spec = obj("ActionSpec defines a reusable step group.", {
        **io_specs("Action"),
        "steps": array("Steps is the reusable step sequence (run steps only).", step_spec(),
                       min_items=1, max_items=128),
    }, required=["steps"], rules=[
        rule("self.steps.all(step, has(step.run) && !has(step.uses) && !has(step.with))",
             "Action steps must set run and may not use another Action", field_path=".steps"),
        rule("self.steps.all(step, !has(step.artifacts))",
             "Action steps may not declare artifacts; import them in a run step of the calling "
             "job", field_path=".steps", reason="FieldValueForbidden"),
    ])
    status = obj("ActionStatus is the observed state of an Action definition.", {
        "conditions": conditions("Conditions report definition-level validation (Ready)."),
    })
    return crd("Action", "actions", [], [ready_column()], spec, status,
               "Action is a reusable group of run steps called from a workflow step.")


def build_all(core: CoreSchemas) -> list[dict[str, Any]]:
    return [
        runtime_crd(core),
        run_crd(core),
        persistent_workspace_crd(),
        workflow_crd(),
        workflow_run_crd(),
        action_crd(),
    ]
