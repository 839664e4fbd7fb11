"""The server's Streamlit settings that its speed depends on, read the way Streamlit reads them
when the app is started from the repository (``.streamlit/config.toml`` in the working folder):
a setting in the wrong section, misspelt or with a value Streamlit does not take is dropped by
Streamlit with a warning nobody sees, and the page is slower for it (docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import ROOT

READ = ("import json\n"
        "from streamlit import config\n"
        "config.get_config_options(force_reparse=True)\n"
        "print(json.dumps({k: config.get_option(k) for k in %r}))")


def _options(*names: str, flags: tuple[str, ...] = ()) -> dict:
    code = READ % (list(names),)
    if flags:  # the command line's flags, as ``streamlit run --server.x y`` passes them
        code = code.replace("force_reparse=True", "force_reparse=True, options_from_flags=%r" % (
            {flags[i].lstrip("-"): flags[i + 1] for i in range(0, len(flags), 2)},))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_server_does_not_watch_its_sources_nor_collect_after_every_run():
    got = _options("server.fileWatcherType", "runner.postScriptGC")
    # each is Streamlit's other way by default (checked below), so each line here is the file's
    assert got == {"server.fileWatcherType": "none", "runner.postScriptGC": False}


def test_a_developer_can_still_turn_the_watcher_on_from_the_command_line():
    got = _options("server.fileWatcherType", flags=("--server.fileWatcherType", "auto"))
    assert got == {"server.fileWatcherType": "auto"}


def test_streamlits_own_defaults_are_the_other_way(tmp_path):
    # the same read in a folder without the file: what the app would run with if it were lost
    code = READ % (["server.fileWatcherType", "runner.postScriptGC"],)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={"HOME": str(tmp_path), "PATH": ""})
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["server.fileWatcherType"] != "none" and got["runner.postScriptGC"] is True
