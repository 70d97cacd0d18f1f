"""The constants of plait's float32 math routines (plait/backends/c/libm/): fitted and computed here.

    python bench/libm_fit.py            # print each polynomial's degree and its fitted error
    python bench/libm_fit.py --write    # regenerate plait/backends/c/libm/constants.py
    python bench/libm_fit.py --check    # exit 1 unless constants.py is what this script computes

Polynomials are minimax fits (Lawson's algorithm on a dense Chebyshev grid, relative error unless
noted, float64 arithmetic) whose coefficients are then rounded to float32. Constants (pi/2, ln 2, the bits of
2/pi, the tables 2^(j/32) and -ln(1/c)) come from Python's ``decimal`` at 90 digits; a constant used
as a float-float pair is split into ``hi`` (the float32 nearest, or one with a given number of
significant bits for Cody-Waite products) and ``lo`` (the float32 nearest to the rest). Everything is
deterministic: numpy's float64 ``expm1``/``log1p``/trig functions and ``math.erfc`` are within an ulp
of double precision, far below the float32 coefficients' rounding.
"""

from __future__ import annotations

import argparse
import decimal
import math
import sys
from decimal import Decimal as D
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent.parent / "plait" / "backends" / "c" / "libm" / "constants.py"
decimal.getcontext().prec = 90


# ---- exact constants ------------------------------------------------------------------------------

def _atan_inv(n: int) -> D:
    """atan(1/n) by its series."""
    x, x2, s, k, term = D(1) / n, D(1) / (n * n), D(0), 0, D(1) / n
    while term != 0 and abs(term) > D(10) ** -95:
        s += term / (2 * k + 1) * (-1 if k % 2 else 1)
        term *= x2
        k += 1
    return s


PI = 16 * _atan_inv(5) - 4 * _atan_inv(239)
LN2, LN10 = D(2).ln(), D(10).ln()


def _atan(x: D) -> D:
    """atan(x) for |x| <= 1 by the series of atan(x / (1 + sqrt(1 + x^2))) * 2 (converges fast)."""
    y = x / (1 + (1 + x * x).sqrt())
    y2, s, k, term = y * y, D(0), 0, y
    while abs(term) > D(10) ** -95:
        s += term / (2 * k + 1) * (-1 if k % 2 else 1)
        term *= y2
        k += 1
    return 2 * s


def f32(v: D | float) -> float:
    """The float32 nearest to ``v`` (a Decimal is rounded to float64 first: then to float32; the
    double rounding can only matter for a value within 2^-53 of a float32 midpoint, and split()
    keeps the rest exactly anyway)."""
    return float(np.float32(float(v)))


def bits_round(v: D, bits: int) -> float:
    """``v`` rounded to ``bits`` significant bits (a float32 for Cody-Waite: k * hi is exact)."""
    e = math.floor(math.log2(abs(float(v))))
    scale = D(2) ** (bits - 1 - e)
    return f32((v * scale).to_integral_value(rounding=decimal.ROUND_HALF_EVEN) / scale)


def split(v: D, bits: int | None = None) -> tuple[float, float]:
    """(hi, lo): hi = ``v`` in float32 (or to ``bits`` significant bits), lo = float32 of the rest."""
    hi = f32(v) if bits is None else bits_round(v, bits)
    return hi, f32(v - D(hi))


# ---- minimax fits ---------------------------------------------------------------------------------

def minimax(f, powers, a: float, b: float, w=None, n_grid: int = 8000, iters: int = 300,
            raw: bool = False) -> list[float]:
    """Coefficients of sum c_k x^powers[k] minimizing max |f - p| * w on [a, b] (a Chebyshev grid of
    ``n_grid`` points): Lawson's iteratively reweighted least squares, which converges to the minimax
    solution on the grid. ``w`` is the reciprocal of the whole function for a relative error (``f`` is
    often the function minus its leading terms), None for an absolute one. float32 values unless ``raw``."""
    grid = (a + b) / 2 + (b - a) / 2 * np.cos(np.linspace(np.pi, 0, n_grid))
    fg = f(grid)
    wg = np.ones_like(grid) if w is None else np.abs(w(grid))
    wg = np.where(np.isfinite(wg), wg, 0.0)
    V = np.stack([grid ** p for p in powers], 1)
    scale = np.max(np.abs(V), 0)
    V = V / scale
    u = np.full(n_grid, 1.0 / n_grid)
    best = (math.inf, None)
    for _ in range(iters):
        sq = np.sqrt(u) * wg
        c = np.linalg.lstsq(V * sq[:, None], fg * sq, rcond=None)[0]
        e = np.abs((fg - V @ c) * wg)
        if e.max() < best[0]:
            best = (float(e.max()), c / scale)
        u = u * e
        u /= u.sum()
    return [float(v) for v in best[1]] if raw else [f32(v) for v in best[1]]


