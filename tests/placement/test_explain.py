"""plait.placement.explain: the report of a placement (per-call costs on every piece, reasons, totals),
its text, JSON, DOT drawing and rendering."""

import json
import re
import shutil
import subprocess

import pytest

from plait import relay
from plait.errors import PlaitError
from plait.frontend.onnx import from_onnx
from plait.placement import explain as explain_mod
from plait.placement.capability import op_is
from plait.placement.cost import CostModel, Estimate, objective_value
from plait.pipeline.explain import explain, prepare
from plait.placement.explain import NO_DOT, ExplainError, Report, fmt_joules, fmt_seconds
from plait.placement.rules import PlacementError, parse_place
from plait.relay.expr import Call, Expr, Function
from plait.relay.infer import infer_expr
from plait.relay.visitor import post_order
from plait.target import CompositeTarget
from plait.target.testing import register_test_backend
from plait.testing.onnx_models import ds_cnn

SEED = "low_power_cpu: c -mcpu=cortex-m0; inference_cpu: c -mcpu=cortex-m7f"
PINS = "/fc/*=low_power_cpu,/pool/*=low_power_cpu?"
HAS_DOT = shutil.which("dot") is not None


@pytest.fixture(scope="module")
def mod():
    return from_onnx(ds_cnn())


@pytest.fixture(scope="module")
def reports(mod):
    """DS-CNN on the seed composite: each objective, and latency with --place pins."""
    out = {obj: explain(mod, SEED, obj) for obj in ("latency", "energy", "weighted")}
    out["weighted_0.9"] = explain(mod, SEED, "weighted", weight=0.9)
    out["pinned"] = explain(mod, SEED, "latency", place=PINS)
    return out


def _op_calls(func):
    return [n for n in post_order(func.body) if isinstance(n, Call) and not isinstance(n.op, Expr)]


def test_every_call_once_in_topological_order(mod, reports):
    calls = _op_calls(prepare(mod))
    assert len(calls) == 31  # DS-CNN after FoldConstant + FoldBatchNorm (batch norms become adds)
    assert not any(c.op_name == "nn.batch_norm" for c in calls)
    for r in reports.values():
        assert [c.op for c in r.calls] == [c.op_name for c in calls]
        assert [c.name for c in r.calls] == [c.meta.get("name") for c in calls]
        assert len({c.id for c in r.calls}) == len(r.calls)
        seen = set()
        for c in r.calls:  # inputs come from earlier calls or the parameter
            assert all(i in seen or i == "%input" for i in c.inputs)
            seen.add(c.id)
        assert r.outputs == [r.calls[-1].id]
        assert r.params == {"input": "Tensor[(1, 1, 49, 10), float32]"}
        assert set(r.per_piece()) == {"low_power_cpu", "inference_cpu"}
        assert sum(r.per_piece().values()) == 31


def test_chosen_piece_is_cheapest_unless_the_reason_says_otherwise(reports):
    special = ("pinned by ", "preferred by ", "transfers (", "memory (")
    n_special = 0
    for key, r in reports.items():
        for c in r.calls:
            assert set(c.costs) == {"low_power_cpu", "inference_cpu"}
            capable = {p: v for p, v in c.costs.items() if "cannot" not in v}
            assert c.piece in capable
            for v in capable.values():
                if c.op == "flatten":  # a view: executors alias it, nothing runs
                    assert (v["source"], v["seconds"], v["joules"]) == ("view", 0.0, 0.0)
                else:
                    assert v["source"] in ("measured", "hook", "schedule", "roofline")
                assert v["value"] == pytest.approx(objective_value(v["seconds"], v["joules"], r.objective, r.weight))
            best = min(v["value"] for v in capable.values())
            assert not c.reason.startswith(("region ", "with region ")) and c.region is None  # no patterns here
            if c.reason.startswith(special):
                n_special += 1
                if c.reason.startswith(("transfers (", "memory (")):
                    cheaper = re.match(r"\w+ \('(\w+)'", c.reason).group(1)
                    assert capable[cheaper]["value"] < capable[c.piece]["value"]
            else:
                assert c.reason in ("cheapest", "only capable"), c.reason
                assert capable[c.piece]["value"] == best, (key, c)
    # the pinned report's two pins and its preference; the flatten between the pool and the pinned gemm
    # is a view, free on every piece: it goes with them as the cheapest, not for the transfers
    assert n_special >= 3
    flatten = reports["pinned"].call("/Flatten")
    assert (flatten.piece, flatten.reason) == ("low_power_cpu", "cheapest")


