"""A QEMU TCG plugin counting executed instructions per address range, shipped as C source and built on use.

    so = plugin_library(cache_dir=None)      # gcc -shared -fPIC, once, into the compile cache
    qemu-system-arm ... -plugin <so>,in=ranges.txt,out=counts.txt

``ranges.txt`` holds one range a line, ``<lo> <hi>`` in hex (``lo`` inclusive, ``hi`` exclusive; a
Thumb function's address with bit 0 cleared). At exit the plugin writes ``counts.txt``: ``total <n>``
(every instruction executed), then one line per range ``<index> <instructions> <entries>``:
instructions executed inside the range and executions of its first instruction (a function's
calls, when nothing branches back to its first instruction), then ``marks <m>`` and m lines
``<index> <before>``: at every execution of a range's first instruction, the instructions executed
before it (so the difference of two marks counts everything in between, callees included).

The plugin uses QEMU's plugin API version 1 (QEMU 4.2+; Debian's qemu-system-arm exports it but
ships neither plugins nor ``qemu-plugin.h``). Its C source declares the few API functions and types
it uses itself, written from QEMU's documented API (docs/devel/tcg-plugins): no QEMU header is
copied (QEMU's is GPL-2.0-or-later, plait is Apache-2.0). Counting is exact: an inline "add 1" on
every translated instruction inside a range, an inline "add n" per translation block for the total.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from plait.errors import PlaitError

PLUGIN_C = r"""/* plait's instruction-counting QEMU TCG plugin (API version 1). Apache-2.0.
 * Declarations written from QEMU's documented plugin API; no QEMU header is used. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_info_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 = 0 };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS = 0 };

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb, enum qemu_plugin_op op, void *ptr,
                                              uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn, enum qemu_plugin_op op,
                                                void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static uint64_t total;
static size_t n_ranges;
static uint64_t *lo, *hi, *insns, *entries;
static char out_path[4096];
static uint64_t *marks; /* (range, total so far) at every execution of a range's first instruction */
static size_t n_marks, cap_marks;
static int marks_ok = 1;

static void on_entry(unsigned int vcpu, void *udata) {
  (void)vcpu;
  if (!marks_ok) return;
  if (n_marks == cap_marks) {
    uint64_t *m = realloc(marks, (cap_marks ? 4 * cap_marks : 1024) * sizeof *marks);
    if (!m) { marks_ok = 0; return; }
    marks = m; cap_marks = cap_marks ? 2 * cap_marks : 512;
  }
  /* the block's inline add has run: total counts this block already; the mark is the instructions
     executed before this one */
  uint64_t u = (uint64_t)(uintptr_t)udata;
  marks[2 * n_marks] = u & 0xffffffffu; marks[2 * n_marks + 1] = total - (u >> 32); n_marks++;
}

static long find(uint64_t a) { /* ranges sorted by lo, disjoint: binary search */
  size_t l = 0, r = n_ranges;
  while (l < r) {
    size_t m = (l + r) / 2;
    if (a < lo[m]) r = m; else if (a >= hi[m]) l = m + 1; else return (long)m;
  }
  return -1;
}

static void on_tb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  size_t n = qemu_plugin_tb_n_insns(tb);
  (void)id;
  qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total, n);
  for (size_t k = 0; k < n; k++) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, k);
    uint64_t a = qemu_plugin_insn_vaddr(insn);
    long r = find(a);
    if (r < 0) continue;
    qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &insns[r], 1);
    if (a == lo[r]) {
      qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &entries[r], 1);
      /* udata: the range, and the instructions of this block from here on (already in total) */
      qemu_plugin_register_vcpu_insn_exec_cb(insn, on_entry, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)((uint64_t)r | ((uint64_t)(n - k) << 32)));
    }
  }
}

static void on_exit_cb(qemu_plugin_id_t id, void *userdata) {
  (void)id; (void)userdata;
  FILE *f = fopen(out_path, "w");
  if (!f) { qemu_plugin_outs("plait insn plugin: cannot write the counts file\n"); return; }
  fprintf(f, "total %llu\n", (unsigned long long)total);
  for (size_t k = 0; k < n_ranges; k++)
    fprintf(f, "%zu %llu %llu\n", k, (unsigned long long)insns[k], (unsigned long long)entries[k]);
  fprintf(f, "marks %zu%s\n", n_marks, marks_ok ? "" : " (out of memory: incomplete)");
  for (size_t k = 0; k < n_marks; k++)
    fprintf(f, "%llu %llu\n", (unsigned long long)marks[2 * k], (unsigned long long)marks[2 * k + 1]);
  fclose(f);
}

