"""The words pages are built from: the site's fixed texts in both languages, the claim statuses, the relations a
sentence may state between two numbers, and what a rendered claim or figure records."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from measure.schema import UnknownName


class EmptySelection(UnknownName):
    """A claim's selection found no row in a dataset that is published: a typo or a stale sentence."""


LANGS = ("zh", "en")
BABEL_LOCALE = {"zh": "zh_Hans_CN", "en": "en_US"}

TEXT = {
    "not_measured": {"zh": "未实测", "en": "Not measured"},
    "answers": {"zh": "本页回答", "en": "This page answers"},
    "site_answers": {"zh": "本站回答的问题", "en": "Questions this site answers"},
    "answer_figure": {"zh": "看图表 →", "en": "See the figure →"},
    "unconfirmed": {"zh": "未确认", "en": "Unconfirmed"},
    "cited": {"zh": "引用", "en": "cited"},
    "stand_in": {"zh": "CPU 上的缩小版模型：看走势，不看速度", "en": "Scaled-down models on the CPU backend: the shape, not the speed"},
    "same_in_every_row": {"zh": "每行相同", "en": "Same in every row"},
    "eager_mode": {"zh": "eager 模式", "en": "eager mode"},
    "default_mode": {"zh": "默认模式", "en": "default mode"},
    "weights_dummy": {"zh": "虚拟权重", "en": "dummy weights"},
    "weights_real": {"zh": "真实权重", "en": "real weights"},
    "revision": {"zh": "代码版本", "en": "rev"},
    "conditions": {"zh": "条件", "en": "conditions"},
    "measured": {"zh": "实测", "en": "measured"},
    "source": {"zh": "来源", "en": "Source"},
    "cpu_stand_in": {"zh": "CPU 替身", "en": "CPU stand-in"},
    "also_in_data": {"zh": "数据中还有", "en": "Also in the data"},
    "answer_caveats": {"zh": "原因与注意事项", "en": "Why, and caveats"},
    "also_in_data_lead": {
        "zh": "本页数据里还有这些差别：同一数据集中只差一个条件的两行，数字相差两倍以上（记录了重复范围的，超出范围也在两倍以上）；"
              "正文和图表都没有专门讲它们。有些直接来自设置本身（批越大，一批越久），列在这里是为了不漏掉数据显示的任何东西。"
              "每行给出差别最大的一对，悬停可见其余条件。",
        "en": "The data on this page also hold these differences: two rows of one dataset that differ in one condition, "
              "their figures twice or more apart (and, where the rows record a range of repeats, twice or more beyond "
              "it); neither the text nor a chart takes them up. Some follow from the setting itself (a larger batch "
              "takes longer); they are listed so that nothing the data show goes unmentioned. Each line gives the "
              "pair that differs most; hover for the conditions held the same.",
    },
    "also_ratio": {"zh": "（{ratio} 倍{more}）", "en": " ({ratio}×{more})"},
    "also_more_pairs": {"zh": "；另有 {n} 对", "en": "; {n} more pairs"},
    "also_one_more_pair": {"zh": "；另有 {n} 对", "en": "; {n} more pair"},
    "cited_source": {"zh": "原文", "en": "article"},
    "every_series": {"zh": "各系列相同", "en": "Every series"},
    "ours_missing": {"zh": "本站尚无自己的测量数据", "en": "we have no measurement of our own yet"},
    "log_scale": {"zh": "（对数刻度）", "en": " (log scale)"},
    "figure_missing": {"zh": "{where}还没有“{title}”的数据；在这样的机器上运行 `nox -s measure -- {experiment}` 即可测得。",
                       "en": "No data for “{title}” {where} yet; `nox -s measure -- {experiment}` on such a machine "
                             "measures them."},
    "figure_missing_where": {"zh": "{env} 上", "en": "on {env}"},
    "data_file": {"zh": "数据文件", "en": "data file"},
    "all_data": {"zh": "全部数据", "en": "All data"},
    "weights": {"zh": "权重", "en": "weights"},
    "real_only": {"zh": "只接受真实权重的数据", "en": "accepts real-weight data only"},
    "yes": {"zh": "是", "en": "yes"},
    "no": {"zh": "否", "en": "no"},
    "saturated": {
        "zh": "测量时负载客户端最忙的进程占用了 {share} 个 CPU 核心（{column}，≥ {limit} 即视为饱和）："
              "这一数值可能由客户端而不是服务器决定",
        "en": "measured while the load client's busiest process used {share} of a CPU core ({column}; {limit} or more "
              "counts as saturated): the client, not the server, may have set this figure",
    },
    "outside_tolerance": {
        "zh": "{column} = {value}，超出本页设定的容差 {low}–{high}",
        "en": "{column} = {value}, outside this page's tolerance of {low}–{high}",
    },
    "inconsistent": {
        "zh": "同一个量（{quantity}）在本环境的几个数据集中测得 {figures}，彼此相差 {spread}，超出了记录的离散范围："
              "不知道哪一个代表你的部署",
        "en": "the same quantity ({quantity}) measured by several datasets of this environment: {figures}, {spread} "
              "apart, beyond their recorded spread: which one holds for your deployment is not known",
    },
    "too_wide_inconsistent": {
        "zh": "同一个量（{quantity}）在本环境的几个数据集中测得 {figures}，范围虽然重叠，中位数却相差 {spread}：各次重复分散得太开，"
              "分不出哪一个代表你的部署",
        "en": "the same quantity ({quantity}) measured by several datasets of this environment: {figures}; their ranges "
              "overlap, but the medians lie {spread} apart: the repeats spread too widely to tell which holds for your "
              "deployment",
    },
    "range": {"zh": "{n} 次测量，范围 {low}–{high}", "en": "{n} repeats, {low}–{high}"},
    "no_difference": {
        "zh": "没有可测出的差别：{left}（{left_range}）对 {right}（{right_range}），两者记录的范围相互重叠",
        "en": "no measurable difference: {left} ({left_range}) against {right} ({right_range}); their recorded ranges overlap",
    },
    # the figure is a median over single timed requests (no repeats or rounds column): say so
    "range_requests": {"zh": "{n} 个请求，范围 {low}–{high}", "en": "{n} requests, {low}–{high}"},
    "agree": {
        "zh": "这 {count} 次测量记录的范围相互重叠，中位数也在容差之内，彼此一致：{figures}",
        "en": "the ranges these {count} measurements recorded overlap and their medians lie within the tolerance, so "
              "they agree: {figures}",
    },
    "too_wide": {
        "zh": "这 {count} 次测量的范围相互重叠，但中位数相差 {spread}，超出容差：各次重复分散得太开，分不出它们是否一致，"
              "因此都标为未确认：{figures}",
        "en": "the ranges of these {count} measurements overlap, but their medians lie {spread} apart, beyond the "
              "tolerance: the repeats spread too widely to tell whether they agree, so each is marked unconfirmed: {figures}",
    },
    "disagree": {
        "zh": "这 {count} 次测量彼此不一致，最大的比最小的高 {spread}，超出了各自记录的范围（没有记录范围的，"
              "超出了容差），因此都标为未确认：{figures}",
        "en": "these {count} measurements disagree, the largest {spread} above the smallest, more than their recorded "
              "ranges (or, where none was recorded, the tolerance) allow, so each is marked unconfirmed: {figures}",
    },
    "same_quantity": {"zh": "其他数据集也测了同一个量，", "en": "Other datasets measure the same quantity; "},
    "same_quantity_brief": {
        "zh": "上面有 {count} 个数字标为未确认：其他数据集对同一数字的读数与它们最多相差 {spread}。展开对比",
        "en": "{count} of the figures above are unconfirmed: other datasets' readings of them lie up to {spread} from "
              "them. Open to compare",
    },
    "same_quantity_brief_one": {
        "zh": "上面有 1 个数字标为未确认：其他数据集对同一数字的读数与它最多相差 {spread}。展开对比",
        "en": "One of the figures above is unconfirmed: other datasets' readings of it lie up to {spread} from it. Open to "
              "compare",
    },
    "same_quantity_seen": {"zh": "未确认的原因：同一数字的其他测值见上文对比",
                           "en": "Why unconfirmed: this figure's other readings are compared above"},
    "card_inconsistent": {
        "zh": "{weak_card} 的实测带宽更低、算力不更高，这一数字却比 {strong_card} 更好，超出了两者各轮的范围：{weak_card} "
              "{weak}，{strong_card} {strong}；这里没有测出原因",
        "en": "the {weak_card}, with less measured bandwidth and no more compute, did better here than the {strong_card},"
              " beyond both cards' rounds: {weak_card} {weak}, {strong_card} {strong}; no measurement here explains it",
    },
    "elsewhere": {"zh": "其他 GPU 上测得的结果 →", "en": "What other GPUs measured →"},
    "differs": {"zh": "与同一个量的其他测量条件不同：{why}", "en": "measured under other conditions than the rest of its quantity: {why}"},
    "saturated_rows": {
        "zh": "{count} 行在负载客户端饱和时测得（标为未确认；{where}）",
        "en": "{count} row(s) measured while a load client was saturated (marked unconfirmed; {where})",
    },
    "flagged_rows": {
        "zh": "{count} 行标为未确认（悬停在标记上可看原因）",
        "en": "{count} row(s) marked unconfirmed (hover over the mark for the reason)",
    },
    "dummy_only": {
        "zh": "仅有虚拟权重的数据，不能用于正确率结论",
        "en": "only dummy-weight data exists, which cannot support an accuracy claim",
    },
}

