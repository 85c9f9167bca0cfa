"""Keep the Chinese notebooks (notebooks/zh/) in step with the English ones.

    .venv/bin/python tools/translation.py status              # what is stale, untranslated or broken
    .venv/bin/python tools/translation.py new 05_dynamic_depth.ipynb  # a zh copy to translate
    .venv/bin/python tools/translation.py stamp 05_dynamic_depth.ipynb 1a2b3c4d [...]
    .venv/bin/python tools/translation.py stamp 05_dynamic_depth.ipynb --all

Each cell of a Chinese notebook records, in its metadata, which English cell it
translates and a hash of that cell's source when it was translated::

    "translation": {"cell": "ec88bcd8", "sha256": "<first 16 hex digits>"}

When an English cell changes, its hash no longer matches: ``status`` lists the cell
as stale, and tests/test_translation.py fails naming it. Retranslate the cell, then
``stamp`` it (``--all`` stamps every cell: use it only right after translating a
whole notebook).

The structure must match the English: the same cells in the same order, each of the
same kind with the same tags, and code cells with the same code. Comments and the
text of string literals may be translated (printed messages, a title); everything
else in a code cell (names, calls, numbers) stays as it is. The Chinese notebook's
cell that imports dynagraph also calls ``dg.set_language("zh")``, so that exercise
verdicts and the stepper read in Chinese: that line is the one addition allowed.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EN = ROOT / "notebooks"
ZH = EN / "zh"
CJK = re.compile(r"[\u3400-\u9fff]")
SET_LANGUAGE = 'dg.set_language("zh")  # 练习的判定、步进器和图的说明都用中文\n'


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def digest(text: str) -> str:
    """The hash a translated cell records of its English cell's source."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _python(code: str) -> str:
    """A code cell as plain Python: IPython's magics and shell lines turned into calls."""
    from IPython.core.inputtransformer2 import TransformerManager
    return TransformerManager().transform_cell(code)


class _Shape(ast.NodeTransformer):
    """Blank out what a translation may change: string literals, ``dg.set_language(...)``."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("…") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:  # an f-string: its fields stay
        return ast.JoinedStr([self.visit(v) for v in node.values if isinstance(v, ast.FormattedValue)])

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == "set_language"):
            return None
        return self.generic_visit(node)


def code_shape(code: str) -> str:
    """What must be equal between a code cell and its translation (see the module docstring)."""
    try:
        tree = ast.parse(_python(code))
    except SyntaxError as e:
        return f"<syntax error: {e}>"
    return ast.dump(_Shape().visit(tree))


def _tags(cell: dict) -> list[str]:
    return sorted(cell.get("metadata", {}).get("tags", []))


def pairs(en: dict, zh: dict) -> list[tuple[dict, dict]]:
    return list(zip(en["cells"], zh["cells"], strict=False))


def problems(en: dict, zh: dict) -> list[str]:
    """Where the Chinese notebook's structure differs from the English one."""
    found = []
    if len(en["cells"]) != len(zh["cells"]):
        found.append(f"{len(zh['cells'])} cells, the English has {len(en['cells'])}")
    for k, (e, z) in enumerate(pairs(en, zh)):
        where = f"cell {k} ({e.get('id')})"
        record = z.get("metadata", {}).get("translation", {})
        if record.get("cell") != e.get("id"):
            found.append(f"{where}: records that it translates cell {record.get('cell')!r}")
        if e["cell_type"] != z["cell_type"]:
            found.append(f"{where}: a {z['cell_type']} cell, the English is {e['cell_type']}")
        elif _tags(e) != _tags(z):
            found.append(f"{where}: tags {_tags(z)}, the English has {_tags(e)}")
        elif e["cell_type"] == "code" and code_shape(source(e)) != code_shape(source(z)):
            found.append(f"{where}: its code differs from the English beyond comments and strings")
    return found


def stale(en: dict, zh: dict) -> list[str]:
    """Ids of the English cells changed since their translation was stamped."""
    return [e.get("id", "?") for e, z in pairs(en, zh)
            if z.get("metadata", {}).get("translation", {}).get("sha256") != digest(source(e))]


