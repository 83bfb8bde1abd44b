"""The dev.kruntimes.io/v1alpha1 API (developer workspaces, ADR 0020): Project, Workspace,
Operation. Rules that span objects or need parsing (repository URL, ref names,
operation_in_progress, base_ref_not_synced) are enforced by the devws-admission function; the
rules here are the ones a single object can check. docs/workspaces-dev.md maps every rule.
"""

from __future__ import annotations

from typing import Any

from schema import (DNS_SUBDOMAIN, Schema, array, boolean, conditions, date_time, integer, obj,
                    rule, string)

GROUP = "dev.kruntimes.io"
VERSION = "v1alpha1"
CATEGORIES = ["devws"]
AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}

OBSERVED = ["provisioning", "starting", "ready", "stopping", "stopped", "deleting", "deleted",
            "unavailable"]
OP_KINDS = ["create_project", "create_workspace", "start", "restart", "stop", "delete_workspace",
            "delete_project", "install_plugin", "remove_plugin"]
OP_STATES = ["queued", "running", "retry_wait", "blocked", "succeeded", "failed"]
STEPS = ["sandbox", "node", "clone", "plugin", "quiesce", "terminate", "cleanup", "done"]
EFFECT_KINDS = ["sandbox_ensure", "sandbox_terminate", "workspace_data_delete"]
REASON_RE = r"^[a-z][a-z0-9_]*$"
PLUGIN_NAME_RE = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_PLUGINS = 16
PLUGIN_KINDS = "['install_plugin', 'remove_plugin']"


def column(name: str, path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "type": kind, "jsonPath": path}
    if priority:
        c["priority"] = priority
    return c


def name_ref(description: str) -> Schema:
    return string(description, min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)


def immutable(field: str, unset: str | None = None, why: str = "") -> Schema:
    """field may not change; with `unset` (the value an unset field counts as), set and unset
    compare through it, so setting or clearing an optional field is a change too."""
    def value(o: str) -> str:
        return f"{o}.{field}" if unset is None else f"(has({o}.{field}) ? {o}.{field} : {unset})"
    return rule(f"{value('self')} == {value('oldSelf')}", f"{field} is immutable{why}",
                field_path=f".{field}", reason="FieldValueForbidden")


def once_set(field: str, op: str, message: str) -> Schema:
    """Unconstrained while unset; once set it stays set and `self.field op oldSelf.field` holds
    (== : immutable once set; >= : may not decrease)."""
    return rule(f"!has(oldSelf.{field}) || (has(self.{field}) && "
                f"self.{field} {op} oldSelf.{field})", message, field_path=f".{field}",
                reason="FieldValueForbidden")


def reason(description: str) -> Schema:
    return string(description, max_length=64, pattern=REASON_RE)


def envelope(kind: str, plural: str, short: list[str], columns: list[dict[str, Any]],
             spec: Schema, status: Schema, description: str) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION, "served": True, "storage": True, "subresources": {"status": {}},
        "additionalPrinterColumns": columns + [AGE],
        "schema": {"openAPIV3Schema": obj(description, {
            "apiVersion": string("APIVersion defines the versioned schema of this representation "
                                 "of an object."),
            "kind": string("Kind is a string value representing the REST resource this object "
                           "represents."),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        }, required=["spec"])},
    }
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower(),
             "categories": CATEGORIES, "shortNames": short}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


