"""The video experiment end to end on a real vLLM (CPU backend, tiny Qwen3-VL): video/jpeg data URLs of N frames
become prompt tokens in proportion to frames and area, and a start-up without videos allowed is recorded beside one
with them."""

import pytest
from conftest import python_imports, require, run_measure

pytestmark = pytest.mark.vllm

SIZES = {"video": {"frames": [2, 4], "sides": [112, 224], "repeats": 1, "warmup": 1, "max_model_len": 4096}}


def test_video_frames_and_startup_memory(tmp_path):
    require(python_imports("import torchvision, vllm"), "a torchvision that loads beside vLLM's torch",
            "MEASURE_CPU_VISION=pypi-pair nox -s tests")
    run_measure(tmp_path, "video-cpu", "video", sizes=SIZES)
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env = store.env("video-cpu")
    frames = store.frame(env, "video.frames").set_index(["side", "frames"])
    assert sorted(frames.index) == [(112, 2), (112, 4), (224, 2), (224, 4)]
    for side in (112, 224):  # twice the frames, about twice the video tokens (a timestamp per frame pair beside)
        assert 1.6 < frames.loc[(side, 4), "video_tokens"] / frames.loc[(side, 2), "video_tokens"] < 2.4
    for n in (2, 4):  # four times the area, well over twice the tokens
        assert frames.loc[(224, n), "video_tokens"] > 2 * frames.loc[(112, n), "video_tokens"]
    assert (frames["prompt_tokens"] > frames["video_tokens"]).all() and (frames["ttft_ms"] > 0).all()
    startup = store.frame(env, "video.startup_memory").set_index("limit_mm")
    assert sorted(startup.index) == ["video 0", "video 1"] and startup["started"].all()
    assert startup.loc["video 0", "limit_mm_per_prompt"] == '{"image":1,"video":0}'
    servers = store.frame(env, "servers.startup")
    facts_only = servers[servers["server"].str.startswith("vl-video-0-")]
    assert len(facts_only) == 1 and facts_only["startup_s"].isna().all(), "stopped once the KV cache was sized"