STATUSES = ("measured", "cited", "not_measured", "unconfirmed")

# What a sentence may say of two numbers (left / right = ratio), and the test the data must pass.
# "smaller"/"larger" in prose needs a visible gap: two figures within TIE_MARGIN of each other are a tie (≈), and
# "lowest"/"highest" claims that allow a tie use ≤/≥.
TIE_MARGIN = 0.02
RELATIONS = {
    "<": (lambda r: r < 1 - TIE_MARGIN, f"smaller (by more than {TIE_MARGIN:.0%}) than"),
    ">": (lambda r: r > 1 + TIE_MARGIN, f"larger (by more than {TIE_MARGIN:.0%}) than"),
    "≤": (lambda r: r <= 1, "no larger than"),
    "≥": (lambda r: r >= 1, "no smaller than"),
    "<<": (lambda r: r <= 2 / 3, "a third or more below"),
    ">>": (lambda r: r >= 1.5, "half again or more above"),
    "≈": (lambda r: abs(r - 1) <= 0.1, "within 10 % of"),
    # no measurable difference: the two figures' recorded ranges overlap (compare() checks the ranges, not the ratio;
    # it prints both figures with their ranges, never the ratio)
    "~": (lambda r: True, "not measurably different from"),
}


def t(key: str, lang: str) -> str:
    return TEXT[key][lang]


@dataclass
class Claim:
    page: str
    key: str
    kind: str  # value | table | chart | unconfirmed | not_measured
    status: str  # one of STATUSES
    dataset: str = ""
    detail: str = ""
    text: str = field(default="", compare=False)  # what the claim says, in the page's language (no ids)
    names: tuple[str, ...] = field(default=(), compare=False)  # verbatim names inside ``text`` (servers, models)


def _stable_id(*parts: str) -> str:
    return hashlib.sha1("|".join(parts).encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Figure:
    """A figure of ours as a page printed it: where it came from, and the verdict on the quantity it measures."""

    key: str
    env: str
    dataset: str
    column: str
    verdict: object  # consistency.Verdict | None
    differs: str | None
    value: float | None = None  # as the data hold it (before a page's scale): what the verdict's readings compare