def test_latency_puts_float_work_on_the_m7f(reports):
    r = reports["latency"]
    assert r.per_piece() == {"low_power_cpu": 0, "inference_cpu": 31}
    assert r.transfers == [] and r.method == "ilp" and r.exact
    for c in r.calls:
        if c.op == "nn.conv2d":
            assert c.costs["low_power_cpu"]["seconds"] > 20 * c.costs["inference_cpu"]["seconds"]


def test_pins_show_as_pinned(reports):
    r = reports["pinned"]
    assert r.rules == ["/fc/*=low_power_cpu", "/pool/*=low_power_cpu?"]
    fc = [c for c in r.calls if c.name == "/fc/Gemm"]
    assert [c.op for c in fc] == ["nn.dense", "add"]
    for c in fc:
        assert (c.piece, c.reason) == ("low_power_cpu", "pinned by --place rule '/fc/*=low_power_cpu'")
    pool = r.call("/pool/GlobalAveragePool")
    assert (pool.piece, pool.reason) == ("low_power_cpu", "preferred by --place rule '/pool/*=low_power_cpu?'")
    text = r.text()
    assert "pinned by --place rule '/fc/*=low_power_cpu'" in text
    assert "rules: /fc/*=low_power_cpu,/pool/*=low_power_cpu?" in text
    # the one value crossing from the M7F to the M0: the last ReLU's 64x25x5 floats
    assert len(r.transfers) == 1
    t = r.transfers[0]
    assert (r.call(t["value"]).name, t["from"], t["to"], t["bytes"]) == \
        ("/block3/pw/Relu", "inference_cpu", "low_power_cpu", 64 * 25 * 5 * 4)
    assert t["seconds"] == pytest.approx(t["bytes"] / CompositeTarget(SEED).transfer.bandwidth
                                         + CompositeTarget(SEED).transfer.switch)
    assert r.memory["low_power_cpu"] == {"used": 12 * 64 * 4 + 12 * 4, "capacity": 256 * 1024, "memory": "flash"}


def test_totals_are_the_sums_of_the_calls_and_transfers(reports):
    for r in reports.values():
        a, t = r.assignment, r.totals
        call_s = sum(c.costs[c.piece]["seconds"] for c in r.calls)
        call_j = sum(c.costs[c.piece]["joules"] for c in r.calls)
        tr_s = sum(x["seconds"] for x in r.transfers)
        tr_j = sum(x["joules"] for x in r.transfers)
        assert t["call_seconds"] == pytest.approx(call_s) and t["call_joules"] == pytest.approx(call_j)
        assert t["transfer_seconds"] == pytest.approx(tr_s) and t["transfer_joules"] == pytest.approx(tr_j)
        assert t["seconds"] == pytest.approx(call_s + tr_s) and t["joules"] == pytest.approx(call_j + tr_j)
        assert t["value"] == pytest.approx(objective_value(call_s + tr_s, call_j + tr_j, r.objective, r.weight))
        # the solver's own accounting agrees
        assert t["value"] == pytest.approx(a.total, rel=1e-9)
        assert (t["seconds"], t["joules"], t["transfer_seconds"]) == \
            pytest.approx((a.seconds, a.joules, a.transfer_seconds), rel=1e-9)
        used = {p: sum(c.weight_bytes for c in r.calls if c.piece == p) for p in r.pieces}
        assert {p: m["used"] for p, m in r.memory.items()} == used
        assert all(m["capacity"] is None or m["used"] <= m["capacity"] for m in r.memory.values())


