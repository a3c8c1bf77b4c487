"""Multimodal and security experiments end to end on a real vLLM (CPU backend, tiny Qwen3-VL)."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest
from conftest import REPO, WORKER_IN_ENGINE, python_imports, require, smaller

from measure.experiments.security import assert_loopback

ENV = "vision-cpu"


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    require(python_imports("import torchvision, vllm"), "a torchvision that loads beside vLLM's torch",
            "MEASURE_CPU_VISION=pypi-pair nox -s tests")
    tmp = tmp_path_factory.mktemp("vision")
    env = os.environ | {"MEASURE_STATE_DIR": str(tmp / "state"), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"} \
        | smaller({"images_per_side": 1, "repeats": 2, "colocate": 2}) | WORKER_IN_ENGINE
    run = subprocess.run(
        [sys.executable, "-m", "measure", "--data-root", str(tmp / "data"), "run", "multimodal", "security",
         "--profile", "cpu", "--env", ENV],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=2400,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-6000:]
    return tmp / "data" / ENV


@pytest.mark.vllm
def test_multimodal_datasets(published):
    from measure.site.scan import make_store

    store = make_store(published.parent)
    env = store.env(ENV)
    tokens = store.frame(env, "multimodal.image_tokens").sort_values("side")
    assert tokens["prompt_tokens"].is_monotonic_increasing and len(tokens) >= 3
    doubling = store.frame(env, "multimodal.side_doubling")
    assert (doubling["token_ratio"] > 2).all()  # tokens grow with area
    summary = store.frame(env, "multimodal.repeat_summary").iloc[0]
    # Each image asked three times: the 2nd and 3rd ask hit the processor cache.
    assert summary["mm_cache_hits"] == summary["mm_cache_queries"] * 2 // 3
    repeats = store.frame(env, "multimodal.repeat_requests")
    assert (repeats[repeats["ask"] > 1]["prefix_cache_hits"] > 0).all()
    assert (repeats[repeats["ask"] == 1]["mm_cache_hits"] == 0).all()
    # The size-hint gain compares two start-ups: its provenance names those two servers, not the last one started.
    provenance = json.loads((published / "provenance.json").read_text())
    gain = provenance["datasets"]["multimodal.size_hint_gain"]["servers"]
    assert sorted(s.split("-tiny-")[0] for s in gain) == ["vl-count-only", "vl-size-hints"], gain
    assert set(gain) <= set(provenance["servers"])
    # the vLLM setting these servers inherited from the test's environment is part of each one's record
    assert all(server["env"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" for server in provenance["servers"].values())
    assert provenance["experiments"]["multimodal"]["sizes_override"] == {"images_per_side": 1, "repeats": 2, "colocate": 2}
    startup = store.frame(env, "multimodal.startup_memory")
    assert set(startup["limit_mm"]) == {"default", "count only", "size hints", "image 0"}
    assert set(startup["max_model_len"]) == {"4096"}  # the model's own context is tried on a GPU only
    servers = store.frame(env, "servers.startup")
    facts_only = servers[servers["server"].str.startswith(("vl-default-", "vl-count-only-", "vl-image-0-"))]
    assert len(facts_only) == 3 and facts_only["startup_s"].isna().all(), "stopped once the KV cache was sized"
    assert (facts_only["kv_cache_tokens"] > 0).all()
    assert not env.has("multimodal.accuracy"), "dummy weights must not produce accuracy rows"
    cache = store.frame(env, "multimodal.processor_cache").set_index("mm_processor_cache_gb")
    assert set(cache.index) == {0, 4} and (cache["server_rss_mib"] > 100).all()
    multi = store.frame(env, "multimodal.multi_image")
    one, four = (multi[(multi["images_per_prompt"] == k) & (multi["concurrency"] == 1)]["prompt_tokens"].iloc[0] for k in (1, 4))
    assert four > 3 * (one - 30), "four images carry about four times the image tokens"
    formats = store.frame(env, "multimodal.untrusted_formats").set_index("format")
    assert formats.loc["PNG (control)", "accepted"] and len(formats) == 4


@pytest.mark.vllm
def test_security_datasets(published):
    media = pd.read_csv(published / "security.media_fetch.csv")
    allow = media[media["setting"].str.startswith("--allowed-media-domains") & (media["url_kind"] == "loopback, open port")]
    assert len(allow) == 2 and not allow["service_hit"].any(), "the allow-list must stop the fetch before any request"
    closed = media[(media["setting"] == "default") & (media["url_kind"] == "loopback, closed port")]
    assert len(closed) == 1 and not closed["service_hit"].iloc[0]
    auth = pd.read_csv(published / "security.auth_routes.csv")
    v1_models = auth[(auth["path"] == "/v1/models") & (auth["method"] == "GET")]
    assert v1_models["requires_key"].all() and (v1_models["right_key"] == 200).all()
    assert {"generate", "pooling"} <= set(auth["server"])
    lora = pd.read_csv(published / "security.lora_runtime_load.csv")
    assert set(lora["target"]) >= {"a system folder", "a path that does not exist"}


@pytest.mark.parametrize("url", ["http://10.0.0.1/x", "http://example.com/a.png", "http://192.168.1.5:8000/"])
def test_security_probe_refuses_non_loopback_targets(url):
    with pytest.raises(ValueError, match="non-loopback"):
        assert_loopback(url)


def test_security_probe_accepts_loopback():
    for url in ("http://127.0.0.1:9/x", "http://localhost:80/", "http://[::1]:8080/"):
        assert_loopback(url)
