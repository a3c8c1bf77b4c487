"""``python -m measure`` — run experiments, list them, check claims."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from measure.schema import SchemaError, UnknownName


def minutes(text: str) -> float:
    """A --budget: a positive, finite number of minutes."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of minutes") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a budget is a positive number of minutes")
    return value


def cmd_run(args) -> int:
    from measure.experiment import experiments, get, runnable
    from measure.harness import profiles, runner

    names = args.experiments or runnable()
    for name in names:
        if get(name).pending:
            print(f"error: experiment {name!r} only declares its datasets so far ({get(name).pending})", file=sys.stderr)
            return 2
    skipped = [n for n in experiments() if n not in names and not args.experiments]
    if skipped:
        print(f"not run (datasets declared, runner pending): {', '.join(skipped)}", file=sys.stderr)
    profile = profiles.pick(args.profile)
    opts = runner.RunOptions(
        experiments=names, profile=profile, env_name=args.env, data_root=args.data_root, resume=args.resume,
        fresh=args.fresh, dry_run=args.dry_run, base_url=args.base_url, api_key=args.api_key, weights=args.weights,
        vllm_python=args.vllm_python, force=args.force, only_missing=args.only_missing, budget_min=args.budget,
    )
    runner.run(opts)
    return 0


def cmd_list(args) -> int:
    from measure.experiment import experiments

    for name, cls in experiments().items():
        print(f"{name:14} {cls.title['en']}" + (f"  [pending: {cls.pending}]" if cls.pending else ""))
        for schema in cls.datasets:
            print(f"  {schema.name}")
    return 0


def cmd_claims(args) -> int:
    from measure.site.lint import lint_docs
    from measure.site.scan import DOCS_DIR, make_store, open_claims, scan_pages

    store = make_store(args.data_root)
    store.validate_all()
    claims = scan_pages(store=store)
    rows = open_claims(claims) if not args.all else claims
    width = max((len(c.page) for c in rows), default=4)
    for c in rows:
        print(f"{c.page:{width}}  {c.status:13}  {c.key}  {c.detail}")
    print(f"{len(claims)} claims, {len(open_claims(claims))} open (未实测/未确认)")
    # effects the data show that no sentence or chart of their page says: listed on the page, under 数据中还有
    effects = [c for c in claims if c.kind == "effect" and c.page.endswith(".en.md")]
    for c in effects:
        print(f"{c.page:{width}}  also in data   {c.key.removeprefix('also:')}  {c.detail}×")
    print(f"{len(effects)} effects of ≥ 2× in the answer card's data that their page lists under 'Also in the data' "
          "instead of saying them")
    findings = lint_docs(DOCS_DIR, claims, store.schemas)
    for finding in findings:
        print(f"lint: {finding}", file=sys.stderr)
    return 1 if findings else 0


def cmd_chapter(args) -> int:
    from measure.scaffold import ask_titles, scaffold

    zh, en = ask_titles(args.name, args.zh, args.en)
    for path in scaffold(args.name, zh, en):
        print(f"wrote {path}")
    print(f"next: nox -s measure -- {args.name} (it measures as written), nox -s serve to see the page, then make "
          f"measure/experiments/{args.name}.py and the pages this chapter's (CONTRIBUTING.md)")
    return 0


def cmd_adopt(args) -> int:
    from measure.harness.adopt import AdoptError, adopt
    from measure.schema import SchemaError
    from measure.store import default_data_root

    target = (args.data_root or default_data_root()) / args.source.name
    try:
        copied = adopt(args.source, target, args.experiments)
    except (AdoptError, SchemaError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"adopted into {target}: {', '.join(copied)}", file=sys.stderr)
    return 0


def cmd_revision(args) -> int:
    from measure.harness.provenance import code_revision

    print(code_revision())
    return 0