def test_single_piece_totals_are_sums_over_calls(reports):
    for r in reports.values():
        for p, s in r.single_piece.items():
            assert "cannot" not in s  # both pieces run every call of DS-CNN
            assert s["seconds"] == pytest.approx(sum(c.costs[p]["seconds"] for c in r.calls))
            assert s["joules"] == pytest.approx(sum(c.costs[p]["joules"] for c in r.calls))
            assert s["value"] == pytest.approx(sum(c.costs[p]["value"] for c in r.calls))
            assert s["weight_bytes"] == sum(c.weight_bytes for c in r.calls)
        # all the weights (90 KB) fit the M0's 256 KiB of flash and the M7F's 1 MiB
        assert r.single_piece["low_power_cpu"]["fits"] is True
        assert r.single_piece["inference_cpu"]["fits"] is True
        if not r.rules:  # the optimum is no worse than everything on the M7F
            assert r.totals["value"] <= r.single_piece["inference_cpu"]["value"] * (1 + 1e-9)
    lat = reports["latency"]
    assert lat.totals["value"] == pytest.approx(lat.single_piece["inference_cpu"]["value"])


def test_single_piece_that_cannot_hold_the_weights_says_so(mod):
    r = explain(mod, "low_power_cpu: c -mcpu=cortex-m0 -flash-kb=64; inference_cpu: c -mcpu=cortex-m7f")
    assert r.single_piece["low_power_cpu"]["fits"] is False
    assert re.search(r"\n  low_power_cpu  [\d.]+ s, [\d.]+ mJ; latency [\d.]+ s; the weights do not fit its flash "
                     r"\(90,416 > 65,536 bytes\)\n", r.text())
    assert r.facts["low_power_cpu"]["flash_kb"] == {"value": 64, "unit": "KiB", "where": "target option -flash-kb",
                                                     "note": ""}


def test_energy_and_weighted_objectives(reports):
    for key in ("energy", "weighted", "weighted_0.9"):
        r = reports[key]
        assert r.objective == key.split("_")[0]
    assert reports["weighted"].weight == 0.5 and reports["weighted_0.9"].weight == 0.9
    assert "objective: weighted (0.9 x us + 0.1 x mJ)" in reports["weighted_0.9"].text()
    assert "objective: energy;" in reports["energy"].text()


def test_text_has_a_row_per_call_and_the_totals(reports):
    r = reports["pinned"]
    lines = r.text().splitlines()
    assert lines[0] == f"placement of 31 calls on {str(CompositeTarget(SEED))!r}"
    head = next(i for i, l in enumerate(lines) if l.lstrip().startswith("#"))
    assert lines[head].split() == ["#", "node", "op", "low_power_cpu", "inference_cpu", "piece", "reason"]
    rows = lines[head + 1:head + 32]
    for k, (row, c) in enumerate(zip(rows, r.calls)):
        assert row.split()[:3] == [str(k), c.label, c.op]
        assert len(re.findall(r"\*\d", row)) == 1  # the chosen piece's cell
        assert f"  {c.piece}  {c.reason}" in row
    assert lines[head + 32].startswith("(* chosen;")
    assert any(l.startswith("chosen: ") and "transfers 330 us" in l for l in lines)
    assert "transfers (1):" in lines
    summary = r.summary().splitlines()
    assert summary[0].startswith("placement (latency, ilp (optimal)): low_power_cpu 4 calls, inference_cpu 27 calls; "
                                 "1 transfer; estimated ")
    assert summary[1] == ("weights in memory: low_power_cpu 3,120 of 262,144 bytes of flash (1%); "
                          f"inference_cpu {r.memory['inference_cpu']['used']:,} of 1,048,576 bytes of flash (8%)")


