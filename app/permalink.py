"""Permalinks: the explorer's view state <-> URL query parameters.

A link names what to compile and what to look at; the app recompiles it (or finds the bundle
in its cache) and restores the view. Pure functions, no Streamlit, no JAX:

    state_to_params(state) -> {param: str}      for st.query_params / a link
    params_to_state(params) -> state            never raises; bad values land in state["errors"]

The state is a plain dict (keys absent or None when unset):

| key | meaning | query parameter |
|---|---|---|
| ``model`` | a gallery model name | ``model=mlp`` |
| ``code`` | short id of pasted code (``analysis.service.store.Store.put_code``) | ``code=k3j5q2xa`` |
| ``backend`` | ``auto``, ``cpu`` or ``gpu`` | ``backend=cpu`` |
| ``options`` | XLA compiler options ``{KEY: value}`` | ``opt=KEY=VALUE;KEY=VALUE`` |
| ``view`` | the tab below the graphs (``VIEWS``), or ``code``: the graphs' Code pane open | ``view=kernels`` |
| ``node`` | the selected instruction's name | ``node=fusion.3`` |
| ``side`` | where ``node`` is: ``pre`` or ``post`` | ``side=post`` |
| ``line`` | a selected source line (instead of a node) | ``line=14`` |
| ``present`` | presentation mode (True when on) | ``present=1`` |
| ``measure`` | kernel timings measured (the default; False only when off) | ``measure=0`` |
| ``compare`` | compiled again with fusion disabled, side by side (True when on) | ``compare=1`` |
| ``devices`` | the devices the program runs on (1..8), when chosen rather than the file's own | ``devices=8`` |
| ``jax`` | the jax release compiled with (``analysis.service.runtimes``), when not the app's own | ``jax=0.10.2`` |

``model`` and ``code`` exclude each other. ``jax`` is checked here as a version's form only
(digits and dots); whether this server has that release is the app's to say (``app.explorer_link``). ``params_to_state`` also accepts the values as
lists (what ``st.query_params.to_dict()`` or ``urllib.parse.parse_qs`` give) and ignores
parameters it does not know. ``state["errors"]`` is a list of one-line messages (empty when
the link was fine); a bad value is dropped and the rest of the link still applies.

A link's address is the configured public address of the app (``public_url``: the setting
``XLA_EXPLORER_PUBLIC_URL``, or ``public_url`` in the ``[app]`` table of the settings file),
else the address the browser asked for (``link_base``): a server behind a proxy or on a
classroom machine then hands out a link students can open, not ``localhost``.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

BACKENDS = ("auto", "cpu", "gpu", "h200")  # h200: XLA:GPU for an H200 target, no GPU needed
# the tabs under the graphs (Kernels & timings, Text views, Source, Memory, Devices: the keys of
# app.explorer_link.TABS), and the graphs' Code pane
VIEWS = ("kernels", "text", "source", "memory", "devices", "code")
SIDES = ("pre", "post")
STATE_KEYS = ("model", "code", "backend", "options", "view", "node", "side", "line", "present", "measure", "compare",
              "devices", "jax")
FLAGS = ("present", "measure", "compare")  # on/off settings: present=1, measure=0, compare=1
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")

MAX_PARAM = 2000  # characters per parameter value
_CODE_ID = re.compile(r"[a-z2-7]{8,52}")  # base32 prefix of a SHA-256 (Store.put_code)
_GALLERY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_NODE = re.compile(r"[A-Za-z0-9_.\-$:]{1,200}")  # HLO instruction names
_OPTION_KEY = re.compile(r"xla_[a-z0-9_]{1,100}")
_JAX_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,4}){1,3}")  # 0.10.2, 0.12.0.1


def _gallery_names() -> set[str]:
    try:
        from sample_models import gallery

        return set(gallery())
    except (OSError, SyntaxError, ValueError):  # no gallery readable: every name is unknown
        return set()


def _format_value(v) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace(";", "\\;")


def _split_options(text: str) -> list[str]:
    """``a=1;b=x\\;y`` -> ``["a=1", "b=x;y"]`` (``\\;`` is a literal ``;``)."""
    out, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c == ";":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def encode_options(options: dict) -> str:
    """Compiler options as one query parameter: ``a=1;b=x\\;y``."""
    return ";".join(f"{_escape(str(k))}={_escape(_format_value(v))}" for k, v in options.items())


def decode_options(text: str) -> list[str]:
    """The ``KEY=VALUE`` items of an ``encode_options`` parameter."""
    return _split_options(text)


def state_to_params(state: dict) -> dict[str, str]:
    """The query parameters of a view state (unset keys are left out)."""
    p: dict[str, str] = {}
    if state.get("code"):
        p["code"] = str(state["code"])
    elif state.get("model"):
        p["model"] = str(state["model"])
    if state.get("backend"):
        p["backend"] = str(state["backend"])
    opts = state.get("options") or {}
    if opts:
        p["opt"] = encode_options(opts)
    if state.get("view"):
        p["view"] = str(state["view"])
    if state.get("node"):
        p["node"] = str(state["node"])
        p["side"] = str(state.get("side") or "post")
    elif state.get("line") is not None:
        p["line"] = str(int(state["line"]))
    if state.get("present"):
        p["present"] = "1"
    if state.get("measure") is False:  # measuring is the default: only "off" is written
        p["measure"] = "0"
    if state.get("compare"):
        p["compare"] = "1"
    if isinstance(state.get("devices"), int):
        p["devices"] = str(state["devices"])
    if state.get("jax"):
        p["jax"] = str(state["jax"])
    return p


def query_string(state: dict) -> str:
    """``?model=mlp&backend=cpu...`` for a link (``""`` for an empty state)."""
    p = state_to_params(state)
    return ("?" + urlencode(p)) if p else ""


def _one(params, key: str):
    v = params.get(key) if hasattr(params, "get") else None
    if isinstance(v, (list, tuple)):
        v = v[-1] if v else None
    if v is None:
        return None
    return str(v).strip()


def params_to_state(params, gallery_names=None) -> dict:
    """The view state a link asks for. Never raises: every problem is a one-line message in
    ``state["errors"]`` and that value is left unset. ``gallery_names`` defaults to the
    gallery's models."""
    state: dict = {k: None for k in STATE_KEYS}
    state["options"] = {}
    errors: list[str] = []
    state["errors"] = errors
    if not hasattr(params, "get"):
        errors.append("link: the query parameters are not a mapping")
        return state

    def get(key: str):
        try:
            v = _one(params, key)
        except Exception as e:  # noqa: BLE001 - URL parameters are a user boundary: whatever the mapping raises is reported
            errors.append(f"link: cannot read parameter {key!r} ({type(e).__name__})")
            return None
        if v is not None and len(v) > MAX_PARAM:
            errors.append(f"link: parameter {key!r} is too long ({len(v)} characters)")
            return None
        return v or None

    model, code = get("model"), get("code")
    if model and code:
        errors.append("link: give either model= or code=, not both (using code=)")
        model = None
    if model:
        names = set(gallery_names) if gallery_names is not None else _gallery_names()
        if not _GALLERY_NAME.fullmatch(model) or model not in names:
            shown = model if len(model) <= 40 else model[:37] + "..."
            errors.append(f"link: no gallery model named {shown!r}"
                          + (f" (there are: {', '.join(sorted(names))})" if names else ""))
        else:
            state["model"] = model
    if code:
        c = code.lower()
        if not _CODE_ID.fullmatch(c):
            errors.append(f"link: {code[:40]!r} is not a code id (8 or more letters a-z and digits 2-7)")
        else:
            state["code"] = c

    def choice(key: str, allowed) -> None:  # one of a few words, any case
        value = get(key)
        if not value:
            return
        if value.lower() in allowed:
            state[key] = value.lower()
        else:
            errors.append(f"link: unknown {key} {value[:20]!r} ({', '.join(allowed)})")

    choice("backend", BACKENDS)

    opt = get("opt")
    if opt:
        from analysis.options import parse_options  # pure: imports no JAX

        for item in _split_options(opt):
            key, sep, _ = item.partition("=")
            if not sep or not _OPTION_KEY.fullmatch(key.strip()):
                errors.append(f"link: bad compiler option {item[:60]!r} (want xla_NAME=VALUE)")
                continue
            try:
                state["options"].update(parse_options([item]))
            except Exception as e:  # noqa: BLE001 - ExplorerError or anything else: report, go on
                errors.append(f"link: bad compiler option {item[:60]!r}: {getattr(e, 'message', e)}")

    choice("view", VIEWS)

    node, side, line = get("node"), get("side"), get("line")
    if node:
        if not _NODE.fullmatch(node):
            errors.append(f"link: {node[:40]!r} is not an instruction name")
        else:
            s = (side or "post").lower()
            if s not in SIDES:
                errors.append(f"link: unknown side {side[:20]!r} (pre or post); using post")
                s = "post"
            state["node"], state["side"] = node, s
    elif side and side.lower() not in SIDES:
        errors.append(f"link: unknown side {side[:20]!r} (pre or post)")
    devices = get("devices")
    if devices:
        if devices.isdigit() and 1 <= int(devices) <= 8:
            state["devices"] = int(devices)
        else:
            errors.append(f"link: devices must be a number from 1 to 8, not {devices[:20]!r}")
    jax = get("jax")
    if jax:
        if _JAX_VERSION.fullmatch(jax):
            state["jax"] = jax
        else:
            errors.append(f"link: jax must be a release like 0.10.2, not {jax[:20]!r}")
    for key in FLAGS:
        value = get(key)
        if not value:
            continue
        if value.lower() in _TRUE:
            state[key] = True
        elif value.lower() in _FALSE:
            state[key] = False
        else:
            errors.append(f"link: {key} must be 1 or 0, not {value[:20]!r}")
    if line:
        if node:
            errors.append("link: give either node= or line=, not both (using node=)")
        elif line.isdigit() and 0 < int(line) < 10_000_000:
            state["line"] = int(line)
        else:
            errors.append(f"link: line must be a positive whole number, not {line[:20]!r}")
    return state