__attribute__((visibility("default")))
int qemu_plugin_install(qemu_plugin_id_t id, const struct qemu_info_t *info, int argc, char **argv) {
  const char *in_path = 0;
  (void)info;
  for (int k = 0; k < argc; k++) {
    if (strncmp(argv[k], "in=", 3) == 0) in_path = argv[k] + 3;
    else if (strncmp(argv[k], "out=", 4) == 0) snprintf(out_path, sizeof out_path, "%s", argv[k] + 4);
  }
  if (!out_path[0]) { qemu_plugin_outs("plait insn plugin: give out=FILE\n"); return -1; }
  if (in_path) {
    FILE *f = fopen(in_path, "r");
    unsigned long long a, b;
    size_t cap = 0;
    if (!f) { qemu_plugin_outs("plait insn plugin: cannot read the ranges file\n"); return -1; }
    while (fscanf(f, "%llx %llx", &a, &b) == 2) {
      if (n_ranges == cap) {
        cap = cap ? 2 * cap : 64;
        lo = realloc(lo, cap * sizeof *lo); hi = realloc(hi, cap * sizeof *hi);
        if (!lo || !hi) { fclose(f); return -1; }
      }
      lo[n_ranges] = a; hi[n_ranges] = b; n_ranges++;
    }
    fclose(f);
  }
  insns = calloc(n_ranges + 1, sizeof *insns);
  entries = calloc(n_ranges + 1, sizeof *entries);
  if (!insns || !entries) return -1;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb);
  qemu_plugin_register_atexit_cb(id, on_exit_cb, 0);
  return 0;
}
"""


class InsnPluginError(PlaitError):
    """The instruction-counting plugin cannot be built or its counts cannot be read."""


def plugin_library(cache_dir: str | os.PathLike | None = None) -> Path:
    """The plugin's shared library in the compile cache (``cc.cache_dir``; default ``~/.cache/plait/cc``),
    built with ``gcc -shared -fPIC -O2`` on first use (named after the source's hash)."""
    from plait.runtime.cc_cache import requested_dir

    digest = hashlib.sha256(PLUGIN_C.encode()).hexdigest()[:16]
    d = requested_dir(cache_dir)
    so = d / f"qemu_insn_plugin_{digest}.so"
    if so.is_file():
        return so
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise InsnPluginError("building the QEMU instruction-counting plugin needs gcc (apt-get install -y gcc)")
    d.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="plait_plugin_", dir=d) as tmp:
        src = Path(tmp) / "insn.c"
        src.write_text(PLUGIN_C)
        tmp_so = Path(tmp) / "insn.so"
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", str(tmp_so), str(src)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise InsnPluginError(f"building the QEMU instruction-counting plugin failed:\n{r.stderr.strip()[-2000:]}")
        os.replace(tmp_so, so)  # atomic: a concurrent build writes the same bytes
    return so


def write_ranges(path: str | os.PathLike, ranges: list[tuple[int, int]]) -> None:
    """The plugin's ``in=`` file: ``ranges`` (``(lo, hi)``, sorted, disjoint)."""
    Path(path).write_text("".join(f"{lo:x} {hi:x}\n" for lo, hi in ranges))


@dataclass(frozen=True)
class Counts:
    """What the plugin counted: ``total`` instructions; per range ``(instructions inside, entries)``;
    ``marks``: ``(range, instructions executed before)`` at each entry, in execution order."""

    total: int
    ranges: list[tuple[int, int]]
    marks: list[tuple[int, int]]


def read_counts(path: str | os.PathLike, n: int) -> Counts:
    """The plugin's ``out=`` file for ``n`` ranges."""
    try:
        lines = Path(path).read_text().split("\n")
        total = int(lines[0].split()[1])
        rows = [tuple(int(v) for v in line.split()[1:3]) for line in lines[1:1 + n]]
        head = lines[1 + n].split()
        if head[0] != "marks" or len(head) != 2:
            raise ValueError(f"incomplete marks: {' '.join(head)}")
        marks = [tuple(int(v) for v in line.split()) for line in lines[2 + n:2 + n + int(head[1])]]
    except (OSError, IndexError, ValueError) as exc:
        raise InsnPluginError(f"the instruction-counting plugin wrote no readable counts ({path}): {exc}") from None
    return Counts(total, [(a, b) for a, b in rows], [(a, b) for a, b in marks])


__all__ = ["Counts", "PLUGIN_C", "InsnPluginError", "plugin_library", "read_counts", "write_ranges"]
