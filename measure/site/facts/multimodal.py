"""Multimodal input (docs/multimodal.*.md): what image URLs and the API key do, release by release (CPU backend,
one virtualenv per vLLM release)."""

from measure.site.facts import Matrix, Question, Table, Value, topic

CPU = "cpu-2c-x86-64"
REDIRECT = "--allowed-media-domains localhost · allowed name redirecting to 127.0.0.1"
REDIRECT_OFF = "--allowed-media-domains localhost + VLLM_MEDIA_URL_ALLOW_REDIRECTS=0 · allowed name redirecting to 127.0.0.1"


def matrix(release: str, probe: str, expect: str | None = None) -> Value:
    return Value("security_versions.matrix", "outcome", {"vllm_version": release, "probe": probe},
                 {"env": CPU} | ({"expect": expect} if expect else {}))


# The tables and charts the page shows, declared once: both languages cite them by name
FIGURES = {
    "security_media_fetch_table": Table("security.media_fetch",
        columns=["setting", "url_kind", "service_hit", "paths_requested", "status", "answer", "elapsed_ms"]),
    "security_versions_installs_table": Table("security_versions.installs"),
    "security_versions_matrix": Matrix("security_versions.matrix", rows="probe", columns="vllm_version",
        cell="outcome"),
    "processor_cache_table": Table("multimodal.processor_cache"),
    "untrusted_formats_table": Table("multimodal.untrusted_formats"),
}

topic("multimodal", facts=FIGURES | {
    # the answer's "Yes" rests on these
    "metrics_oldest": matrix("0.8.5.post2", "GET /metrics without a key", expect="200"),
    "metrics_newest": matrix("0.32.0", "GET /metrics without a key", expect="200"),
    "redirect_0140": matrix("0.14.0", REDIRECT),
    "redirect_0320": matrix("0.32.0", REDIRECT),
    "redirect_off_0320": matrix("0.32.0", REDIRECT_OFF),
}, questions=(
    Question(
        ask={"zh": "设了 --api-key 以后，/metrics 还能不带密钥访问吗？", "en": "With --api-key set, is /metrics still open without the key?"},
        answer={"zh": "能，仍然开放：不带密钥请求 GET /metrics，最老的 0.8.5.post2 返回 HTTP {metrics_oldest}，最新的 0.32.0 返回 HTTP "
                      "{metrics_newest}（CPU 后端，每个版本一个虚拟环境）。",
                "en": "Yes, it stays open: GET /metrics without a key got HTTP {metrics_oldest} on the oldest release probed, 0.8.5.post2, and "
                      "HTTP {metrics_newest} on the newest, 0.32.0 (CPU backend, one virtualenv per release)."},
        figure="per-release",
        unsettled={"zh": "需要逐个版本启动带密钥的服务器并请求 /metrics。", "en": "Settling it takes a keyed server of each release asked for /metrics."}),
    Question(
        ask={"zh": "域名允许名单挡得住重定向到 127.0.0.1 的图像 URL 吗？",
             "en": "Does a domain allow-list stop an image URL that redirects to 127.0.0.1?"},
        answer={"zh": "只设 --allowed-media-domains localhost 时，允许名单内的域名重定向到 127.0.0.1，本机探测服务看到的是："
                      "0.14.0 上 {redirect_0140}，0.32.0 上 {redirect_0320}；0.32.0 再加 VLLM_MEDIA_URL_ALLOW_REDIRECTS=0 后："
                      "{redirect_off_0320}。",
                "en": "With only --allowed-media-domains localhost, an allowed name redirecting to 127.0.0.1 left the "
                      "local probe service with: {redirect_0140} on 0.14.0 and {redirect_0320} on 0.32.0; on 0.32.0 with "
                      "VLLM_MEDIA_URL_ALLOW_REDIRECTS=0 as well: {redirect_off_0320}."},
        figure="per-release",
        unsettled={"zh": "需要逐个版本让服务器去取一个会重定向的 URL。", "en": "Settling it takes each release asked to fetch a redirecting URL."}),
), title={"zh": "多模态输入", "en": "Multimodal input"})