def fit_rounded(f, powers, a: float, b: float, w=None, ff0: bool = False, **kw) -> list[float]:
    """:func:`minimax`, the coefficients rounded to float32 one at a time from the lowest power, each
    remaining one refitted with the rounded ones fixed (they absorb part of the rounding error). With
    ``ff0`` the constant term is kept as (hi, lo), both float32."""
    if ff0:
        return _ff0(f, powers, a, b, w, **kw)
    done: list[float] = []
    for k in range(len(powers)):
        fixed = list(done)

        def rest(x, fixed=fixed):
            return f(x) - sum(c * x ** p for c, p in zip(fixed, powers))

        done.append(minimax(rest, powers[k:], a, b, w, **kw)[0])
    return done


def _ff0(f, powers, a: float, b: float, w=None, **kw) -> list[float]:
    """A fit whose constant term is a float-float pair: (hi, lo, c1, c2, ...)."""
    c0 = minimax(f, powers, a, b, w, raw=True, **kw)[0]
    hi, lo = split(D(c0))
    done = [hi + lo]
    for k in range(1, len(powers)):
        fixed = list(done)

        def rest(x, fixed=fixed):
            return f(x) - sum(c * x ** p for c, p in zip(fixed, powers))

        done.append(minimax(rest, powers[k:], a, b, w, **kw)[0])
    return [hi, lo, *done[1:]]


def fit_error(f, powers, coeffs, a: float, b: float, w=None) -> float:
    """log2 of the max weighted error of the float32 coefficients (float64 evaluation) on [a, b]."""
    x = np.linspace(a, b, 100001)
    y = sum(c * x ** p for c, p in zip(coeffs, powers))
    with np.errstate(divide="ignore", invalid="ignore"):
        e = (f(x) - y) * (1 if w is None else np.abs(w(x)))
    e = e[np.isfinite(e)]
    return float(np.log2(np.max(np.abs(e))))


_erfc = np.vectorize(math.erfc)
_erf = np.vectorize(math.erf)


def _erfc_g(t):
    """G(t) = x erfc(x) e^(x^2) at x = 1/t (erfc(x) = e^(-x^2) G(1/x) / x)."""
    x = 1 / t
    return _erfc(x) * np.exp(x * x) * x


# ---- everything -----------------------------------------------------------------------------------