def _server_failures() -> tuple[type, ...]:
    """A server that failed or refused (attach mode's checks): where the harness is installed (the site-only
    sessions lack its packages)."""
    try:
        from measure.harness.server import ServerFailed
    except ImportError:
        return ()
    return (ServerFailed,)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="measure", description=__doc__)
    parser.add_argument("--data-root", type=Path, default=None, help="data folder (default: $MEASURE_DATA_ROOT or ./data)")
    parser.add_argument("-v", "--verbose", action="store_true", help="on an error, the traceback as well as its message")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run experiments against a vLLM it starts (or attaches to)")
    run.add_argument("experiments", nargs="*", help="experiment names (default: all)")
    run.add_argument("--profile", choices=("cpu", "gpu"), help="default: gpu if nvidia-smi sees one, else cpu")
    run.add_argument("--env", help="environment folder name under data/ (default: from the hardware)")
    run.add_argument("--resume", action="store_true", help="continue an interrupted run from its staged rows")
    run.add_argument("--fresh", action="store_true", help="discard rows an interrupted run left in staging")
    run.add_argument("--dry-run", action="store_true", help="print the plan (servers, requests, time) and stop")
    run.add_argument("--force", action="store_true", help="re-measure experiments whose inputs are unchanged")
    run.add_argument("--budget", type=minutes, metavar="MINUTES",
                     help="measure only the stale or missing experiments whose estimates fit in MINUTES (server "
                          "start-ups included), most-asked questions first; the rest is printed for later")
    run.add_argument("--only-missing", action="store_true",
                     help="measure only the datasets this environment does not publish yet; published ones keep their "
                          "own provenance (useful where device time is short)")
    run.add_argument("--base-url", action="append", metavar="[ROLE=]URL",
                     help="attach to running servers instead of starting them: a URL for every model role, or "
                          "ROLE=URL per role (roles: chat, embedding, reranker, vl); steps whose role has no server are skipped")
    run.add_argument("--api-key", help="API key of the attached server")
    run.add_argument("--weights", choices=("real", "dummy", "unknown"), default="unknown",
                     help="attach mode: declare the attached server's weights")
    run.add_argument("--vllm-python", default=os.environ.get("MEASURE_VLLM_PYTHON") or sys.executable,
                     help="Python interpreter that has vLLM installed (default: this one)")
    run.set_defaults(func=cmd_run)

    adopt = sub.add_parser("adopt", help="copy experiments measured elsewhere (an offline GPU host's returned "
                           "data/<env>/) into the local folder of the same environment, with their provenance")
    adopt.add_argument("source", type=Path, help="the returned environment folder, e.g. /tmp/lease/data/gpu-1x-nvidia-h200")
    adopt.add_argument("experiments", nargs="+", help="the experiments that were measured there")
    adopt.set_defaults(func=cmd_adopt)

    lst = sub.add_parser("list", help="list experiments and their datasets")
    lst.set_defaults(func=cmd_list)

    claims = sub.add_parser("claims", help="print every 未实测/未确认 claim; non-zero on unknown names")
    claims.add_argument("--all", action="store_true", help="print every claim, not only open ones")
    claims.set_defaults(func=cmd_claims)

    revision = sub.add_parser("revision", help="print the revision a run here would record (the last commit that "
                              "changed measuring code; pass it as $MEASURE_CODE_REVISION to a host without .git)")
    revision.set_defaults(func=cmd_revision)

    chapter = sub.add_parser("chapter", help="scaffold a new chapter: pages, experiment module, test, nav")
    chapter.add_argument("name")
    chapter.add_argument("--zh", help="the chapter's Chinese title (the nav shows it; asked for on a terminal)")
    chapter.add_argument("--en", help="the chapter's English title (asked for on a terminal)")
    chapter.set_defaults(func=cmd_chapter)

    args = parser.parse_args(argv)
    # SIGTERM (a time limit, a CI runner) unwinds like Ctrl-C, so servers stop and staged rows stay.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return args.func(args)
    except (UnknownName, SchemaError, *_server_failures()) as exc:  # a refusal: what, and what to do, in one message
        if args.verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
