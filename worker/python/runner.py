"""Playflow python tool runner: one warm interpreter serving calls one at a time.

Protocol (line-delimited JSON):
  stdout (private copy of fd 1) <- {"ready": true, "pid": N, "python": "3.x.y"} once at start
  stdin  (private copy of fd 0) -> {"id": ..., "code": "...", "args": {...}, "libs": {"pd": "pandas"}}
  stdout                        <- {"id": ..., "ok": true, "result": <json>, "log": "..."}
                                 | {"id": ..., "ok": false, "error": {"type", "message", "traceback", "code"},
                                    "log": "...", "recycle": bool}
The real fds 0 and 1 are moved away before user code runs: fd 0 reads /dev/null and fd 1 goes to
stderr, so neither input(), print(), os.write(1, ...) nor a child process can touch the protocol
stream. print() output of a call is captured (sys.stdout and sys.stderr) and returned as `log`.

Two code shapes: a function `main(<params>)` (sync or async) called with parameters bound by name
from args (a **kwargs parameter receives the rest; a lone parameter `input_data` that no arg names
receives all args as one dict, the reference's convention), or a plain body that assigns `result`. Args
are also visible as globals (`args` and each key that is an identifier); libs are pre-imported
under their names.
"""
import contextlib
import importlib
import inspect
import io
import json
import linecache
import os
import signal
import sys
import traceback

RUNNER_FILE = os.path.abspath(__file__)
CODE_NAME = "<playbook>"
MAX_LOG = 1_000_000