def project_crd() -> dict[str, Any]:
    repository = obj("Repository is the Project's single repository binding.", {
        "url": string("URL of the external repository: https or ssh, without query, fragment "
                      "or embedded password (checked by admission: invalid_repository_url).",
                      min_length=1, max_length=2048),
        "defaultBranch": string("DefaultBranch is the one concrete branch the binding syncs "
                                "(not HEAD: default_branch_required; a valid ref name: "
                                "invalid_ref). It is also the short name of every Workspace "
                                "branch.", min_length=1, max_length=255),
        "credentialRef": name_ref("CredentialRef names a Secret of the Project's namespace "
                                  "(kubernetes.io/basic-auth: username, password or access "
                                  "token) used only by the Git Server's repository sync, where "
                                  "the namespace grants it get on that Secret; never a secret "
                                  "value. Its creator must be able to read it "
                                  "(credential_forbidden). Immutable."),
    }, required=["url", "defaultBranch"])
    spec = obj("ProjectSpec is a Git repository's development environment.", {
        "displayName": string("DisplayName may be changed at any time.", max_length=256),
        "repository": repository,
        "substrate": string("Substrate that runs every Workspace's sandboxes and holds their "
                            "data: kubernetes (a sandbox is a Pod, data a PVC) or opensandbox "
                            "(the OpenSandbox server configured in the ConfigMap "
                            "kruntimes-devws); absent means kubernetes. Immutable: effects "
                            "are reconciled by ID on it.",
                            enum=["kubernetes", "opensandbox"]),
        "syncRequests": integer("SyncRequests: bump it to sync the repository binding again (a "
                                "new snapshot of the default branch's tip; krt project sync). "
                                "Workspaces created after the sync clone the new snapshot.",
                                minimum=0),
    }, required=["repository"], rules=[
        rule("self.repository.url == oldSelf.repository.url && "
             "self.repository.defaultBranch == oldSelf.repository.defaultBranch",
             "repository url and defaultBranch are immutable", field_path=".repository",
             reason="FieldValueForbidden"),
        immutable("substrate", unset="'kubernetes'"),
        immutable("repository.credentialRef", unset="''",
                  why=" (admission checks the creator may read it)"),
        once_set("syncRequests", ">=", "syncRequests may not decrease"),
    ])
    status = obj("ProjectStatus is the Project's observed lifecycle and binding.", {
        "lifecycle": string("Lifecycle: provisioning -> active -> deleting -> deleted.",
                            enum=["provisioning", "active", "deleting", "deleted"]),
        "bindingId": string("BindingId identifies the repository binding (its snapshot refs "
                            "are refs/ora/upstreams/<bindingId>/snapshots/<commit>).",
                            max_length=128),
        "snapshot": obj("Snapshot is the binding's current snapshot on the Git Server.", {
            "ref": string("Ref of the snapshot.", max_length=512),
            "commit": string("Commit of the snapshot.", max_length=64,
                             pattern="^[0-9a-f]{40}([0-9a-f]{24})?$"),
        }, required=["ref", "commit"]),
        "sync": obj("Sync is the binding's last repository operation.", {
            "operationId": string("OperationId of the last sync or publish.", max_length=253),
            "state": string("State of that operation.",
                            enum=["running", "succeeded", "failed"]),
            "requestsSeen": integer("RequestsSeen is the spec.syncRequests this sync answers.",
                                    minimum=0),
        }, required=["state"]),
        "conditions": conditions("Conditions of the Project."),
    })
    return envelope("Project", "projects", ["proj"], [
        column("Lifecycle", ".status.lifecycle"),
        column("Branch", ".spec.repository.defaultBranch"),
        column("Sync", ".status.sync.state"),
        column("Snapshot", ".status.snapshot.commit", priority=1),
        column("Repository", ".spec.repository.url", priority=1),
    ], spec, status, "Project is a Git repository's development environment; it owns exactly "
        "one main Workspace.")


def plugin_name() -> Schema:
    return string("Name of the plugin: its directory ~/.krt/plugins/<name> in the Workspace's "
                  "home.", min_length=1, max_length=63, pattern=PLUGIN_NAME_RE)


def plugin_manifest() -> Schema:
    return string("Manifest of the plugin (JSON, read by the Node that installs it: an object "
                  "whose optional files map relative paths to contents).", max_length=4096)


def plugin_item() -> Schema:
    return obj("One plugin execution of the frozen plugin set.", {
        "id": string("ID of the execution: the Node's idempotency key (its install marker).",
                     min_length=1, max_length=63),
        "name": plugin_name(),
        "action": string("Action: install or remove.", max_length=16, enum=["install", "remove"]),
        "manifest": plugin_manifest(),
        "result": string("Result once the Node reported it; never changed.", max_length=16,
                         enum=["installed", "removed", "failed"]),
        "message": string("Message of a failed execution.", max_length=1024),
    }, required=["id", "name", "action"])