def selection(state: dict) -> dict:
    """The app's selection dict (``{"side", "name"}`` or ``{"line"}``) of a state."""
    if state.get("node"):
        return {"side": state.get("side") or "post", "name": state["node"]}
    if state.get("line") is not None:
        return {"line": state["line"]}
    return {}


def resolve_code(state: dict, store) -> str | None:
    """The pasted code a state's ``code`` id names, from ``store`` (``analysis.service.store.Store``);
    None (with a message appended to ``state["errors"]``) when the store does not have it or
    cannot be read."""
    cid = state.get("code")
    if not cid:
        return None
    try:
        source = store.get_code(cid)
    except Exception as e:  # noqa: BLE001 - ExplorerError of the store: report, do not crash
        state.setdefault("errors", []).append(f"link: cannot read code {cid!r}: {getattr(e, 'message', e)}")
        return None
    if source is None:
        state.setdefault("errors", []).append(f"link: no code with id {cid!r} on this server (it may have "
                                              "been made on another one)")
    return source


MAX_PUBLIC_URL = 300
_PUBLIC_URL = re.compile(r"https?://[A-Za-z0-9.\-]+(?::\d{1,5})?(?:/[A-Za-z0-9._~\-/]*)?")


def public_url(environ=None, settings_path: str | None = None) -> tuple[str | None, str | None]:
    """The configured public address of the app and a one-line problem with it: ``(url, None)``,
    ``(None, None)`` when none is configured, ``(None, message)`` when the one configured is not
    an ``http(s)://host[:port][/path]`` address (then links use the request's address)."""
    import os

    from analysis.errors import ExplorerError
    from analysis.service.settings import settings_file, settings_table

    environ = os.environ if environ is None else environ
    value = environ.get("XLA_EXPLORER_PUBLIC_URL")
    where = "XLA_EXPLORER_PUBLIC_URL"
    if not value:
        path = settings_path or settings_file(environ)
        try:
            value = settings_table("app", path).get("public_url")
        except ExplorerError as e:
            return None, f"settings: {e.one_line()}"
        where = f"public_url in {path}"
    if not value:
        return None, None
    if not isinstance(value, str) or len(value) > MAX_PUBLIC_URL or not _PUBLIC_URL.fullmatch(value.strip()):
        return None, f"settings: {where} is not an http(s)://host[:port][/path] address; links use the request's address"
    return value.strip().rstrip("/"), None


def link_base(request_url: str | None, configured: str | None, page_path: str = "") -> str:
    """The address a link starts with (no query): the configured public address with the
    page's path below the app (``page_path``, e.g. ``compare``) when there is one, else the
    request's address without its query."""
    if configured:
        return configured + "/" + page_path.strip("/")
    return (request_url or "").split("?")[0].split("#")[0]
