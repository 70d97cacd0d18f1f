"""Round trip of the ONNX conformance cases through the exporter: import (from_onnx) -> to_onnx ->
ONNX Runtime, compared with the original model run by ONNX Runtime (or, when ONNX Runtime cannot
run the original, with the case's expected outputs), using the case's rtol/atol.

    python tests/frontend/onnx_export_roundtrip.py [--every K] [--filter REGEX] [-v] [--build]

``--build`` instead compiles each case with ``plait.build(mod, "host: c; ort: onnxruntime",
place="*=ort?")`` (every call ONNX Runtime can run on the ORT piece, the rest compiled C) and runs
it with the graph executor (status ``not_built`` when the build refuses it for a documented reason:
symbolic shapes, control flow).

Statuses: ``passed``; ``failed`` (wrong numbers, an invalid exported model, an exporter crash);
``not_imported`` (from_onnx refused the case: nothing to export); ``not_exported`` (to_onnx raised
ExportError: an operator or attribute with no ONNX form at the opset); ``ort_no_kernel`` (the exported
model is valid ONNX, onnx.checker with full shape inference agrees, but ONNX Runtime has no kernel
for one of its nodes; the original model uses another operator, so this is no exporter bug).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conformance"))

from onnx_conformance import Case, _array, _import, _load_dir, _load_pb, all_cases, sample  # noqa: E402

from plait.errors import PlaitError, UnsupportedError  # noqa: E402
from plait.frontend.onnx_export import ExportError, to_onnx  # noqa: E402


def _session(model: onnx.ModelProto) -> Any:
    from plait.testing.ort_reference import reference_session

    return reference_session(model, log_severity=4)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


BUILD_TARGET = "host: c; ort: onnxruntime"


def _built(main: Any, mod: Any, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of ``plait.build(mod, BUILD_TARGET, place="*=ort?")`` run by the graph executor."""
    import plait
    from plait.executor import GraphModule

    art = plait.build(mod, BUILD_TARGET, place="*=ort?")
    return GraphModule(art)(**{p.name_hint: feeds[p.name_hint] for p in main.params})


def roundtrip(case: Case, build: bool = False) -> tuple[str, str]:
    """(status, message) of one conformance case (its first data set). With ``build``, the model
    goes through ``plait.build`` for ``host: c; ort: onnxruntime`` with every call ORT can run on the
    ORT piece (``*=ort?``) and the graph executor, instead of ``to_onnx`` alone."""
    try:
        if case.model is None:
            _load_dir(case)
        assert case.model is not None and case.data_sets
        ins, outs = case.data_sets[0]
        if case.model_dir is not None:
            ins, outs = [_load_pb(p) for p in ins], [_load_pb(p) for p in outs]
        inits = {t.name for t in case.model.graph.initializer}
        in_names = [i.name for i in case.model.graph.input if i.name not in inits]
        feeds = {n: _array(v) for n, v in zip(in_names, ins)}
        if any(not isinstance(v, np.ndarray) for v in feeds.values()):
            return "not_imported", "sequence or optional inputs"
        try:
            mod, _bound = _import(case.model, feeds)
        except (UnsupportedError, PlaitError) as exc:
            return "not_imported", _first_line(exc)
        main = mod["main"]
        if build:
            return _check_built(case, main, mod, feeds, outs)
        try:
            exported = to_onnx(main, name=case.name)
        except ExportError as exc:
            return "not_exported", str(exc)
        try:
            sess = _session(exported)
        except Exception as exc:  # noqa: BLE001
            try:
                onnx.checker.check_model(exported, full_check=True)
            except Exception as bad:  # noqa: BLE001
                return "failed", f"invalid exported model: {_first_line(bad)}"
            if "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc):
                return "ort_no_kernel", _first_line(exc)
            return "failed", f"onnxruntime rejects the exported model: {_first_line(exc)}"
        xfeeds = {i.name: np.asarray(feeds[p.name_hint]) for i, p in zip(sess.get_inputs(), main.params)}
        with np.errstate(all="ignore"):
            got = sess.run(None, xfeeds)
        refs = [("expected outputs", [_array(v) for v in outs])]
        try:
            refs.insert(0, ("original on onnxruntime", _session(case.model).run(None, feeds)))
        except Exception:  # noqa: BLE001 - ORT cannot run the original: the expected outputs only
            pass
        problems = [p for against, want in refs if (p := _compare(got, want, case, against))]
        if len(problems) == len(refs):  # matching either reference is a pass
            return "failed", problems[0]
    except Exception as exc:  # noqa: BLE001 - every failure is a result
        return "failed", f"crash: {_first_line(exc)}"
    return "passed", ""


def _check_built(case: Case, main: Any, mod: Any, feeds: dict, outs: list) -> tuple[str, str]:
    from plait.driver import BuildError

    try:
        with np.errstate(all="ignore"):
            got = _built(main, mod, feeds)
    except (BuildError, PlaitError) as exc:
        msg = _first_line(exc)
        if re.search(r"symbolic|static|not supported|has no TE compute|graph executor: unsupported|"
                     r"build for one piece", msg):
            return "not_built", msg
        return "failed", f"build: {msg}"
    refs = [("expected outputs", [_array(v) for v in outs])]
    try:
        refs.insert(0, ("original on onnxruntime", _session(case.model).run(None, feeds)))
    except Exception:  # noqa: BLE001
        pass
    problems = [p for against, want in refs if (p := _compare(list(got), want, case, against))]
    if len(problems) == len(refs):
        return "failed", problems[0]
    return "passed", ""


def _compare(got: list, want: list, case: Case, against: str) -> str:
    if len(got) != len(want):
        return f"{len(got)} outputs, {against}: {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"output {i}: {g.dtype}{list(g.shape)}, {against}: {w.dtype}{list(w.shape)}"
        try:
            np.testing.assert_allclose(g, w, rtol=case.rtol, atol=case.atol, equal_nan=True, verbose=False)
        except AssertionError as exc:
            return f"output {i} differs from the {against}: " + " ".join(str(exc).split())[:200]
    return ""


def run_all(every: int = 1, pattern: str | None = None, build: bool = False) -> dict[str, list[tuple[str, str]]]:
    by_status: dict[str, list[tuple[str, str]]] = {}
    for case in sample(all_cases(pattern), every):
        status, msg = roundtrip(case, build)
        by_status.setdefault(status, []).append((case.name, msg))
    return by_status


def main(argv: list[str]) -> int:
    every = int(argv[argv.index("--every") + 1]) if "--every" in argv else 1
    pattern = argv[argv.index("--filter") + 1] if "--filter" in argv else None
    t0 = time.perf_counter()
    res = run_all(every, pattern, build="--build" in argv)
    for status in ("failed", "not_exported", "ort_no_kernel", "not_built") if "-v" in argv else ("failed",):
        for name, msg in res.get(status, []):
            print(f"{status.upper()} {name}: {msg}")
    if "-v" in argv:
        reasons = Counter(re.sub(r"'[^']*'", "'...'", m) for m in (m for _, m in res.get("not_exported", [])))
        for r, n in reasons.most_common():
            print(f"{n:4d} not exported: {r}")
    print(", ".join(f"{len(v)} {k}" for k, v in sorted(res.items())), f"({time.perf_counter() - t0:.0f} s)")
    return 1 if res.get("failed") else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