def test_the_report_shows_each_fact_and_where_it_comes_from(reports):
    lines = reports["latency"].text().splitlines()
    i = lines.index("facts of the pieces (what the cost model and the memory checks use, and where each comes from):")
    assert lines[i + 1:i + 3] == [
        "  low_power_cpu:",
        "    clock_mhz  16 MHz       tag cortex-m0: nRF51822 product specification (16 MHz); RIOT nRF51822 board page"]
    assert "    flash_kb   1024 KiB     tag cortex-m7f: STM32F746NG datasheet (DS10916): 1 MB flash (Zephyr " \
           "stm32f746g_disco.yaml)" in lines
    host = explain(_chain(1), "a: c -clock-mhz=3000; b: c -simd-bits=256")
    assert host.facts["a"]["clock_mhz"]["where"] == "target option -clock-mhz"
    assert host.facts["b"]["simd_bits"]["where"] == "target option -simd-bits"
    assert host.facts["b"]["ram_kb"]["where"].startswith("measured on this machine: sysconf")


def test_json_round_trip(reports):
    for r in reports.values():
        d = json.loads(r.to_json())
        assert d == r.to_dict()
        back = Report.from_dict(d)
        assert back == r  # dataclass equality (the Assignment is not compared)
        assert back.text() == r.text() and back.to_dot() == r.to_dot()
    with pytest.raises(ExplainError, match="not a placement report: missing or malformed 'calls'"):
        Report.from_dict({"target": "c"})


# ---- DOT ----------------------------------------------------------------------------------------------

_NODE = re.compile(r'^  (?:  )?(\w+) \[(.*)\];$')
_EDGE = re.compile(r'^  (\w+) -> (\w+)(?: \[(.*)\])?;$')


def _parse_dot(text):
    """A structure check of our DOT: statements, balanced braces, nodes with their attributes, edges."""
    lines = text.splitlines()
    assert lines[0] == "digraph placement {" and lines[-1] == "}"
    assert text.count("{") == text.count("}")
    nodes, edges = {}, []
    for line in lines[1:-1]:
        if m := _EDGE.match(line):
            edges.append((m.group(1), m.group(2), m.group(3) or ""))
        elif m := _NODE.match(line):
            attrs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            if m.group(1) not in ("node", "edge"):
                nodes[m.group(1)] = attrs
        else:
            assert re.match(r'^\s+(rankdir=|label=|subgraph cluster_(legend|region_\d+) \{|\}$)', line), line
    for a, b, _ in edges:
        assert a in nodes and b in nodes, (a, b)
    return nodes, edges


def test_dot_lists_every_call_coloured_by_piece(reports):
    r = reports["pinned"]
    nodes, edges = _parse_dot(r.to_dot())
    legend = {n: a for n, a in nodes.items() if n.startswith("legend_")}
    colours = {a["label"].split(":")[0]: a["fillcolor"] for a in legend.values()}
    assert set(colours) == set(r.pieces) and len(set(colours.values())) == 2
    for c in r.calls:
        assert nodes[c.id]["label"].split("\\n") == [c.label, c.op,
                                                     f"{c.piece}: {fmt_seconds(c.costs[c.piece]['seconds'])}"]
        assert nodes[c.id]["fillcolor"] == colours[c.piece]
        for i in c.inputs:
            src = "in_0" if i == "%input" else i
            assert any(a == src and b == c.id for a, b, _ in edges)
    assert nodes["in_0"]["label"] == "input: Tensor[(1, 1, 49, 10), float32]"
    assert (r.calls[-1].id, "out_0", "") in edges
    crossing = [(a, b, attrs) for a, b, attrs in edges if "dashed" in attrs]
    assert [(a, b) for a, b, _ in crossing] == [("in_0", "n0"),  # the input, from the host piece (the M0)
                                               (r.transfers[0]["value"], r.call("/pool/GlobalAveragePool").id)]
    t = r.edge_copies[0]
    assert crossing[0][2] == f'style=dashed, color="#7f7f7f", label="copy 1960 B, {fmt_seconds(t["seconds"])}"'
    assert crossing[1][2] == 'style=dashed, color="#d62728", label="32000 B, 330 us"'
    n_edges = sum(len(c.inputs) for c in r.calls) + 1
    assert len(edges) == n_edges