def sandbox_status() -> Schema:
    return obj("Sandbox is the Workspace's one live (unterminated) sandbox instance.", {
        "id": string("ID is the sandbox instance ID (= its sandbox_ensure effect ID).",
                     max_length=253),
        "generation": integer("Generation is the runtime generation it belongs to.",
                              fmt="int64", minimum=0),
        "nodeId": string("NodeId the Node in it must present.", max_length=253),
        "terminated": boolean("Terminated is true once termination is confirmed."),
    }, required=["id", "generation"])


def node_status() -> Schema:
    return obj("Node is the Workspace's one live Node instance.", {
        "nodeId": string("NodeId presented by the Node.", max_length=253),
        "incarnation": string("Incarnation of the Node process.", max_length=253),
        "sandboxId": string("SandboxId it runs in.", max_length=253),
        "generation": integer("Generation it registered for.", fmt="int64", minimum=0),
        "initialized": boolean("Initialized Node."),
        "connected": boolean("Connected Node."),
        "heartbeatAt": date_time("HeartbeatAt is the last heartbeat."),
    })


def workspace_status() -> Schema:
    return obj("WorkspaceStatus is the state Cloud confirmed from evidence.", {
        "observedState": string("ObservedState confirmed from evidence.", enum=OBSERVED),
        "admissionOpen": boolean("AdmissionOpen: new executions are accepted."),
        "admissionEpoch": integer("AdmissionEpoch grows each time admission closes; idle proofs "
                                  "of an older epoch are void.", fmt="int64", minimum=0),
        "runtimeGeneration": integer("RuntimeGeneration grows with each planned sandbox.",
                                     fmt="int64", minimum=0),
        "requestedRef": string("RequestedRef is the Project's default branch.", max_length=255),
        "workspaceBranch": string("WorkspaceBranch is refs/heads/workspaces/<workspaceId>/"
                                  "<requestedRef> on the Git Server.", max_length=1024),
        "baseCommitId": string("BaseCommitId is the snapshot commit the Workspace was cloned "
                               "from.", max_length=64),
        "sandbox": sandbox_status(),
        "node": node_status(),
        "idleProof": obj("IdleProof is the Node's last idle report.", {
            "epoch": integer("Epoch it was given for.", fmt="int64", minimum=0),
            "idle": boolean("Idle is the Node's answer."),
        }, required=["epoch", "idle"]),
        "plugins": array("Plugins installed on this Workspace (one entry per plugin instance): "
                         "a failed install is recorded here with its message and does not "
                         "keep the Workspace from being ready.", obj("One plugin instance.", {
                             "name": plugin_name(),
                             "manifest": plugin_manifest(),
                             "state": string("State: installed, or failed (its last install "
                                             "failed).", enum=["installed", "failed"]),
                             "message": string("Message of a failed install.", max_length=1024),
                             "operation": string("Operation that last changed it.",
                                                 max_length=253),
                         }, required=["name", "state"]), max_items=MAX_PLUGINS,
                         list_type="map", list_map_keys=["name"]),
        "operation": obj("Operation is the operation that last changed this Workspace; its "
                         "state here is the commit point of 'ready and succeeded together'.", {
            "name": string("Name of the Operation.", max_length=253),
            "state": string("State of it.", enum=OP_STATES),
            "step": string("Step of it.", enum=STEPS),
        }, required=["name"]),
        "conditions": conditions("Conditions of the Workspace."),
    }, rules=[
        once_set("admissionEpoch", ">=", "admissionEpoch may not decrease"),
        once_set("runtimeGeneration", ">=", "runtimeGeneration may not decrease"),
        once_set("baseCommitId", "==", "baseCommitId is immutable once set"),
    ])


