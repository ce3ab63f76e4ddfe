"""The tuner's winners in a kernel database, matched to the benchmark's plans (`run.py --db DB`):
for each problem the benchmark times, the key's selection (autotune/: op, variant, sizes, rows M)
and which of the benchmark's plans launches the winner's code objects, so the run can put the
tuner's choice beside the fastest plan it finds by timing every plan (its regret).

Plans are matched by content: the sha256 of each launch's code object against the objects the
winner's plan launches (the same compiler writes both: `mxfp6c precompile --shapes ... -o` for
the benchmark's candidates folder, `--db` for the database), and the partials P of a plan whose
family has them. Reads the database with Python's sqlite3, read-only; no torch.
"""

import hashlib
import json
import sqlite3

# Variant and size names of a key (ops/op_table.cpp) -> the benchmark problem's attribute.
ATTRIBUTES = {"layout": "layout", "S": "S", "H": "heads", "FMT": "fmt", "MODE": "mode", "D": "D", "C": "C"}


class Winner:
    def __init__(self, op, variant, target, sizes, rows, plan_id, plan, rule, toolchain):
        self.op, self.variant, self.target, self.sizes, self.rows = op, variant, target, sizes, rows
        self.plan_id, self.rule, self.toolchain = plan_id, rule, toolchain
        self.objects = frozenset(launch["object"] for launch in plan["launches"])
        self.partials = int(plan.get("partials", 0))

    @property
    def key(self):
        return f"{self.op}/{self.variant}/{self.target}/{self.sizes}/{self.rows}"

    def fits(self, problem):
        """The key is this problem's: its op is the problem's kernel, its M the problem's rows (or
        tokens, for ops keyed on tokens), and each variant and size the problem has agrees."""
        if self.op != problem.kernel or self.rows not in (problem.rows, problem.tokens):
            return False
        for item in filter(None, (self.variant + "," + self.sizes).split(",")):
            name, value = item.split("=", 1)
            attr = ATTRIBUTES.get(name)
            if attr and hasattr(problem, attr) and str(getattr(problem, attr)) != value:
                return False
        return True

    def launched_by(self, launch_shas, partials):
        """The plan with these launches' code objects and partials P (0: none) is this winner."""
        return frozenset(launch_shas) == self.objects and self.partials == partials


def load(db_path, target="sm_90"):
    """The current selection of every key of `target` in the database."""
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT f.op, f.variant, f.sizes, f.toolchain, s.rows, r.winner, r.rule, c.plan_json "
            "FROM selections s JOIN families f ON f.id = s.family_id JOIN runs r ON r.id = s.run_id "
            "JOIN candidates c ON c.family_id = s.family_id AND c.plan_id = r.winner WHERE f.target = ?",
            (target,)).fetchall()
    finally:
        con.close()
    return [Winner(op, variant, target, sizes, m, winner, json.loads(plan), rule, toolchain)
            for op, variant, sizes, toolchain, m, winner, rule, plan in rows]


_sha = {}


def file_sha256(path):
    path = str(path)
    if path not in _sha:
        with open(path, "rb") as f:
            _sha[path] = hashlib.sha256(f.read()).hexdigest()
    return _sha[path]


def winner_for(winners, problem):
    """The problem's key's winner; None when the database has no selection for it. Several keys
    fitting (a problem without the attribute that tells them apart) is an error."""
    fitting = [w for w in winners if w.fits(problem)]
    if len(fitting) > 1:
        raise ValueError(f"{problem.name}: {len(fitting)} tuned keys fit: " + ", ".join(w.key for w in fitting))
    return fitting[0] if fitting else None


def regret(best, tuned):
    """How much slower the tuner's plan measured than the fastest plan: 0.0 when it is the fastest."""
    return tuned["median_ms"] / best["median_ms"] - 1.0