class CallError(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _bind(fn, args):
    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
    if len(params) == 1 and params[0].name == "input_data" and "input_data" not in args \
            and params[0].default is params[0].empty and params[0].kind != params[0].KEYWORD_ONLY:
        # Reference convention (deprecated): main(input_data) receives every arg as one dict.
        return [dict(args)], {}
    pos, kw = [], {}
    used = set()
    var_kw = False
    for name, p in sig.parameters.items():
        if p.kind == p.VAR_KEYWORD:
            var_kw = True
            continue
        if p.kind == p.VAR_POSITIONAL:
            continue
        if name in args:
            used.add(name)
            if p.kind == p.POSITIONAL_ONLY:
                pos.append(args[name])
            else:
                kw[name] = args[name]
        elif p.default is p.empty:
            raise CallError(
                "missing_argument",
                "main() parameter '%s' has no value: args has %s" % (name, ", ".join(sorted(args)) or "no keys"),
            )
    if var_kw:
        for k, v in args.items():
            if k not in used:
                kw[k] = v
    return pos, kw


def _import(alias, module):
    """`pandas` → the module; `pandas.DataFrame` → the module, else an attribute of its parent."""
    try:
        return importlib.import_module(module)
    except ImportError as first:
        parent, _, attr = module.rpartition(".")
        if parent:
            try:
                return getattr(importlib.import_module(parent), attr)
            except (ImportError, AttributeError):
                pass
        raise CallError(
            "missing_library",
            "library '%s' (libs.%s) is not installed in the worker's python: %s" % (module, alias, first),
        )


SAFE_INT = 2 ** 53 - 1


def _safe_ints(v):
    """Integers beyond JavaScript's safe range become strings (they would lose digits as numbers)."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        return str(v) if abs(v) > SAFE_INT else v
    if isinstance(v, dict):
        return {k: _safe_ints(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_safe_ints(x) for x in v]
    return v


# An integer beyond the safe range has at least 16 digits (2**53 has 16), so a JSON text without
# 16 digits in a row has none: the walk above (a copy of the whole value in python) is needed only
# then. Digits in strings, floats or 16-digit safe integers set it off too; the walk's answer is
# right either way, it only costs what it cost on every call before.
_DIGIT = bytes(1 if 48 <= c <= 57 else 0 for c in range(256))
_LONG_RUN = b"\x01" * 16
# Large texts are checked and written in pieces of this size: no second copy of the whole answer.
CHUNK = 1 << 18


def _has_long_digit_run(text):
    for i in range(0, len(text), CHUNK):
        if _LONG_RUN in text[i:i + CHUNK + 15].encode("ascii").translate(_DIGIT):
            return True
    return False


def _result_json(result):
    """The result as JSON text (ASCII: json.dumps escapes the rest); big integers as strings."""
    text = json.dumps(result, allow_nan=False)
    if _has_long_digit_run(text):
        text = json.dumps(_safe_ints(result), allow_nan=False)
    return text


def _traceback(exc):
    te = traceback.TracebackException.from_exception(exc)
    frames = [f for f in te.stack if os.path.abspath(f.filename) != RUNNER_FILE]
    te.stack = traceback.StackSummary.from_list(frames)
    return "".join(te.format())


# A step runs the same code on every call (every loop item, every run of the playbook): compiled
# once, it costs about 25 µs less a call. Bounded, so a stream of distinct snippets cannot grow it.
_COMPILED = {}
_COMPILED_MAX = 64


def _compiled(code):
    compiled = _COMPILED.get(code)
    if compiled is None:
        compiled = compile(code, CODE_NAME, "exec")
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.pop(next(iter(_COMPILED)))
        _COMPILED[code] = compiled
    # tracebacks show the lines of the code that ran (the cache holds one snippet's lines)
    if linecache.cache.get(CODE_NAME, (None, None, None, None))[3] != code:
        linecache.cache[CODE_NAME] = (len(code), None, code.splitlines(True), code)
    return compiled


def _run(req):
    code = req.get("code")
    if not isinstance(code, str) or not code.strip():
        raise CallError("bad_config", "python tool needs code")
    args = req.get("args") or {}
    libs = req.get("libs") or {}
    g = {"__name__": "__playflow__", "__builtins__": __builtins__, "args": args}
    for k, v in args.items():
        if isinstance(k, str) and k.isidentifier():
            g[k] = v
    for alias, module in libs.items():
        g[alias] = _import(alias, module)
    compiled = _compiled(code)
    exec(compiled, g)
    main = g.get("main")
    if callable(main):
        pos, kw = _bind(main, args)
        out = main(*pos, **kw)
        if inspect.isawaitable(out):
            # imported on the first async main only: it is a third of an interpreter's start
            import asyncio

            async def _await():
                return await out
            out = asyncio.run(_await())
        return out
    return g.get("result")


def _die_with_worker():
    """The worker may die without closing our pipe in time (SIGKILL while a call runs): the kernel
    signals us when it goes (PR_SET_PDEATHSIG), and we take our process group — whatever the user
    code started — with us. The worker starts us in a group of our own."""
    def _end(signum, frame):
        try:
            os.killpg(0, signal.SIGKILL)
        finally:
            os._exit(1)

    signal.signal(signal.SIGTERM, _end)
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        _end(signal.SIGTERM, None)


def main():
    _die_with_worker()
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    proto_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdin = open(os.devnull, "r")
    sys.stdout = sys.__stdout__ = os.fdopen(1, "w", buffering=1)

    def send(obj):
        proto_out.write(json.dumps(obj, allow_nan=False).encode("ascii") + b"\n")
        proto_out.flush()

    send({"ready": True, "pid": os.getpid(), "python": sys.version.split()[0]})
    reader = io.BufferedReader(proto_in, 1 << 16)
    while True:
        line = reader.readline()
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            send({"id": None, "ok": False, "error": {"type": "ProtocolError", "message": str(e), "code": "protocol"}})
            continue
        rid = req.get("id")
        buf = io.StringIO()
        recycle = False
        outcome = None
        cwd = os.getcwd()
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                result = _run(req)
            try:
                outcome = _result_json(result)
            except (TypeError, ValueError) as e:
                raise CallError("not_serialisable", "result is not JSON-serialisable: %s" % e)
        except CallError as e:
            outcome = {"type": "CallError", "message": str(e), "code": e.code, "traceback": None}
        except SystemExit as e:
            recycle = True
            outcome = {"type": "SystemExit", "message": "code called sys.exit(%r)" % (e.code,), "code": "exit", "traceback": _traceback(e)}
        except BaseException as e:  # noqa: B902 - user code may raise anything, KeyboardInterrupt included
            recycle = not isinstance(e, Exception)
            outcome = {"type": type(e).__name__, "message": str(e), "code": "python_error", "traceback": _traceback(e)}
        finally:
            try:
                os.chdir(cwd)
            except OSError:
                pass
        log = buf.getvalue()
        if len(log) > MAX_LOG:
            log = log[:MAX_LOG] + "\n[log truncated at %d characters]" % MAX_LOG
        if isinstance(outcome, str):
            # The result text goes out as it is, piece by piece: no line is assembled around it.
            proto_out.write(('{"id": %s, "ok": true, "result": ' % json.dumps(rid)).encode("ascii"))
            for i in range(0, len(outcome), CHUNK):
                proto_out.write(outcome[i:i + CHUNK].encode("ascii"))
            proto_out.write((', "log": %s}\n' % json.dumps(log)).encode("ascii"))
            proto_out.flush()
        else:
            send({"id": rid, "ok": False, "error": outcome, "log": log, "recycle": recycle})


if __name__ == "__main__":
    main()
