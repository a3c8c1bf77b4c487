"""Image size limits on a real vLLM (CPU backend, tiny Qwen3-VL): max_pixels cuts image tokens whether the server
or the request sets it, and a request's own limit is refused unless the server trusts request kwargs. A file of its
own, so that pytest-xdist runs it beside the tuning chapter's other experiments."""

import pandas as pd
import pytest
from conftest import python_imports, require, run_measure

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def image_limits(tmp_path_factory):
    require(python_imports("import torchvision, vllm"), "a torchvision that loads beside vLLM's torch",
            "MEASURE_CPU_VISION=pypi-pair nox -s tests")
    root = tmp_path_factory.mktemp("image-limits")
    run_measure(root, "limits-cpu", "image_limits",
                sizes={"image_limits": {"limits": ["default", 65536], "sides": [896], "images": 1, "warmup": 0,
                                  "context": "4096"}})
    from measure.site.scan import make_store

    store = make_store(root / "data")
    return store.frame(store.env("limits-cpu"), "image_limits.tokens")


def test_max_pixels_cuts_image_tokens_set_on_the_server_or_in_the_request(image_limits):
    rows = image_limits.set_index(["set_in", "max_pixels"])
    free = rows.loc[("none", "default"), "prompt_tokens"]
    server = rows.loc[("server", "65536"), "prompt_tokens"]
    trusted = rows.loc[("request, trusted server", "65536"), "prompt_tokens"]
    # an 896-pixel square holds 802,816 pixels: a 65,536-pixel limit leaves about a twelfth of its image tokens
    assert server < free / 4 and trusted == server, (free, server, trusted)
    # vLLM 0.32 refuses a request's own processor kwargs unless the server trusts them: recorded, with its reason
    request = rows.loc[("request", "65536")]
    assert request["accepted"] == (not isinstance(request["error"], str)), request
    if not request["accepted"]:
        assert "--trust-request-mm-kwargs" in request["error"] and pd.isna(request["prompt_tokens"])
    accepted = image_limits[image_limits["accepted"]]
    assert (accepted["kv_mib"] > 0).all()