def compute() -> tuple[dict[str, tuple[float, ...]], list[str]]:
    """(constants: name -> float32 values, report lines)."""
    K: dict[str, tuple[float, ...]] = {}
    rep: list[str] = []

    def poly(name, f, powers, a, b, whole=None, ff0=False, **kw):
        """Fit ``f`` (the function minus the terms the C adds itself); the error relative to ``whole``
        (the function), absolute without it; ``ff0``: the constant term as a float-float pair (two
        entries)."""
        w = None if whole is None else (lambda x: 1 / whole(x))
        c = fit_rounded(f, powers, a, b, w, ff0, **kw)
        K[name] = tuple(c)
        if ff0:
            c = [c[0] + c[1], *c[2:]]
        rep.append(f"{name:12s} x^{powers[0]}..x^{powers[-1]} on [{a:.6g}, {b:.6g}]: "
                   f"error 2^{fit_error(f, powers, c, a, b, w):.1f}{'' if w else ' (absolute)'}")

    # exp: x = k ln2/32 + r, e^x = 2^(k>>5) 2^((k&31)/32) (1 + r + r^2 Q(r))
    c = LN2 / 32
    K["exp.inv_c"] = (f32(1 / c),)
    K["ln2"] = split(LN2)
    hi = bits_round(c, 11)
    mid = bits_round(c - D(hi), 11)
    K["exp.c"] = (hi, mid, f32(c - D(hi) - D(mid)))
    K["exp.tab"] = tuple(v for j in range(32) for v in split((D(j) / 32 * LN2).exp()))
    rr = float(c) / 2 * 1.002
    poly("exp.q", lambda r: np.expm1(r) - r, [2, 3, 4], -rr, rr, )
    # expm1 near 0: x + x^2 P(x)
    poly("expm1.p", lambda x: np.expm1(x) - x, [2, 3, 4, 5, 6, 7], -0.35, 0.35, np.expm1, n_grid=6000)

    # log: x = 2^e m, m in [0.75, 1.5), table index j = top 5 mantissa bits, r = m ic_j - 1 exactly
    ics, tabs, rmin, rmax = [], [], 0.0, 0.0
    for j in range(32):
        lo_m, hi_m = ((D(32 + j) / 32, D(33 + j) / 32) if j < 16 else (D(32 + j) / 64, D(33 + j) / 64))
        if j in (0, 31):
            ic = 1.0
        else:
            ic = bits_round(1 / ((lo_m + hi_m) / 2), 12)
        ics.append(ic)
        tabs += list(split(-D(ic).ln())) if ic != 1.0 else [0.0, 0.0]
        rmin = min(rmin, float(lo_m * D(ic) - 1))
        rmax = max(rmax, float(hi_m * D(ic) - 1))
    K["log.ic"] = tuple(ics)
    K["log.tab"] = tuple(tabs)
    K["log.ln2"] = split(LN2, 16)
    ra, rb = rmin * 1.001, rmax * 1.001
    poly("log.q", lambda r: np.log1p(r) - r, [2, 3, 4, 5], ra, rb, np.log1p)
    poly("log.qff", lambda r: np.log1p(r) - r + r * r / 2, [3, 4, 5, 6, 7], ra, rb, np.log1p)
    K["log.inv_ln2"] = split(1 / LN2)
    K["log.inv_ln10"] = split(1 / LN10)
    K["log.lg2"] = split(LN2 / LN10, 16)

    # trig: reduction by the bits of 2/pi (integers), r in [-pi/4, pi/4] as a float-float
    two_over_pi = int((2 / PI) * (D(2) ** 224))
    K["trig.bits"] = tuple([0] + [(two_over_pi >> (32 * (6 - i))) & 0xFFFFFFFF for i in range(7)])
    K["trig.pio2"] = split(PI / 2)
    q4 = float(PI / 4) * 1.0005
    poly("sin.s", lambda r: np.sin(r) - r, [3, 5, 7, 9], 1e-4, q4, np.sin)
    poly("cos.c", lambda r: np.cos(r) - 1 + r * r / 2, [4, 6, 8, 10], 0.0, q4, )

    # inverse trig
    K["pi"] = split(PI)
    K["pio2"] = split(PI / 2)
    K["atan.half"] = split(_atan(D(1) / 2))
    K["atan.one"] = split(PI / 4)
    K["atan.3pio4"] = (f32(3 * PI / 4),)
    K["atan.pio4"] = (f32(PI / 4),)
    poly("asin.a", lambda x: np.arcsin(x) - x, [3, 5, 7, 9, 11, 13], 1e-4, 0.5, np.arcsin)
    poly("atan.a", lambda x: np.arctan(x) - x, [3, 5, 7, 9, 11, 13], 1e-4, 7 / 16, np.arctan)

    # hyperbolic
    poly("sinh.s", lambda x: np.sinh(x) - x, [3, 5, 7, 9, 11], 1e-4, 1.0, np.sinh)
    poly("tanh.t", lambda x: np.tanh(x) - x, [3, 5, 7, 9, 11, 13], 1e-4, 0.55, np.tanh)

    # erf on [0, 1]: x + x P(x^2); erfc(x) = e^(-x^2) t G(t), t = 1/x, on three intervals of t
    poly("erf.p", lambda x: _erf(x) - x, [1, 3, 5, 7, 9, 11, 13, 15], 1e-4, 1.0, _erf, n_grid=4000)
    for name, (ta, tb), deg in (("erfc.g0", (1.0, 2.0), 9), ("erfc.g1", (0.5, 1.0), 8),  # x in [0.5, 1), [1, 2)
                                ("erfc.g2", (1 / 10.1, 0.5), 9)):  # x in [2, 10.1]
        m = (ta + tb) / 2
        K[name + "_mid"] = (f32(m),)
        m = K[name + "_mid"][0]
        g = lambda s, m=m: _erfc_g(s + m)
        poly(name, g, list(range(deg + 1)), ta - m, tb - m, g, ff0=True, n_grid=3000)

    # cbrt: y0 = P(m) on [1, 2), then a Newton step and a float-float correction
    poly("cbrt.p", np.cbrt, [0, 1, 2, 3], 1.0, 2.0, np.cbrt)
    K["cbrt.r"] = (1.0, f32(D(2) ** (D(1) / 3)), f32(D(4) ** (D(1) / 3)))
    return K, rep


def _hex(v: float) -> str:
    """A float32 value as a short C99 hexadecimal literal (``0x1.8p-1``; ``0x0p+0`` for zero)."""
    text = float(v).hex()
    if "p" not in text:
        return text
    mant, exp = text.split("p")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def render(K: dict[str, tuple[float, ...]]) -> str:
    lines = ['"""The constants of plait\'s float32 math routines. Generated by bench/libm_fit.py --write: do not edit.',
             "",
             "Each entry is a tuple of float32 values as C99 hexadecimal literals (integers for ``trig.bits``).",
             '"""', "", "CONSTANTS: dict[str, tuple[str, ...]] = {"]
    for name in sorted(K):
        vals = [f"0x{v:08x}" if name == "trig.bits" else _hex(v) for v in K[name]]
        body = ", ".join(f'"{v}"' for v in vals)
        lines.append(f'    "{name}": ({body},),')
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="regenerate plait/backends/c/libm/constants.py")
    ap.add_argument("--check", action="store_true", help="fail unless constants.py matches")
    args = ap.parse_args(argv)
    K, rep = compute()
    text = render(K)
    print("\n".join(rep))
    if args.write:
        OUT.write_text(text)
        print(f"wrote {OUT}")
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("constants.py is up to date" if same else "constants.py differs from this script's output")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