def test_dot_escapes_quotes_and_backslashes():
    x = relay.var("x", (1, 4))
    y = relay.call("nn.relu", x, meta={"name": 'a"b\\c'})
    f = Function((x,), y)
    infer_expr(f)
    r = explain(f, "cpu: c")
    assert 'label="a\\"b\\\\c\\nnn.relu\\ncpu: ' in r.to_dot()
    nodes, _ = _parse_dot(r.to_dot())
    assert nodes["n0"]["label"].startswith('a\\"b\\\\c')


@pytest.mark.skipif(not HAS_DOT, reason="graphviz's 'dot' is not installed")
def test_graphviz_parses_the_dot_and_renders_svg(reports, tmp_path):
    r = reports["pinned"]
    plain = subprocess.run(["dot", "-Tplain"], input=r.to_dot(), capture_output=True, text=True, check=True).stdout
    drawn = {line.split()[1] for line in plain.splitlines() if line.startswith("node ")}
    assert {c.id for c in r.calls} <= drawn and {"in_0", "out_0", "legend_0", "legend_1"} <= drawn
    out = r.render(tmp_path / "placement.svg")
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    for c in r.calls:
        assert f"<title>{c.id}</title>" in svg
    png = r.render(tmp_path / "placement.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_render_dot_file_and_errors(reports, tmp_path, monkeypatch):
    r = reports["latency"]
    p = r.render(tmp_path / "p.dot")
    assert p.read_text() == r.to_dot()
    with pytest.raises(ExplainError) as e:
        r.render(tmp_path / "p.jpeg")
    assert str(e.value) == f"cannot draw to '{tmp_path / 'p.jpeg'}': expected a .svg, .png, .pdf or .dot file"
    monkeypatch.setattr(explain_mod.shutil, "which", lambda name: None)
    with pytest.raises(ExplainError) as e:
        r.render(tmp_path / "p.svg")
    assert str(e.value) == NO_DOT == ("drawing needs graphviz's 'dot' program (apt install graphviz); "
                                      "write a .dot file instead")
    assert not (tmp_path / "p.svg").exists()


# ---- hand-made functions: exact numbers, incapable pieces -------------------------------------------------


class FixedCosts(CostModel):
    """Hand-set seconds per (call name, piece); energy = 2 x seconds."""

    def __init__(self, table, **kw):
        super().__init__(**kw)
        self.table = table

    def call_cost(self, call, piece):
        s = self.table[call.meta["name"], piece.name]
        return Estimate(s, 2 * s, "database", "test table")


def _chain(n=3):
    x = relay.var("x", (1, 256))
    y = x
    for k in range(n):
        y = relay.call("nn.relu", y, meta={"name": f"r{k}"})
    f = Function((x,), y)
    infer_expr(f)
    return f


def test_hand_made_chain_exact_numbers():
    f = _chain()
    table = {("r0", "a"): 1.0, ("r0", "b"): 9.0, ("r1", "a"): 2.0, ("r1", "b"): 0.5, ("r2", "a"): 1.0,
             ("r2", "b"): 9.0}
    cm = FixedCosts(table, link_bytes_per_s=1024.0, switch_s=0.0)  # 1 KiB relu output: 1 s per copy
    two = "a: c; b: c; transfer: -shared-memory=no"  # two host pieces that copy data between them
    r = explain(f, two, cost_model=cm)
    assert [c.piece for c in r.calls] == ["a", "a", "a"]
    assert r.calls[1].reason == "transfers ('b' is cheaper alone, moving data costs more)"
    assert r.totals["value"] == 4.0 and r.totals["joules"] == 8.0 and r.transfers == []
    cap = r.memory["a"]["capacity"]  # the host's RAM
    assert r.single_piece == {"a": {"seconds": 4.0, "joules": 8.0, "value": 4.0, "weight_bytes": 0,
                                    "capacity": cap, "fits": True},
                              "b": {"seconds": 18.5, "joules": 37.0, "value": 18.5, "weight_bytes": 0,
                                    "capacity": cap, "fits": True}}
    table[("r1", "b")] = 0.1  # and copies of 0.5 s: moving there and back pays (1 + 0.1 + 1 + 2 x 0.5 < 4)
    r = explain(f, two, cost_model=FixedCosts(table, link_bytes_per_s=2048.0, switch_s=0.0))
    assert [c.piece for c in r.calls] == ["a", "b", "a"]
    assert [c.reason for c in r.calls] == ["cheapest"] * 3
    # energy of a copy: its time at both pieces' power
    from plait.schedule.machine import fact

    copy_j = 0.5 * 2 * fact(CompositeTarget("a: c").pieces[0].target, "power_mw", 1000.0) * 1e-3
    assert r.transfers == [
        {"value": "n0", "from": "a", "to": "b", "bytes": 1024, "seconds": 0.5, "joules": copy_j},
        {"value": "n1", "from": "b", "to": "a", "bytes": 1024, "seconds": 0.5, "joules": copy_j}]
    assert r.totals["seconds"] == pytest.approx(3.1) and r.totals["transfer_seconds"] == 1.0
    assert r.totals["joules"] == pytest.approx(2 * 2.1 + 2 * copy_j)
    assert r.calls[1].costs["b"] == {"seconds": 0.1, "joules": 0.2, "value": 0.1, "source": "database",
                                     "detail": "test table"}
    text = r.text()
    j = fmt_joules(copy_j)
    assert f"  r0 (n0): a -> b, 1024 bytes, 500 ms, {j}" in text and f"  r1 (n1): b -> a, 1024 bytes, 500 ms, {j}" in text
    assert (f"chosen: 3.1 s (calls 2.1 s + transfers 1 s), {fmt_joules(4.2 + 2 * copy_j)}; latency 3.1 s") in text
    nodes, edges = _parse_dot(r.to_dot())
    assert [(a, b) for a, b, attrs in edges if "dashed" in attrs] == [("n0", "n1"), ("n1", "n2")]
    # pieces sharing memory (the same device): no copies, however the cost model prices a link
    r = explain(f, "a: c; b: c", cost_model=FixedCosts(table, link_bytes_per_s=2048.0, switch_s=0.0))
    assert [c.piece for c in r.calls] == ["a", "b", "a"]
    assert r.transfers == [] and r.totals["seconds"] == pytest.approx(2.1)
    assert r.totals["value"] == pytest.approx(r.assignment.total)
    _, edges = _parse_dot(r.to_dot())
    assert [attrs for a, b, attrs in edges if "dashed" in attrs] == ['style=dashed, color="#d62728", '
                                                                    'label="shared memory"'] * 2


def test_incapable_piece_is_reported_with_its_reason():
    register_test_backend("test_explain_npu", can_host=False, supports=lambda call, target: op_is("nn.dense")(call))
    x = relay.var("x", (1, 8))
    import numpy as np

    d = relay.call("nn.dense", x, relay.const(np.ones((4, 8), np.float32)), meta={"name": "fc"})
    y = relay.call("nn.relu", d, meta={"name": "act"})
    z = relay.call("nn.softmax", y, meta={"name": "sm"})
    f = Function((x,), z)
    infer_expr(f)
    r = explain(f, "cpu: c; npu: test_explain_npu", place="fc=npu")
    why = "the 'supports' hook of target kind 'test_explain_npu' says no"
    assert [(c.name, c.piece, c.reason) for c in r.calls] == [
        ("fc", "npu", "pinned by --place rule 'fc=npu'"), ("act", "cpu", "only capable"),
        ("sm", "cpu", "only capable")]
    assert r.calls[1].costs["npu"] == {"cannot": why}
    assert r.calls[0].weight_bytes == 4 * 8 * 4
    assert r.single_piece["npu"] == {"cannot": ["n1", "n2"], "message": "cannot run 2 calls: nn.relu, nn.softmax"}
    assert "cpu" in r.single_piece and "cannot" not in r.single_piece["cpu"]
    text = r.text()
    assert f"[1] {why}" in text and "cannot [1]" in text
    assert "  npu  cannot run 2 calls: nn.relu, nn.softmax" in text


def test_claimed_region_is_reported_and_drawn():
    """A kind whose pattern claims dense (+ relu): the region's calls go together, its cost on the output call."""
    import numpy as np

    from plait.placement.pattern import is_constant, is_op, wildcard
    from plait.placement.regions import PatternRegion

    register_test_backend("test_explain_acc", can_host=False, supports=lambda call, target: op_is("nn.dense")(call), patterns=lambda target: [
        ("dense_relu", is_op("nn.dense")(wildcard(), is_constant()).optional(lambda x: is_op("nn.relu")(x)))], cost=lambda x, target: 1e-9 if isinstance(x, PatternRegion) else None)
    x = relay.var("x", (1, 8))
    d = relay.call("nn.dense", x, relay.const(np.ones((4, 8), np.float32)), meta={"name": "fc"})
    y = relay.call("nn.relu", d, meta={"name": "act"})
    z = relay.call("nn.softmax", y, meta={"name": "sm"})
    f = Function((x,), z)
    infer_expr(f)
    r = explain(f, "cpu: c; acc: test_explain_acc")
    assert [(c.name, c.piece, c.region, c.reason) for c in r.calls] == [
        ("fc", "acc", "dense_relu", "region 'dense_relu': cheapest"),
        ("act", "acc", "dense_relu", "region 'dense_relu': cheapest"),
        ("sm", "cpu", None, "only capable")]
    assert r.regions == [{"name": "dense_relu", "piece": "acc", "calls": ["n0", "n1"]}]
    # the region's cost (the hook's 1 ns) is charged to its output call; the others cost nothing there
    assert (r.calls[0].costs["acc"]["seconds"], r.calls[0].costs["acc"]["source"]) == (0.0, "region")
    assert (r.calls[1].costs["acc"]["seconds"], r.calls[1].costs["acc"]["source"]) == (1e-9, "hook")
    region_cpu = r.calls[0].costs["cpu"]["value"] + r.calls[1].costs["cpu"]["value"]
    assert 1e-9 < region_cpu  # cheaper as a region on acc than call by call on cpu
    assert r.totals["seconds"] == pytest.approx(1e-9 + r.calls[2].costs["cpu"]["seconds"])
    assert r.single_piece["acc"] == {"cannot": ["n2"], "message": "cannot run 1 call: nn.softmax"}
    assert "region 'dense_relu' on acc: fc (n0), act (n1)" in r.text()
    dot = r.to_dot()
    nodes, edges = _parse_dot(dot)
    assert {"n0", "n1", "n2"} <= set(nodes)
    cluster = dot[dot.index("subgraph cluster_region_0 {"):]
    cluster = cluster[:cluster.index("  }")]
    assert "label=\"region 'dense_relu' on acc\"" in cluster and "n0 [" in cluster and "n1 [" in cluster
    assert "n2 [" not in cluster
    assert Report.from_dict(json.loads(r.to_json())) == r


def test_number_formatting():
    assert [fmt_seconds(x) for x in (2770.4, 999.96, 12.345, 0.0123, 1e-7, 3e-13, 0.0)] == \
        ["2770 s", "1000 s", "12.3 s", "12.3 ms", "100 ns", "0.3 ps", "0 s"]
    assert [fmt_joules(x) for x in (36.6, 4.31e-6)] == ["36.6 J", "4.31 uJ"]


# ---- bad input -------------------------------------------------------------------------------------------


def test_bad_arguments_have_exact_messages(mod):
    f = _chain(1)
    with pytest.raises(PlacementError) as e:
        explain(f, SEED, "fast")
    assert str(e.value) == "unknown objective 'fast': expected latency, energy or weighted"
    for w in (1.5, -0.1, float("nan"), "x", True):
        with pytest.raises(PlacementError) as e:
            explain(f, SEED, "weighted", weight=w)
        assert str(e.value) == ("weight must be between 0 and 1 (weighted = weight x us + (1 - weight) x mJ), "
                                f"got {w!r}")
    for rules in ("Conv=inference_cp", "Conv", ""):
        with pytest.raises(PlacementError) as e:
            explain(f, SEED, place=rules)
        with pytest.raises(PlacementError) as e2:
            parse_place(rules, CompositeTarget(SEED))
        assert str(e.value) == str(e2.value)
    with pytest.raises(PlacementError) as e:
        explain(f, SEED, place=parse_place("Conv=npu"))
    assert str(e.value) == ("--place: rule 'Conv=npu': unknown piece 'npu' "
                            "(pieces: low_power_cpu, inference_cpu)")
    with pytest.raises(PlacementError, match="explain expects an IRModule or a Function, got str"):
        explain("model.onnx", SEED)
    from plait.relay.module import IRModule

    with pytest.raises(PlacementError, match="^explain: the module has no 'main' function$"):
        explain(IRModule({"other": f}), SEED)


def test_report_describes_what_build_places(mod, reports):
    """plait.build places the same calls the same way, and copies exactly the values the report lists."""
    import plait

    # the head pinned on the M0 receives the last block's 64x25x5 floats: more than its 16 KiB of RAM
    with pytest.raises(PlaitError) as e:
        plait.build(mod, SEED, place=PINS)
    assert str(e.value) == ("piece 'low_power_cpu' (c -mcpu=cortex-m0): the activations and workspaces in pool "
                            "'workspace_low_power_cpu' need "
                            "32,256 bytes of RAM, more than its 16,384 bytes")
    roomy = "low_power_cpu: c -mcpu=cortex-m0 -ram-kb=64; inference_cpu: c -mcpu=cortex-m7f"
    r = explain(mod, roomy, "latency", place=PINS)
    assert r.to_dict() == dict(reports["pinned"].to_dict(), target=str(CompositeTarget(roomy)),
                               pieces=r.pieces, facts=r.facts)  # RAM does not change the placement
    art = plait.build(mod, roomy, place=PINS)
    a = art.placement
    assert [(p.call.meta.get("name"), p.call.op_name, p.piece, p.reason) for p in a] == \
        [(c.name, c.op, c.piece, c.reason) for c in r.calls]
    assert a.total == pytest.approx(r.totals["value"])
    copies = [n for n in art.graph["nodes"] if n.get("op") == "copy"]
    # the model's input lives on the host piece (the M0, first) and is copied to the M7F: not charged
    link = CompositeTarget(SEED).transfer
    assert [{k: v for k, v in t.items() if k != "joules"} for t in r.edge_copies] == [
        {"value": "%input", "from": "low_power_cpu", "to": "inference_cpu", "bytes": 490 * 4,
         "seconds": pytest.approx(490 * 4 / link.bandwidth + link.switch)}]
    assert sorted((n["src"], n["dst"]) for n in copies) == \
        sorted((t["from"], t["to"]) for t in r.transfers + r.edge_copies)
    assert "copies of the inputs and results to and from the host piece (not in the totals):\n" \
           "  %input: low_power_cpu -> inference_cpu, 1960 bytes, " in r.text()
