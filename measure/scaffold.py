"""``nox -s chapter -- NAME --zh 中文标题 --en "English title"``: a new chapter that measures as written.

Writes docs/NAME.zh.md and docs/NAME.en.md (the answers block, a table cited by name, the reproduce box, the "Also in
the data" list, the glossary), the questions they answer and the table they show as named facts
(measure/site/facts/NAME.py), an experiment module that measures one load point of the profile's chat model end to
end (one server, rows with their spread over rounds, a plan for --dry-run), a test, and a nav entry in Chinese with its
English translation.
The contributor then edits the experiment and the pages into the chapter they mean to write.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NAV_ANCHOR = "  - 待确认: unconfirmed.md\n"
# mkdocs-static-i18n's English nav: each zh nav title is translated in the en language's nav_translations.
TRANSLATION_ANCHOR = "            待确认: Open claims\n"

PAGE = {
    "zh": """# __ZH__

{{ answers("__NAME__") }}

这一章由 `nox -s chapter` 生成。它的实验已经能测量：在对话模型上以固定的输入输出长度发一个负载点的请求，
重复几轮，记下中位数和最慢、最快的一轮。上面的问题和回答在 `measure/site/facts/__NAME__.py` 里，由数据生成。
把实验、问题和文字改成这一章要讲的内容，步骤见[参与贡献](contributing.md)。

## 测量结果 { #measurements }

{{ fact("__NAME__.decode_table") }}

{{ reproduce("__NAME__") }}

{{ also_in_data() }}

--8<-- "glossary.zh.md"
""",
    "en": """# __EN__

{{ answers("__NAME__") }}

This chapter was written by `nox -s chapter`. Its experiment measures already: one load point of requests with fixed
input and output lengths on the chat model, repeated over a few rounds, recording the median and the slowest and
fastest round. The questions above and their answers live in `measure/site/facts/__NAME__.py` and come from the data.
Turn the experiment, the questions and the prose into what this chapter is about; the steps are in
[Contributing](contributing.md).

## Measurements { #measurements }

{{ fact("__NAME__.decode_table") }}

{{ reproduce("__NAME__") }}

{{ also_in_data() }}

--8<-- "glossary.en.md"
""",
}

FACTS = '''"""__EN_DOC__ (docs/__NAME__.*.md): the questions this chapter answers, from its datasets.

Written by ``nox -s chapter``. Each fact names one selection of data; each question's answer cites facts by name in
both languages. Edit the questions into the ones this chapter settles (see docs/contributing.en.md).
"""

from measure.site.facts import Question, Table, Value, topic


def decode(column: str, digits: int) -> Value:
    return Value("__NAME__.decode", column, {"concurrency": 2}, {"digits": digits, "show_range": True})


# The tables and charts the pages show, declared once: both languages cite them by name (fact("__NAME__.decode_table"))
FIGURES = {
    "decode_table": Table("__NAME__.decode"),
}

topic("__NAME__", facts=FIGURES | {
    "tok_s": decode("output_tok_s", 0),
    "tpot": decode("tpot_ms", 1),
}, questions=(
    Question(
        ask={"zh": "2 个请求在途时，对话模型每秒生成多少个输出 token？",
             "en": "With 2 requests in flight, how many output tokens a second does the chat model generate?"},
        answer={"zh": "输出吞吐为 {tok_s}。", "en": "It generated {tok_s}."},
        figure="measurements",
        unsettled={"zh": "运行 nox -s measure -- __NAME__ 后，这里就是测得的数字。",
                   "en": "Run nox -s measure -- __NAME__ and the measured figure appears here."}),
    Question(
        ask={"zh": "同样的负载下，每个输出 token 要多长时间？", "en": "Under the same load, how long does each output token take?"},
        answer={"zh": "每个输出 token 用 {tpot}。", "en": "Each output token took {tpot}."},
        figure="measurements",
        unsettled={"zh": "运行 nox -s measure -- __NAME__ 后，这里就是测得的数字。",
                   "en": "Run nox -s measure -- __NAME__ and the measured figure appears here."}),
), title={"zh": __ZH__, "en": __EN__})
'''

EXPERIMENT = '''"""__EN_DOC__: output throughput and time per output token of the profile's chat model at one load point.

