"""An in-memory stand-in for the part of AWX's REST API (api/v2) that awxkit's `awx import` walks.

awxkit has no schema for its import format: `ApiV2.import_assets` asks the server (OPTIONS) which fields
each endpoint accepts, drops every other field without a word, resolves each natural key by querying
the list endpoints, and posts. So the file is checked here by running awxkit's own import code against
this stand-in, which answers as AWX 24.6.1 does:

- OPTIONS: the POST fields of each endpoint (POST_FIELDS, from AWX's serializers; a foreign key is
  type "id", as AWX reports it); a field not listed here is one AWX would ignore;
- GET lists filtered by field, details, and the related sub-lists awxkit follows;
- POST creates (400 when a required field or a foreign key is missing), POST {"id"} attaches (204),
  PUT replaces;
- POST survey_spec applies AWX's own survey checks (JobTemplateSurveySpec._validate_spec_data in
  awx/api/views/__init__.py, restated here);
- a workflow node's and a schedule's prompts (limit, inventory, ...) are checked as AWX checks a saved launch
  configuration (UnifiedJobTemplate._accept_or_ignore_job_kwargs): a value other than the template's own is
  refused unless the template asks for it on launch; a credential attached to a node follows AWX's
  LaunchConfigCredentialsBase.is_valid_relation (the template asks for credentials, does not have this one
  already, and the node has no other of its type);
- a schedule's rrule gets AWX's own checks (SchedulePreviewSerializer.validate_rrule, restated), and a choice
  field (an execution environment's pull) only takes AWX's choices;
- a schedule, when it is saved (POST, or a re-import's PUT), must answer every required question of its template's
  survey in its extra_data: 400 variables_needed_to_start ("'<variable>' value missing") otherwise, as AWX's
  ScheduleSerializer refuses it (its template's _accept_or_ignore_job_kwargs); a workflow node is not checked so
  (AWX leaves the required answers out of a node's check);
- a launch (POST job_templates/N/launch/, what `awx job_templates launch` and the API do) must answer every
  required question: 400 variables_needed_to_start otherwise, whatever the question's default; the job then gets
  the answers and, for every question not answered, its default (SurveyJobTemplateMixin);
- a project syncs (git) only from a URL this AWX reaches (`reachable`), and a manual project's local_path must be a
  folder of PROJECTS_ROOT (`local_paths`); a job template's playbook must be one the project holds after its sync:
  400 {"playbook": ["Playbook not found for project."]} otherwise (JobOptionsSerializer.validate).

Pre-existing objects (the Machine credential type and the machine credential an operator creates by
hand) are added with `add`.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import requests

BASE = "/api/v2/"
# import_assets walks these (awxkit.api.pages.api.EXPORTABLE_RESOURCES) -> the list endpoint's path.
ROOT_ENDPOINTS = {
    "users": "users",
    "organizations": "organizations",
    "teams": "teams",
    "credential_types": "credential_types",
    "credentials": "credentials",
    "notification_templates": "notification_templates",
    "projects": "projects",
    "inventory": "inventories",
    "inventory_sources": "inventory_sources",
    "job_templates": "job_templates",
    "workflow_job_templates": "workflow_job_templates",
    "execution_environments": "execution_environments",
    "applications": "applications",
    "schedules": "schedules",
}
# The real root lists many more; awxkit's creation order needs this one too (the schedules' dependency).
OTHER_ROOT_ENDPOINTS = {"system_job_templates": "system_job_templates"}
# list path -> the object's "type"
TYPES = {
    "users": "user",
    "organizations": "organization",
    "teams": "team",
    "credential_types": "credential_type",
    "credentials": "credential",
    "notification_templates": "notification_template",
    "projects": "project",
    "inventories": "inventory",
    "inventory_sources": "inventory_source",
    "job_templates": "job_template",
    "workflow_job_templates": "workflow_job_template",
    "execution_environments": "execution_environment",
    "applications": "o_auth2_application",
    "schedules": "schedule",
    "system_job_templates": "system_job_template",
    "hosts": "host",
    "groups": "group",
    "workflow_job_template_nodes": "workflow_job_template_node",
}

_S, _B, _I, _ID, _J = "string", "boolean", "integer", "id", "json"
# (type, required) per POST field, from AWX 24.6.1's serializers (awx/api/serializers.py).
POST_FIELDS: dict[str, dict[str, tuple[str, bool]]] = {
    "organizations": {
        "name": (_S, True),
        "description": (_S, False),
        "max_hosts": (_I, False),
        "custom_virtualenv": (_S, False),
        "default_environment": (_ID, False),
    },
    "projects": {
        "name": (_S, True),
        "description": (_S, False),
        "local_path": (_S, False),
        "scm_type": ("choice", False),
        "scm_url": (_S, False),
        "scm_branch": (_S, False),
        "scm_refspec": (_S, False),
        "scm_clean": (_B, False),
        "scm_track_submodules": (_B, False),
        "scm_delete_on_update": (_B, False),
        "credential": (_ID, False),
        "timeout": (_I, False),
        "scm_update_on_launch": (_B, False),
        "scm_update_cache_timeout": (_I, False),
        "allow_override": (_B, False),
        "default_environment": (_ID, False),
        "signature_validation_credential": (_ID, False),
        "organization": (_ID, True),
    },
    "inventories": {
        "name": (_S, True),
        "description": (_S, False),
        "organization": (_ID, True),
        "kind": ("choice", False),
        "host_filter": (_S, False),
        "variables": (_J, False),
        "prevent_instance_group_fallback": (_B, False),
    },
    "hosts": {
        "name": (_S, True),
        "description": (_S, False),
        "inventory": (_ID, True),
        "enabled": (_B, False),
        "instance_id": (_S, False),
        "variables": (_J, False),
    },
    "groups": {
        "name": (_S, True),
        "description": (_S, False),
        "inventory": (_ID, True),
        "variables": (_J, False),
    },
    "credentials": {
        "name": (_S, True),
        "description": (_S, False),
        "organization": (_ID, False),
        "credential_type": (_ID, True),
        "inputs": (_J, False),
        "user": (_ID, False),
        "team": (_ID, False),
    },
    "job_templates": {
        **dict.fromkeys(
            (
                "ask_scm_branch_on_launch",
                "ask_diff_mode_on_launch",
                "ask_variables_on_launch",
                "ask_limit_on_launch",
                "ask_tags_on_launch",
                "ask_skip_tags_on_launch",
                "ask_job_type_on_launch",
                "ask_verbosity_on_launch",
                "ask_inventory_on_launch",
                "ask_credential_on_launch",
                "ask_execution_environment_on_launch",
                "ask_labels_on_launch",
                "ask_forks_on_launch",
                "ask_job_slice_count_on_launch",
                "ask_timeout_on_launch",
                "ask_instance_groups_on_launch",
                "survey_enabled",
                "become_enabled",
                "diff_mode",
                "allow_simultaneous",
                "force_handlers",
                "use_fact_cache",
                "prevent_instance_group_fallback",
            ),
            (_B, False),
        ),
        "name": (_S, True),
        "description": (_S, False),
        "job_type": ("choice", False),
        "inventory": (_ID, False),
        "project": (_ID, True),
        "playbook": (_S, True),
        "scm_branch": (_S, False),
        "forks": (_I, False),
        "limit": (_S, False),
        "verbosity": ("choice", False),
        "extra_vars": (_J, False),
        "job_tags": (_S, False),
        "skip_tags": (_S, False),
        "start_at_task": (_S, False),
        "timeout": (_I, False),
        "execution_environment": (_ID, False),
        "host_config_key": (_S, False),
        "job_slice_count": (_I, False),
        "webhook_service": ("choice", False),
        "webhook_credential": (_ID, False),
    },
    "workflow_job_templates": {
        **dict.fromkeys(
            (
                "survey_enabled",
                "allow_simultaneous",
                "ask_variables_on_launch",
                "ask_inventory_on_launch",
                "ask_scm_branch_on_launch",
                "ask_limit_on_launch",
                "ask_labels_on_launch",
                "ask_skip_tags_on_launch",
                "ask_tags_on_launch",
            ),
            (_B, False),
        ),
        "name": (_S, True),
        "description": (_S, False),
        "extra_vars": (_J, False),
        "organization": (_ID, False),
        "inventory": (_ID, False),
        "limit": (_S, False),
        "scm_branch": (_S, False),
        "webhook_service": ("choice", False),
        "webhook_credential": (_ID, False),
        "job_tags": (_S, False),
        "skip_tags": (_S, False),
    },
    "execution_environments": {
        "name": (_S, True),
        "description": (_S, False),
        "organization": (_ID, False),
        "image": (_S, True),
        "credential": (_ID, False),
        "pull": ("choice", False),
    },
    "schedules": {
        "name": (_S, True),
        "description": (_S, False),
        "extra_data": (_J, False),
        "inventory": (_ID, False),
        "scm_branch": (_S, False),
        "job_type": ("choice", False),
        "job_tags": (_S, False),
        "skip_tags": (_S, False),
        "limit": (_S, False),
        "diff_mode": (_B, False),
        "verbosity": ("choice", False),
        "execution_environment": (_ID, False),
        "forks": (_I, False),
        "job_slice_count": (_I, False),
        "timeout": (_I, False),
        "unified_job_template": (_ID, True),
        "enabled": (_B, False),
        "rrule": (_S, True),
    },
    "workflow_job_template_nodes": {
        "extra_data": (_J, False),
        "inventory": (_ID, False),
        "scm_branch": (_S, False),
        "job_type": ("choice", False),
        "job_tags": (_S, False),
        "skip_tags": (_S, False),
        "limit": (_S, False),
        "diff_mode": (_B, False),
        "verbosity": ("choice", False),
        "execution_environment": (_ID, False),
        "forks": (_I, False),
        "job_slice_count": (_I, False),
        "timeout": (_I, False),
        "workflow_job_template": (_ID, True),
        "unified_job_template": (_ID, False),
        "all_parents_must_converge": (_B, False),
        "identifier": (_S, False),
    },
}
# Other endpoints awxkit asks about: they accept a name (nothing of theirs is in the file).
for _path in set(TYPES) - set(POST_FIELDS):
    POST_FIELDS[_path] = {"name": (_S, True), "description": (_S, False)}

# sub-lists that create (parent path, sub) -> child path; the parent's id goes into the child's field
CREATE_SUBLISTS = {
    ("inventories", "hosts"): ("hosts", "inventory"),
    ("inventories", "groups"): ("groups", "inventory"),
    ("workflow_job_templates", "workflow_nodes"): ("workflow_job_template_nodes", "workflow_job_template"),
}
# sub-lists that attach existing objects: (parent path, sub) -> child path
ATTACH_SUBLISTS = {
    ("job_templates", "credentials"): "credentials",
    ("groups", "hosts"): "hosts",
    ("groups", "children"): "groups",
    ("workflow_job_template_nodes", "success_nodes"): "workflow_job_template_nodes",
    ("workflow_job_template_nodes", "failure_nodes"): "workflow_job_template_nodes",
    ("workflow_job_template_nodes", "always_nodes"): "workflow_job_template_nodes",
    ("workflow_job_template_nodes", "credentials"): "credentials",
    ("schedules", "credentials"): "credentials",
}
# AWX's choices for the choice fields the file sets (the models' choices)
CHOICES = {
    ("execution_environments", "pull"): {"", "always", "missing", "never"},
    ("job_templates", "job_type"): {"run", "check"},
    ("job_templates", "verbosity"): {0, 1, 2, 3, 4, 5},
}
# A launch configuration's prompts (a workflow node's, a schedule's) -> the template's field that allows them
# (JobTemplate.get_ask_mapping); a value equal to the template's own is no prompt at all.
ASK_MAPPING = {
    "inventory": "ask_inventory_on_launch",
    "limit": "ask_limit_on_launch",
    "scm_branch": "ask_scm_branch_on_launch",
    "job_type": "ask_job_type_on_launch",
    "job_tags": "ask_tags_on_launch",
    "skip_tags": "ask_skip_tags_on_launch",
    "diff_mode": "ask_diff_mode_on_launch",
    "verbosity": "ask_verbosity_on_launch",
    "execution_environment": "ask_execution_environment_on_launch",
    "forks": "ask_forks_on_launch",
    "job_slice_count": "ask_job_slice_count_on_launch",
    "timeout": "ask_timeout_on_launch",
}
# what a template's field is when the file does not set it (AWX's model defaults)
FIELD_DEFAULTS = {
    "limit": "",
    "scm_branch": "",
    "job_tags": "",
    "skip_tags": "",
    "job_type": "run",
    "forks": 0,
    "verbosity": 0,
    "timeout": 0,
    "job_slice_count": 1,
    "diff_mode": False,
}
LAUNCH_CONFIGS = ("workflow_job_template_nodes", "schedules")
# AWX's survey question types and the Python type of their defaults (JobTemplateSurveySpec.ALLOWED_TYPES)
SURVEY_TYPES: dict[str, type | tuple[type, ...]] = {
    "text": str,
    "textarea": str,
    "password": str,
    "multiplechoice": str,
    "multiselect": str,
    "integer": int,
    "float": (float, int),
}


def rrule_errors(rrule: Any) -> list[str]:
    """What AWX's schedules refuse in an rrule (SchedulePreviewSerializer.validate_rrule, restated; AWX then parses
    it with dateutil, which is not restated here)."""
    if not isinstance(rrule, str) or not rrule:
        return ["This field may not be blank."]
    errors = []
    dtstarts = re.findall(r".*?(DTSTART(;[^:]+)?\:[0-9]+T[0-9]+Z?)", rrule)
    if not dtstarts:
        errors.append("Valid DTSTART required in rrule. Value should start with: DTSTART:YYYYMMDDTHHMMSSZ")
    if re.findall(r".*?(DTSTART:[0-9]+T[0-9]+) ", rrule):
        errors.append("DTSTART cannot be a naive datetime.  Specify ;TZINFO= or YYYYMMDDTHHMMSSZZ.")
    if len(dtstarts) > 1:
        errors.append("Multiple DTSTART is not supported.")
    if "rrule:" not in rrule.lower():
        errors.append("One or more rule required in rrule.")
    for word in ("exdate:", "rdate:"):
        if word in rrule.lower():
            errors.append(f"{word[:-1].upper()} not allowed in rrule.")
    for rule in re.findall(r".*?(RULE\:[^\s]*)", rrule):
        if "interval" not in rule.lower():
            errors.append(f"INTERVAL required in rrule: {rule}")
        elif "secondly" in rule.lower():
            errors.append(f"SECONDLY is not supported: {rule}")
        if re.match(r".*?BYDAY[\:\=][0-9]+[a-zA-Z]{2}", rule):
            errors.append(f"BYDAY with numeric prefix not supported: {rule}")
        if "COUNT" in rule and "UNTIL" in rule:
            errors.append(f"RRULE may not contain both COUNT and UNTIL: {rule}")
        count = re.match(r".*?(COUNT\=[0-9]+)", rule)
        if count and int(count[1].split("=")[1]) > 999:
            errors.append(f"COUNT > 999 is unsupported: {rule}")
    return errors


class ApiError(Exception):
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


def survey_errors(spec: Any) -> list[str]:
    """What AWX's survey_spec endpoint rejects in a survey (all problems, not the first only)."""
    errors: list[str] = []
    if not isinstance(spec, dict):
        return ["the survey is not an object"]
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if not isinstance(spec.get(field), kind):
            errors.append(f"field {field!r} missing or not a {kind.__name__}")
    seen: set[str] = set()
    for index, item in enumerate(spec.get("spec") or []):
        where = f"question {index} ({item.get('variable', '?') if isinstance(item, dict) else '?'})"
        if not isinstance(item, dict):
            errors.append(f"{where}: not an object")
            continue
        for field in ("type", "question_name", "variable", "required"):
            expected = bool if field == "required" else str
            if not isinstance(item.get(field), expected):
                errors.append(f"{where}: {field!r} missing or not a {expected.__name__}")
        if item.get("variable") in seen:
            errors.append(f"{where}: variable duplicated")
        seen.add(item.get("variable"))
        qtype = item.get("type")
        if qtype not in SURVEY_TYPES:
            errors.append(f"{where}: type {qtype!r} is not one of {sorted(SURVEY_TYPES)}")
            continue
        default = item.get("default", "")
        if default != "" and not isinstance(default, SURVEY_TYPES[qtype]):
            errors.append(f"{where}: default {default!r} is not a {qtype} value")
        for key in ("min", "max"):
            if item.get(key) is not None and not isinstance(item[key], int):
                errors.append(f"{where}: {key} is not an integer")
        if qtype in ("multiplechoice", "multiselect"):
            choices = item.get("choices")
            if choices is None:
                errors.append(f"{where}: a {qtype} question needs choices")
                continue
            if isinstance(choices, str):
                choices = [c for c in choices.splitlines() if c.strip()]
            if "default" in item:
                defaults = item["default"].splitlines() if isinstance(item["default"], str) else item["default"]
                if qtype == "multiplechoice" and len(defaults) > 1:
                    errors.append(f"{where}: a multiplechoice question has one default")
                errors.extend(f"{where}: default {d!r} is not one of {choices}" for d in defaults if d not in choices)
    return errors