def workspace_crd() -> dict[str, Any]:
    spec = obj("WorkspaceSpec is a runtime of a Project.", {
        "project": name_ref("Project is the owning Project (same namespace)."),
        "kind": string("Kind: main (one per Project, created with it) or isolated (one task).",
                       enum=["main", "isolated"]),
        "desiredState": string("DesiredState is what the user wants.", default="running",
                               enum=["running", "stopped", "deleted"]),
        "taskTitle": string("TaskTitle of an isolated Workspace.", max_length=256),
        "baseRef": string("BaseRef of an isolated Workspace: empty, HEAD or the Project's "
                          "default branch (else base_ref_not_synced).", max_length=255),
        "creator": string("Creator is the user who created the Workspace (set by admission).",
                          max_length=512),
    }, required=["project", "kind"], rules=[
        immutable("project"), immutable("kind"),
        immutable("baseRef", unset="''"), immutable("creator", unset="''"),
        rule("self.kind == 'isolated' || !has(self.taskTitle)",
             "taskTitle is only for isolated Workspaces", field_path=".taskTitle"),
    ])
    return envelope("Workspace", "workspaces", ["ws"], [
        column("Project", ".spec.project"),
        column("Kind", ".spec.kind"),
        column("Desired", ".spec.desiredState"),
        column("Observed", ".status.observedState"),
        column("Gen", ".status.runtimeGeneration", kind="integer"),
        column("Operation", ".status.operation.name", priority=1),
        column("Step", ".status.operation.step"),
    ], spec, workspace_status(), "Workspace is a runtime of a Project: its own persistent data, "
        "its own clone, and the sandbox and Node that mount it.")


def effect() -> Schema:
    return obj("Effect is a durable intent of one external action.", {
        "id": string("ID is the external idempotency key (for sandbox_ensure also the sandbox "
                     "instance ID).", min_length=1, max_length=253),
        "kind": string("Kind of the effect.", enum=EFFECT_KINDS),
        "workspace": string("Workspace the effect acts on.", max_length=253),
        "generation": integer("Generation it was planned for.", fmt="int64", minimum=0),
        "leaseEpoch": integer("LeaseEpoch that last reconciled it.", fmt="int64", minimum=0),
        "externalId": string("ExternalId once recorded; never changed.", max_length=253),
        "outcome": string("Outcome once known.", enum=["succeeded", "failed"]),
        "nodeId": string("NodeId returned by sandbox_ensure.", max_length=253),
        "terminated": boolean("Terminated returned by sandbox_terminate."),
        "removed": boolean("Removed returned by workspace_data_delete."),
        "sentAt": date_time("SentAt: when a create for this effect may first have been sent "
                            "(substrates without an idempotency key, OpenSandbox): a create is "
                            "sent only within a short window after it, and a new SentAt is "
                            "written only once a create sent in the window has had time to "
                            "land."),
    }, required=["id", "kind", "leaseEpoch"])