def untranslated(en: dict, zh: dict) -> list[str]:
    """Ids of cells with English prose and no Chinese: markdown, and code with comments."""
    found = []
    for e, z in pairs(en, zh):
        text = source(z)
        prose = text if z["cell_type"] == "markdown" else "\n".join(re.findall(r"#\s*([A-Za-z].*)", text))
        if re.search(r"[A-Za-z]{3,}\s+[a-z]{2,}\s+[a-z]{2,}", prose) and not CJK.search(prose):
            found.append(e.get("id", "?"))
    return found


def new(name: str) -> Path:
    """Write notebooks/zh/``name``: the English notebook, every cell stamped, no outputs."""
    en = load(EN / name)
    zh = copy.deepcopy(en)
    added = False
    for e, z in pairs(en, zh):
        z.setdefault("metadata", {})["translation"] = {"cell": e.get("id"), "sha256": digest(source(e))}
        if z["cell_type"] == "code":
            z["outputs"], z["execution_count"] = [], None
            lines = source(z).splitlines(keepends=True)
            bare = [line.rstrip("\n") for line in lines]
            if not added and "import dynagraph as dg" in bare:
                at = bare.index("import dynagraph as dg")
                lines[at] = "import dynagraph as dg\n"  # (the cell's last line has no newline)
                z["source"] = "".join(lines[:at + 1] + [SET_LANGUAGE] + lines[at + 1:]).rstrip("\n")
                added = True
    out = ZH / name
    if out.exists():
        raise SystemExit(f"{out.relative_to(ROOT)} exists: edit it, or delete it to start again")
    ZH.mkdir(exist_ok=True)
    save(zh, out)
    return out


def save(nb: dict, path: Path) -> None:
    for cell in nb["cells"]:
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    path.write_text(json.dumps(nb, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def stamp(name: str, ids: list[str], everything: bool = False) -> list[str]:
    """Record the English cells' current hashes in the translations of ``ids`` (or all)."""
    en, zh = load(EN / name), load(ZH / name)
    done = []
    for e, z in pairs(en, zh):
        if everything or e.get("id") in ids:
            z["metadata"]["translation"] = {"cell": e.get("id"), "sha256": digest(source(e))}
            done.append(e.get("id"))
    unknown = sorted(set(ids) - set(done))
    if unknown:
        raise SystemExit(f"no English cell with id {', '.join(unknown)} in {name}")
    save(zh, ZH / name)
    return done


def report() -> list[str]:
    """One line per English notebook: missing, broken, stale or untranslated cells."""
    lines = []
    for path in sorted(EN.glob("*.ipynb")):
        twin = ZH / path.name
        if not twin.exists():
            lines.append(f"{path.name}: no Chinese notebook (tools/translation.py new {path.name})")
            continue
        en, zh = load(path), load(twin)
        for problem in problems(en, zh):
            lines.append(f"{path.name}: {problem}")
        if old := stale(en, zh):
            lines.append(f"{path.name}: retranslate, then stamp: {' '.join(old)}")
        if todo := untranslated(en, zh):
            lines.append(f"{path.name}: English still in {len(todo)} cells: {' '.join(todo)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("status", help="list what is stale, untranslated or broken")
    p_new = sub.add_parser("new", help="make notebooks/zh/NAME from the English notebook")
    p_new.add_argument("name")
    p_stamp = sub.add_parser("stamp", help="record that cells are translated from the current English")
    p_stamp.add_argument("name")
    p_stamp.add_argument("ids", nargs="*")
    p_stamp.add_argument("--all", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "new":
        print(f"wrote {new(args.name).relative_to(ROOT)}")
    elif args.command == "stamp":
        print(f"stamped {len(stamp(args.name, args.ids, args.all))} cells")
    else:
        lines = report()
        print("\n".join(lines) or "every Chinese notebook is in step with the English")
        return 1 if lines else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
