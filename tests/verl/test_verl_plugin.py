"""The plugin loads through verl's entry point in a fresh interpreter, or says why not."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap

from corrgrpo.integrations.verl import hooks


def _check(env_overrides: dict[str, str]) -> tuple[int, list[dict]]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("VERL_USE_EXTERNAL_PLUGINS", "VERL_USE_EXTERNAL_MODULES")
    }
    env.update(env_overrides)
    proc = subprocess.run(
        [sys.executable, "-m", "corrgrpo.integrations.verl.check", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    start = proc.stdout.index("[")
    return proc.returncode, json.loads(proc.stdout[start:])


def test_entry_point_is_declared():
    from importlib.metadata import entry_points

    (ep,) = [ep for ep in entry_points(group="verl.plugins") if ep.name == "corrgrpo"]
    register = ep.load()
    state = register()  # idempotent
    assert ep.value == "corrgrpo.integrations.verl.plugin:register"
    assert callable(register) and "estimators" in state


def test_fresh_interpreter_loads_plugin_through_verl():
    rc, (report,) = _check({})
    assert rc == 0, report
    assert report["ok"] and report["plugin_loaded_by_verl"] and report["legacy_wrapper"]
    assert {
        "corr_grpo",
        "gdpo_corr",
        "mo_grpo",
        "rdpo",
        "dr_grpo",
        "corrgrpo_grpo",
        "corrgrpo_gdpo",
    } <= set(report["estimators"])
    assert report["trainer_modes"] == [
        "corrgrpo_colocate_async",
        "corrgrpo_separate_async",
        "corrgrpo_sync",
    ]


def test_disabled_plugins_are_explained(monkeypatch):
    from corrgrpo.integrations.verl.check import _why_not_loaded

    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "none")
    message = _why_not_loaded()
    assert "VERL_USE_EXTERNAL_PLUGINS='none'" in message
    assert "VERL_USE_EXTERNAL_MODULES=corrgrpo.integrations.verl.plugin" in message
    monkeypatch.setenv("VERL_USE_EXTERNAL_PLUGINS", "someone_else")
    assert "excludes it" in _why_not_loaded()


def test_external_modules_variable_loads_plugin_when_entry_points_are_off():
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERL_USE_EXTERNAL")}
    env.update(
        VERL_USE_EXTERNAL_PLUGINS="none",
        VERL_USE_EXTERNAL_MODULES="corrgrpo.integrations.verl.plugin",
    )
    code = (
        "import sys, verl; from verl.trainer.ppo import core_algos as c; "
        "print(sorted(k for k, f in c.ADV_ESTIMATOR_REGISTRY.items() "
        "if hasattr(f, 'corrgrpo_estimator')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "'corr_grpo'" in proc.stdout and "'corrgrpo_grpo'" in proc.stdout


def test_post_import_hook_fires_once_after_the_module_body(tmp_path, monkeypatch):
    (tmp_path / "corrgrpo_hook_probe.py").write_text(
        textwrap.dedent(
            """
            VALUE = 41

            def get():
                return VALUE
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    hooks.when_imported("corrgrpo_hook_probe", lambda m: seen.append(m.VALUE))
    assert "corrgrpo_hook_probe" in hooks.pending()
    import inspect

    import corrgrpo_hook_probe

    assert seen == [41]
    assert "corrgrpo_hook_probe" not in hooks.pending()
    assert "return VALUE" in inspect.getsource(corrgrpo_hook_probe.get)  # loader still works
    hooks.when_imported("corrgrpo_hook_probe", lambda m: seen.append(m.VALUE + 1))
    assert seen == [41, 42]  # already imported: called at once
    sys.modules.pop("corrgrpo_hook_probe", None)


def test_plugin_failures_are_logged_and_recorded(caplog):
    from corrgrpo.integrations.verl import plugin

    def broken(module):
        raise RuntimeError("boom")

    errors_before = list(plugin.STATE["errors"])
    with caplog.at_level(logging.ERROR, logger="corrgrpo.integrations.verl"):
        plugin._guard("estimator registration", broken, sys)  # verl's import goes on
    try:
        assert "estimator registration failed" in caplog.text
        assert plugin.STATE["errors"][-1] == "estimator registration: RuntimeError: boom"
    finally:
        plugin.STATE["errors"][:] = errors_before