def operation_status() -> Schema:
    clone_input = obj("CloneInput is frozen once per operation.", {
        "repositoryUrl": string("Git Server repository URL.", max_length=2048),
        "snapshotRef": string("Snapshot ref.", max_length=512),
        "baseCommit": string("Snapshot commit.", max_length=64),
        "workspaceBranch": string("Workspace branch.", max_length=1024),
    }, required=["repositoryUrl", "snapshotRef", "baseCommit", "workspaceBranch"])
    return obj("OperationStatus is the durable progress of the operation.", {
        "state": string("State of the operation.", enum=OP_STATES),
        "step": string("Step the operation is on.", enum=STEPS),
        "steps": array("Steps of this kind of operation, in order.", string(enum=STEPS),
                       max_items=8),
        "retryAt": date_time("RetryAt: when a retry_wait operation may be claimed again."),
        "reason": reason("Reason of the last deferral or of the failure."),
        "message": string("Message for people.", max_length=4096),
        "cloneAttempts": integer("CloneAttempts: failed clone executions so far.", minimum=0),
        "cloneUnknown": boolean("CloneUnknown: the last clone's result is unknown."),
        "cloneInput": clone_input,
        "gitServerCA": string("GitServerCA: the CA bundle (PEM) the Node trusts for the Git Server "
                              "when it runs this operation's clone: the configured one (ConfigMap "
                              "kruntimes-devws) when the clone step is entered, refreshed while the "
                              "step runs, so a rotated CA reaches the next attempt. Not part of the "
                              "frozen clone input.", max_length=65536),
        "plugins": array("Plugins is the plugin set frozen when the operation entered its "
                         "plugin step: one execution per plugin, each with its result once "
                         "the Node reported it.", plugin_item(), max_items=MAX_PLUGINS),
        "retriesSeen": integer("RetriesSeen is the spec.retryRequests already honoured.",
                               minimum=0),
        "effects": array("Effects planned by this operation.", effect(), max_items=160),
        "workspaceBefore": string("WorkspaceBefore is the observed state to restore on "
                                  "resource_in_use.", enum=OBSERVED),
        "workspacesBefore": array("WorkspacesBefore: the Workspaces a delete_project closes at "
                                  "once, each with the observed state to restore on "
                                  "resource_in_use and the admission epoch its close bumped to.",
                                  obj("One Workspace of the Project.", {
                                      "workspace": string("Workspace name.", max_length=253),
                                      "observedState": string("Observed state before.",
                                                              enum=OBSERVED),
                                      "admissionEpoch": integer("Admission epoch of the close.",
                                                                fmt="int64", minimum=0),
                                  }, required=["workspace", "admissionEpoch"]), max_items=64),
        "conditions": conditions("Conditions of the Operation."),
    }, rules=[
        once_set("cloneInput", "==", "cloneInput is frozen once set"),
        rule("!has(oldSelf.plugins) || (has(self.plugins) && "
             "self.plugins.size() == oldSelf.plugins.size() && "
             "oldSelf.plugins.all(o, self.plugins.exists(n, n.id == o.id && n.name == o.name && "
             "n.action == o.action && (!has(o.result) || (has(n.result) && "
             "n.result == o.result)))))",
             "the plugin set is frozen once set and a plugin result never changes",
             field_path=".plugins", reason="FieldValueForbidden"),
        rule("!has(oldSelf.state) || !(oldSelf.state in ['succeeded', 'failed']) || "
             "self.state == oldSelf.state", "a finished operation stays finished",
             field_path=".state", reason="FieldValueForbidden"),
    ])


def operation_crd() -> dict[str, Any]:
    spec = obj("OperationSpec is one lifecycle request.", {
        "project": name_ref("Project the operation belongs to."),
        "workspace": name_ref("Workspace it acts on (unset for delete_project)."),
        "kind": string("Kind of the operation.", enum=OP_KINDS),
        "plugin": obj("Plugin of an install_plugin (name and manifest) or remove_plugin "
                      "(name only) operation.", {
                          "name": plugin_name(),
                          "manifest": plugin_manifest(),
                      }, required=["name"]),
        "retryRequests": integer("RetryRequests: bump it to retry a blocked or retry_wait "
                                 "operation explicitly.", minimum=0),
    }, required=["project", "kind"], rules=[
        immutable("project"), immutable("kind"),
        immutable("workspace", unset="''"),
        rule("self.kind == 'delete_project' || has(self.workspace)",
             "workspace is required for this kind", field_path=".workspace",
             reason="FieldValueRequired"),
        rule(f"(self.kind in {PLUGIN_KINDS}) == has(self.plugin)",
             "plugin is required for install_plugin and remove_plugin, and only for them",
             field_path=".plugin", reason="FieldValueRequired"),
        rule("!has(self.plugin) || (self.kind == 'install_plugin') == has(self.plugin.manifest)",
             "install_plugin needs plugin.manifest and remove_plugin takes none",
             field_path=".plugin.manifest"),
        rule("has(self.plugin) == has(oldSelf.plugin) && (!has(self.plugin) || "
             "self.plugin == oldSelf.plugin)", "plugin is immutable", field_path=".plugin",
             reason="FieldValueForbidden"),
        once_set("retryRequests", ">=", "retryRequests may not decrease"),
    ])
    return envelope("Operation", "operations", ["wsop"], [
        column("Kind", ".spec.kind"),
        column("Workspace", ".spec.workspace"),
        column("State", ".status.state"),
        column("Step", ".status.step"),
        column("Reason", ".status.reason"),
    ], spec, operation_status(), "Operation is a durable lifecycle operation of a Project or "
        "Workspace, advanced step by step by the devws-controller.")


def build_devws() -> list[dict[str, Any]]:
    return [project_crd(), workspace_crd(), operation_crd()]