class FakeAWX:
    """Stands in for awxkit's Connection (get/post/put/patch/delete/options) over an in-memory AWX."""

    def __init__(
        self, reachable: dict[str, list[str]] | None = None, local_paths: dict[str, list[str]] | None = None
    ) -> None:
        self.objects: dict[str, dict[int, dict[str, Any]]] = {path: {} for path in TYPES}
        self.links: dict[tuple[str, int, str], list[int]] = {}
        self.surveys: dict[int, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        # the git URLs a project update reaches -> the playbooks its checkout holds; PROJECTS_ROOT's folders -> theirs
        self.reachable = dict(reachable or {})
        self.local_paths = dict(local_paths or {})
        self.jobs: list[dict[str, Any]] = []
        self._next_id = 1

    # ---------------------------------------------------------------- objects
    def add(self, path: str, **fields: Any) -> dict[str, Any]:
        obj_id = self._next_id
        self._next_id += 1
        obj = {"id": obj_id, **fields}
        self.objects[path][obj_id] = obj
        return obj

    def find(self, path: str, **fields: Any) -> list[dict[str, Any]]:
        return [o for o in self.objects[path].values() if all(o.get(k) == v for k, v in fields.items())]

    def linked(self, path: str, obj_id: int, sub: str) -> list[dict[str, Any]]:
        child = ATTACH_SUBLISTS[(path, sub)]
        return [self.objects[child][i] for i in self.links.get((path, obj_id, sub), [])]

    def _render(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        url = f"{BASE}{path}/{obj['id']}/"
        related: dict[str, str] = {}
        for field, (kind, _required) in POST_FIELDS[path].items():
            target = _fk_path(path, field)
            if kind == _ID and obj.get(field) is not None and target:
                related[field] = f"{BASE}{target}/{obj[field]}/"
        if path == "job_templates":
            # read-only in AWX: a job template's organization is its project's
            project = self.objects["projects"].get(obj.get("project"), {})
            if project.get("organization") is not None:
                related["organization"] = f"{BASE}organizations/{project['organization']}/"
            related["survey_spec"] = f"{url}survey_spec/"
        for parent, sub in [*CREATE_SUBLISTS, *ATTACH_SUBLISTS]:
            if parent == path:
                related[sub] = f"{url}{sub}/"
        if path == "job_templates":
            related["launch"] = f"{url}launch/"
        extra = {"status": self._project_sync(obj)[0]} if path == "projects" else {}
        return {**obj, **extra, "url": url, "type": TYPES[path], "related": related}

    # ---------------------------------------------------------------- what AWX refuses
    def _project_sync(self, project: dict[str, Any]) -> tuple[str, list[str]]:
        """A project's status and the playbooks it holds: a git project after its update (successful when this AWX
        reaches its URL, else failed, with none), a manual one from its folder of PROJECTS_ROOT (status ok)."""
        if project.get("scm_type", "") == "":
            found = self.local_paths.get(project.get("local_path", ""))
            return ("ok", found) if found is not None else ("missing", [])
        found = self.reachable.get(project.get("scm_url", ""))
        return ("successful", found) if found is not None else ("failed", [])

    def _required_missing(self, template_id: int, answers: dict[str, Any]) -> list[str]:
        """AWX's survey check of a launch or a schedule: every required question answered ("'x' value missing")."""
        template = self.objects["job_templates"].get(template_id) or {}
        if not template.get("survey_enabled"):
            return []
        spec = self.surveys.get(template_id, {}).get("spec", [])
        return [f"'{q['variable']}' value missing" for q in spec if q.get("required") and q["variable"] not in answers]

    def launch(self, template_id: int, body: dict[str, Any]) -> dict[str, Any]:
        """POST job_templates/N/launch/: refused without every required answer; the job's extra variables are the
        answers, then every unanswered question's default (AWX's _update_unified_job_kwargs)."""
        answers = _json_field(body.get("extra_vars"))
        if missing := self._required_missing(template_id, answers):
            raise ApiError(400, {"variables_needed_to_start": missing})
        template = self.objects["job_templates"][template_id]
        project = self.objects["projects"].get(template.get("project"), {})
        status, playbooks = self._project_sync(project)
        if template.get("playbook") not in playbooks:
            raise ApiError(400, {"playbook": [f"Playbook not found for project (project {status})."]})
        defaults = {
            q["variable"]: q["default"]
            for q in self.surveys.get(template_id, {}).get("spec", [])
            if template.get("survey_enabled") and "default" in q
        }
        job = {"id": self._next_id, "job_template": template_id, "extra_vars": {**defaults, **answers}}
        self._next_id += 1
        self.jobs.append(job)
        return job

    def _list(self, path: str, items: list[dict[str, Any]], query: dict[str, Any]) -> dict[str, Any]:
        wanted = {k: v for k, v in query.items() if k not in ("page", "page_size", "order_by")}
        results = [
            self._render(path, o)
            for o in items
            if all(str(o.get(k)) == str(v) for k, v in wanted.items() if k in o or k == "name")
        ]
        return {"count": len(results), "next": None, "previous": None, "results": results}

    def _create(self, path: str, data: dict[str, Any], parent: tuple[str, int] | None = None) -> dict[str, Any]:
        fields = POST_FIELDS[path]
        problems = [f"{k}: required" for k, (_t, req) in fields.items() if req and data.get(k) in (None, "")]
        problems += [f"{k}: not a field of {path}" for k in data if k not in fields]
        if problems:
            raise ApiError(400, {"errors": problems})
        for key, value in data.items():
            target = _fk_path(path, key)
            if fields[key][0] == _ID and value is not None and target and value not in self.objects[target]:
                raise ApiError(400, {key: [f"invalid pk {value!r}"]})
        self._validate(path, data)
        return self.add(path, **data)

    def _validate(self, path: str, data: dict[str, Any]) -> None:
        """AWX's checks of a field's value beyond its type: choices, a launch configuration's prompts, an rrule."""
        problems = {
            key: [f"{value!r} is not a valid choice"]
            for key, value in data.items()
            if (path, key) in CHOICES and value not in CHOICES[(path, key)]
        }
        if path == "schedules" and "rrule" in data:
            problems.update({"rrule": errors} if (errors := rrule_errors(data["rrule"])) else {})
        if path == "schedules" and data.get("unified_job_template") is not None:
            answers = _json_field(data.get("extra_data"))
            if missing := self._required_missing(data["unified_job_template"], answers):
                problems["variables_needed_to_start"] = missing
        if path == "projects" and data.get("scm_type", "") == "" and data.get("local_path", "") not in self.local_paths:
            problems["local_path"] = [
                f"Invalid path choice {data.get('local_path')!r}. Available choices are: {sorted(self.local_paths)}"
            ]
        if path == "job_templates" and data.get("project") in self.objects["projects"]:
            _status, playbooks = self._project_sync(self.objects["projects"][data["project"]])
            if data.get("playbook") not in playbooks:
                problems["playbook"] = ["Playbook not found for project."]
        if path in LAUNCH_CONFIGS and data.get("unified_job_template") is not None:
            template = self.objects["job_templates"][data["unified_job_template"]]
            for key, ask in ASK_MAPPING.items():
                if data.get(key) is None or data[key] == template.get(key, FIELD_DEFAULTS.get(key)):
                    continue  # no prompt, or the template's own value: neither accepted nor ignored
                if not template.get(ask):
                    problems[key] = ["Field is not configured to prompt on launch."]
        if problems:
            raise ApiError(400, problems)

    def _attach_problem(self, path: str, obj_id: int, sub: str, child_id: int) -> str | None:
        """Why AWX refuses to attach a credential to a launch configuration (LaunchConfigCredentialsBase)."""
        if path not in LAUNCH_CONFIGS or sub != "credentials":
            return None
        template_id = self.objects[path][obj_id].get("unified_job_template")
        if template_id is None:
            return "Cannot assign credential when related template is null."
        if not self.objects["job_templates"][template_id].get("ask_credential_on_launch"):
            return "Related template is not configured to accept credentials on launch."
        credential = self.objects["credentials"][child_id]
        kinds = [self.objects["credentials"][i]["credential_type"] for i in self.links.get((path, obj_id, sub), [])]
        if credential["credential_type"] in kinds:
            return "This launch configuration already provides a credential of that type."
        if child_id in self.links.get(("job_templates", template_id, "credentials"), []):
            return f"Related template already uses {credential['name']} credential."
        return None

    # ---------------------------------------------------------------- HTTP
    def _handle(self, method: str, url: str, body: Any, query: dict[str, Any]) -> tuple[int, Any]:
        parts = [p for p in urlsplit(url).path[len(BASE) :].split("/") if p]
        if not parts:
            endpoints = {**ROOT_ENDPOINTS, **OTHER_ROOT_ENDPOINTS}
            return 200, {name: f"{BASE}{path}/" for name, path in endpoints.items()}
        path = parts[0]
        if path not in self.objects:
            return 404, {"detail": f"no endpoint {url}"}
        if len(parts) == 1:  # list
            if method == "options":
                post = {k: {"type": t, "required": r} for k, (t, r) in POST_FIELDS[path].items()}
                return 200, {"actions": {"POST": post}, "search_fields": ["name"]}
            if method == "get":
                return 200, self._list(path, list(self.objects[path].values()), query)
            if method == "post":
                return 201, self._render(path, self._create(path, body))
        obj_id = int(parts[1])
        if obj_id not in self.objects[path]:
            return 404, {"detail": "not found"}
        if len(parts) == 2:  # detail
            if method == "get":
                return 200, self._render(path, self.objects[path][obj_id])
            if method in ("put", "patch"):
                if method == "put":
                    problems = [k for k in body if k not in POST_FIELDS[path]]
                    if problems:
                        raise ApiError(400, {"errors": problems})
                self._validate(path, {**self.objects[path][obj_id], **body})
                self.objects[path][obj_id].update(body)
                return 200, self._render(path, self.objects[path][obj_id])
        sub = parts[2]
        if sub == "launch" and path == "job_templates":
            if method == "get":
                template_id = obj_id
                return 200, {
                    "variables_needed_to_start": self._required_missing(template_id, {}),
                    "survey_enabled": bool(self.objects[path][obj_id].get("survey_enabled")),
                }
            if method == "post":
                job = self.launch(obj_id, body or {})
                return 201, {"job": job["id"], "id": job["id"], "type": "job"}
        if sub == "survey_spec" and path == "job_templates":
            if method == "post":
                errors = survey_errors(body)
                if errors:
                    raise ApiError(400, {"error": errors})
                self.surveys[obj_id] = body
                return 200, {}
            if method == "get":
                return 200, self.surveys.get(obj_id, {})
        if (path, sub) in CREATE_SUBLISTS:
            child, field = CREATE_SUBLISTS[(path, sub)]
            if method == "options":
                post = {k: {"type": t, "required": r} for k, (t, r) in POST_FIELDS[child].items()}
                return 200, {"actions": {"POST": post}, "search_fields": ["name"]}
            items = [o for o in self.objects[child].values() if o.get(field) == obj_id]
            if method == "get":
                return 200, self._list(child, items, query)
            if method == "post":
                return 201, self._render(child, self._create(child, {**body, field: obj_id}))
        if (path, sub) in ATTACH_SUBLISTS:
            child = ATTACH_SUBLISTS[(path, sub)]
            ids = self.links.setdefault((path, obj_id, sub), [])
            if method == "options":
                return 200, {"actions": {"POST": {"id": {"type": _I, "required": False}}}, "search_fields": ["name"]}
            if method == "get":
                return 200, self._list(child, [self.objects[child][i] for i in ids], query)
            if method == "post":
                if body.get("id") not in self.objects[child]:
                    raise ApiError(400, {"msg": f"no {child} {body.get('id')}"})
                if problem := self._attach_problem(path, obj_id, sub, body["id"]):
                    raise ApiError(400, {"msg": problem})
                if body["id"] not in ids:
                    ids.append(body["id"])
                return 204, None
        return 405, {"detail": f"{method} {url} not allowed here"}

    def _respond(self, method: str, url: str, body: Any = None, query: dict[str, Any] | None = None) -> Any:
        self.requests.append((method, url))
        try:
            status, payload = self._handle(method, url, body, dict(query or {}))
        except ApiError as error:
            status, payload = error.status, error.body
        response = requests.Response()
        response.status_code = status
        response._content = b"" if payload is None else json.dumps(payload).encode()
        response.encoding = "utf-8"
        response.headers["Content-Type"] = "application/json"
        response.headers["Allow"] = "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS"
        response.request = requests.Request(method.upper(), f"http://awx.invalid{url}").prepare()
        response.url = response.request.url
        response.elapsed = timedelta(0)
        return response

    # awxkit.api.client.Connection's interface
    def get(self, endpoint: str, query_parameters: dict[str, Any] | None = None, headers: Any = None) -> Any:
        return self._respond("get", endpoint, query=query_parameters)

    def post(self, endpoint: str, json: Any = None, **_: Any) -> Any:
        return self._respond("post", endpoint, body=json or {})

    def put(self, endpoint: str, json: Any = None, **_: Any) -> Any:
        return self._respond("put", endpoint, body=json or {})

    def patch(self, endpoint: str, json: Any = None, **_: Any) -> Any:
        return self._respond("patch", endpoint, body=json or {})

    def options(self, endpoint: str, **_: Any) -> Any:
        return self._respond("options", endpoint)

    def delete(self, endpoint: str, **_: Any) -> Any:
        return self._respond("delete", endpoint)


def _json_field(value: Any) -> dict[str, Any]:
    """A JSON field as AWX reads it: a dict, or text holding JSON or YAML (an empty one: nothing)."""
    if isinstance(value, dict):
        return value
    if not value:
        return {}
    import yaml  # noqa: PLC0415 - only for extra variables given as text

    loaded = yaml.safe_load(value)
    return loaded if isinstance(loaded, dict) else {}


def _fk_path(path: str, field: str) -> str | None:
    """The list path a foreign key field points to."""
    return {
        "organization": "organizations",
        "inventory": "inventories",
        "project": "projects",
        "credential": "credentials",
        "credential_type": "credential_types",
        "workflow_job_template": "workflow_job_templates",
        "unified_job_template": "job_templates",
        "webhook_credential": "credentials",
        "signature_validation_credential": "credentials",
        "user": "users",
        "team": "teams",
        "execution_environment": "execution_environments",
        "default_environment": "execution_environments",
    }.get(field)