Written by ``nox -s chapter``; it measures as it stands. Make it this chapter's: the server's flags (SERVER), the load
points and request sizes (sizes()), the columns (DECODE), then the pages. CONTRIBUTING.md lists what ``ctx`` offers.
"""

from __future__ import annotations

from measure.experiment import Experiment, ServerSpec, Step, register, spread
from measure.harness.loadgen import HttpRequest, default_workers
from measure.schema import CLIENT_LOAD, Column, DatasetSchema
from measure.workloads import sentences

DECODE = DatasetSchema(
    name="__NAME__.decode",
    title={"zh": __ZH__ + "：生成吞吐与每 token 时间", "en": __EN__ + ": output throughput and time per output token"},
    key=("concurrency",),
    columns=(
        Column("concurrency", "int", "requests", "requests in flight"),
        Column("requests", "int", "requests", "per round"),
        Column("prompt_tokens_mean", "float", "tokens", "prompt tokens per request, as the server counted them"),
        Column("output_tokens", "int", "tokens", "per request (ignore_eos: each one generates them all)"),
        Column("rounds", "int", "", "rounds measured, after one warm-up round"),
        Column("output_tok_s", "float", "tok/s", "median over rounds"),
        Column("output_tok_s_min", "float", "tok/s", "slowest round"),
        Column("output_tok_s_max", "float", "tok/s", "fastest round"),
        Column("tpot_ms", "float", "ms", "time per output token: median over rounds of each round's median"),
        Column("tpot_ms_min", "float", "ms"),
        Column("tpot_ms_max", "float", "ms"),
        Column("ttft_ms", "float", "ms", "time to first token: median over rounds of each round's median"),
        Column("ttft_ms_min", "float", "ms"),
        Column("ttft_ms_max", "float", "ms"),
        Column("client_cpu_max", "float", "cores", "the load client's busiest worker, share of one core",
               role=CLIENT_LOAD),
    ),
)

# The profile's chat model with the profile's flags; add this chapter's flags to args.
SERVER = ServerSpec("chat", (), label="__NAME__")


@register
class __CLS__(Experiment):
    name = "__NAME__"
    title = {"zh": __ZH__, "en": __EN__}
    datasets = (DECODE,)

    @staticmethod
    def sizes(profile) -> dict:
        """The workload; MEASURE_SIZES='{"__NAME__": {...}}' (or a profile's sizes) replaces keys of it."""
        return {"points": ((2, 4),), "words": 64, "output_tokens": 32, "rounds": 3} | profile.sizes.get("__NAME__", {})

    def plan(self, profile):
        s = self.sizes(profile)
        requests = (s["rounds"] + 1) * sum(n for _, n in s["points"])
        return [Step(SERVER, f"{s['rounds']} rounds after a warm-up at {[c for c, _ in s['points']]} in flight, "
                             f"{s['output_tokens']} output tokens a request", requests, 5 * (s["rounds"] + 1))]

    def run(self, ctx):
        s = self.sizes(ctx.profile)
        todo = [(c, n) for c, n in s["points"] if not ctx.done(DECODE, concurrency=c)]  # a resumed run skips rows
        if not todo:
            return
        server = ctx.server(SERVER)  # started (or reused); provenance records its command and start-up facts
        prompts = sentences(max(n for _, n in todo), s["words"], seed=7)
        for concurrency, n in todo:
            requests = [HttpRequest.chat([{"role": "user", "content": p}], server.model, s["output_tokens"],
                                         ignore_eos=True) for p in prompts[:n]]
            load = ctx.load(server, workers=default_workers(concurrency))
            load.run(requests, concurrency)  # warm-up: the first requests pay for lazy initialisation
            summaries = [load.run(requests, concurrency).summary() for _ in range(s["rounds"])]
            tok_s = spread(x.output_tok_s for x in summaries)
            tpot = spread(x.tpot_median_ms for x in summaries)
            ttft = spread(x.ttft_median_ms for x in summaries)
            ctx.log(f"  {concurrency} in flight: {tok_s[0]:,.1f} output tok/s, {tpot[0]:.2f} ms per token")
            ctx.record(DECODE, {
                "concurrency": concurrency, "requests": n, "output_tokens": s["output_tokens"], "rounds": s["rounds"],
                "prompt_tokens_mean": summaries[0].prompt_tokens / summaries[0].requests,
                "output_tok_s": tok_s[0], "output_tok_s_min": tok_s[1], "output_tok_s_max": tok_s[2],
                "tpot_ms": tpot[0], "tpot_ms_min": tpot[1], "tpot_ms_max": tpot[2],
                "ttft_ms": ttft[0], "ttft_ms_min": ttft[1], "ttft_ms_max": ttft[2],
                "client_cpu_max": max(x.worker_cpu_max for x in summaries),
            })
'''

TEST = '''"""The __NAME__ chapter: wired to its pages (no vLLM), and measuring end to end on the CPU stand-in (vLLM)."""

import csv
import json

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

from measure.experiment import all_schemas, get
from measure.harness.profiles import CPU
from measure.site.scan import keys_by_page_pair, scan_pages


def test___NAME___chapter_is_wired():
    assert "__NAME__.decode" in all_schemas()
    assert not get("__NAME__").pending and get("__NAME__")().plan(CPU)
    keys = keys_by_page_pair(scan_pages())["__NAME__"]
    assert keys["zh"] == keys["en"] and any(k.startswith("__NAME__.decode") for k in keys["en"])


@pytest.mark.vllm
def test___NAME___measures_on_the_cpu_stand_in(tmp_path):
    require(python_imports("import vllm.entrypoints.openai.api_server"), "vLLM", VLLM_HOW)
    tiny = {"__NAME__": {"points": [[2, 2]], "words": 16, "output_tokens": 8, "rounds": 2}}
    run_measure(tmp_path, "cpu-test", "__NAME__", sizes=tiny, timeout=900)
    env = tmp_path / "data" / "cpu-test"
    with open(env / "__NAME__.decode.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows and all(float(r["output_tok_s"]) > 0 and float(r["tpot_ms"]) > 0 for r in rows)
    provenance = json.loads((env / "provenance.json").read_text(encoding="utf-8"))
    servers = provenance["datasets"]["__NAME__.decode"]["servers"]
    assert servers and all(provenance["servers"][s]["command"] for s in servers)
'''


def yaml_scalar(text: str) -> str:
    """``text`` as a YAML scalar: plain where YAML reads it back unchanged, else double-quoted (JSON is YAML)."""
    plain = re.fullmatch(r"[^\s:#'\"{}\[\],&*!|>%@`?-][^:#\"{}\[\],]*", text) and not text.endswith(" ")
    return text if plain else json.dumps(text, ensure_ascii=False)


def targets(name: str, zh: str, en: str, repo: Path) -> dict[Path, str]:
    """The files a chapter consists of, with their first content."""
    def fill(template: str, python: bool = False) -> str:
        q = (lambda s: json.dumps(s, ensure_ascii=False)) if python else (lambda s: s)
        return (template.replace("__NAME__", name).replace("__CLS__", "".join(p.capitalize() for p in name.split("_")))
                .replace("__EN_DOC__", en.replace('"""', "'''")).replace("__ZH__", q(zh)).replace("__EN__", q(en)))

    return {
        repo / "docs" / f"{name}.zh.md": fill(PAGE["zh"]),
        repo / "docs" / f"{name}.en.md": fill(PAGE["en"]),
        repo / "measure" / "experiments" / f"{name}.py": fill(EXPERIMENT, python=True),
        repo / "measure" / "site" / "facts" / f"{name}.py": fill(FACTS, python=True),
        repo / "tests" / f"test_chapter_{name}.py": fill(TEST),
    }


def with_nav(config: str, name: str, zh: str, en: str) -> str:
    """mkdocs.yml with the chapter in the nav (in Chinese, before 待确认) and its English title as a translation."""
    for anchor in (NAV_ANCHOR, TRANSLATION_ANCHOR):
        if anchor not in config:
            raise SystemExit(f"mkdocs.yml: cannot find the line {anchor.strip()!r} to insert the chapter before; "
                             f"add `  - {zh}: {name}.md` to nav and `{zh}: {en}` to nav_translations by hand")
    config = config.replace(NAV_ANCHOR, f"  - {yaml_scalar(zh)}: {name}.md\n" + NAV_ANCHOR)
    if zh != en:
        config = config.replace(TRANSLATION_ANCHOR, f"            {yaml_scalar(zh)}: {yaml_scalar(en)}\n"
                                + TRANSLATION_ANCHOR)
    return config


def ask_titles(name: str, zh: str | None, en: str | None, interactive: bool | None = None) -> tuple[str, str]:
    """The chapter's titles: as given, else asked for on a terminal; without one, a missing title is an error."""
    interactive = sys.stdin.isatty() if interactive is None else interactive
    titles = {}
    for lang, given, prompt in (("zh", zh, "Chinese title (中文标题)"), ("en", en, "English title")):
        if not given and interactive:
            given = input(f"{prompt} of chapter {name!r}: ").strip()
        if not given:
            raise SystemExit(f"chapter {name!r} needs its {prompt}: nox -s chapter -- {name} --zh 中文标题 "
                             '--en "English title"')
        titles[lang] = given.strip()
    return titles["zh"], titles["en"]


def scaffold(name: str, zh: str, en: str, repo: Path = REPO) -> list[Path]:
    if not re.fullmatch(r"[a-z][a-z0-9_]{1,30}", name):
        raise SystemExit(f"chapter name {name!r}: use lower-case letters, digits and _ (it names a module and a page)")
    files = targets(name, zh, en, repo)
    existing = [str(p.relative_to(repo)) for p in files if p.exists()]
    if existing:
        raise SystemExit(f"chapter {name!r} exists already: {', '.join(existing)}")
    config = repo / "mkdocs.yml"
    text = with_nav(config.read_text(encoding="utf-8"), name, zh, en)
    for path, content in files.items():
        path.write_text(content, encoding="utf-8")
    config.write_text(text, encoding="utf-8")
    return [*files, config]
