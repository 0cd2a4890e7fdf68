"""docs/glossary.md: every candidate term the notebooks' prose uses has an entry.

CANDIDATES lists the words the suite gives a precise meaning, each with the pattern that finds it
in a markdown cell (plurals and variants included) and the glossary entry that must explain it.
A term in the list that a notebook uses and the glossary lacks fails the test; so does an entry
that is empty or a link to an entry that does not exist.

In each notebook, the first use of each term in prose (headings, code and link addresses are not
prose) is bold and links to its entry: ``[**round trip**](../docs/glossary.md#round-trip)``.

``python tests/test_glossary.py`` prints where each term is first used (notebook, cell, whether
it is already bold and linked), the list the linking pass works from.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
GLOSSARY = REPO / "docs" / "glossary.md"
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# glossary entry -> pattern that finds the term in notebook prose (case-sensitive: (?i:...) where
# either case is meant, so that "Functions" (Redis's) and "BUSY" (the error) are told apart)
CANDIDATES = {
    "Atomic": r"(?i:\batomic(ally|ity)?\b)",
    "Backend": r"(?i:\bbackends?\b)",
    "Check-then-act": r"(?i:\bcheck[- ]then[- ](act|write)\b)|\bTOCTOU\b",
    "Compare-and-set": r"(?i:\bcompare[- ]and[- ](set|swap)\b)",
    "Digest": r"(?i:\bdigests?\b)",
    "Equivalence class": r"(?i:\bequivalence class(es)?\b)",
    "Exploration": r"(?i:\bexplor(ation|ations|er|e|es|ed)\b)",
    "Failover": r"(?i:\bfail ?overs?\b)",
    "Fencing token": r"(?i:\bfenc(e|es|ing)\b)",
    "Function": r"\bFunctions?\b",
    "Hash slot": r"(?i:\bhash slots?\b)|\bCROSSSLOT\b",
    "History": r"(?i:\bhistor(y|ies)\b)",
    "Idempotent": r"(?i:\bidempoten(t|ce|cy)\b)",
    "Interleaving": r"(?i:\binterleav(ing|ings|ed)\b)",
    "Invariant": r"(?i:\binvariants?\b)",
    "Lease": r"(?i:\bleases?\b)",
    "Linearizable": r"(?i:\blineari[sz]ab(le|ility)\b)",
    "Lock token": r"(?i:\b(lock|owner) tokens?\b)",
    "Lost update": r"(?i:\blost updates?\b|\bloses? (an |one |the )?updates?\b)",
    "Lua script": r"\bLua scripts?\b|\bEVALSHA\b",
    "Mutual exclusion": r"(?i:\bmutual(ly)? exclusi(on|ve)\b)",
    "Optimistic transaction": r"(?i:\boptimistic\b)|\bWATCH\b",
    "Pipeline": r"(?i:\bpipelin(e|es|ed|ing)\b)",
    "Race condition": r"(?i:\brace conditions?\b)",
    "Rate limiter": r"(?i:\brate[- ]limit(er|ers|ing)?\b|\bfixed[- ]window\b)",
    "Read-modify-write": r"(?i:\bread[- ]modify[- ]write\b)",
    "Replica": r"(?i:\breplicas?\b|\breplication\b)",
    "Round trip": r"(?i:\bround[- ]trips?\b)|\bRTTs?\b",
    "Sandbox": r"(?i:\bsandbox(ed)?\b)",
    "Schedule": r"(?i:\bschedules?\b)",
    "Script runaway": r"(?i:\brunaway\b)|\bBUSY\b|\bSCRIPT KILL\b",
    "Sub-actor": r"(?i:\bsub-actors?\b)",
}
URL = re.compile(r"\]\([^)]*\)")
LINK = re.compile(r"\]\((?:\.\./)?(?:docs/)?glossary\.md#([a-z0-9-]+)\)")
# the form a first use takes in a notebook (notebooks/ is one level below docs/)
TERM_LINK = re.compile(r"\[\*\*([^\]*]+)\*\*\]\(\.\./docs/glossary\.md#([a-z0-9-]+)\)")
NOT_PROSE = re.compile(
    r"^```.*?^```|^#.*?$|``.+?``|`[^`\n]+`|\]\([^)]*\)|https?://\S+", re.M | re.S
)  # a bare URL is no prose either


@dataclass(frozen=True)
class FirstUse:
    """Where a glossary term first appears in the notebooks, in order."""

    term: str
    notebook: str
    cell: int
    text: str
    linked: bool


def entries(text: str) -> dict[str, str]:
    """Return the glossary's entries: heading -> definition text."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def anchor(heading: str) -> str:
    """Return the anchor of a heading, as GitHub and the site (MyST) make it."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")


def prose(path: Path) -> list[tuple[int, str]]:
    """Return (cell index, source) of each markdown cell of a notebook."""
    nb = nbformat.read(path, as_version=4)
    return [(i, c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def first_uses(notebooks: list[Path] = NOTEBOOKS) -> dict[str, FirstUse]:
    """Return, for each candidate term the notebooks use, its first use in notebook order."""
    found: dict[str, FirstUse] = {}
    for path in notebooks:
        for index, source in prose(path):
            text = URL.sub("]", source)  # a link's address is not prose
            for term, pattern in CANDIDATES.items():
                match = re.search(pattern, text)
                if term in found or match is None:
                    continue
                line = text[text.rfind("\n", 0, match.start()) + 1 :].split("\n")[0]
                linked = f"glossary.md#{anchor(term)}" in source
                found[term] = FirstUse(term, path.name, index, line.strip()[:90], linked)
    return found


def unlinked_first_uses(cells: list[str]) -> list[str]:
    """Return a line for each term whose first use in cells' prose is not a bold glossary link."""
    seen: set[str] = set()
    bad = []
    for number, source in enumerate(cells):
        text = NOT_PROSE.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), source)  # same offsets
        links = [(m.start(), m.end(), m.group(2)) for m in TERM_LINK.finditer(source)]
        for term, pattern in CANDIDATES.items():
            match = None if term in seen else re.search(pattern, text)
            if match is None:
                continue
            seen.add(term)
            if not any(
                start <= match.start() and match.end() <= end and target == anchor(term)
                for start, end, target in links
            ):
                line = source[source.rfind("\n", 0, match.start()) + 1 :].split("\n")[0]
                bad.append(f"{term!r} in markdown cell {number}: {line.strip()[:80]}")
    return bad


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_first_use_of_each_term_is_bold_and_links_to_its_entry(path: Path) -> None:
    bad = unlinked_first_uses([source for _, source in prose(path)])
    assert not bad, (
        f"{path.name}: a term's first use is not [**term**](../docs/glossary.md#entry):\n"
        + "\n".join(bad)
    )


def test_the_first_use_check_sees_what_it_must_refuse() -> None:
    linked = "A [**round trip**](../docs/glossary.md#round-trip) costs; so does a round trip."
    assert unlinked_first_uses([linked]) == []
    assert unlinked_first_uses(["# Round trips\n\n" + linked, "`RTT` and round trips"]) == []
    assert unlinked_first_uses(["Every round trip.", linked]) == [
        "'Round trip' in markdown cell 0: Every round trip."
    ]
    wrong = [
        "A **round trip** costs.",  # bold, no link
        "A [round trip](../docs/glossary.md#round-trip) costs.",  # link, not bold
        "A [**round trip**](../docs/glossary.md#schedule) costs.",  # another entry
        "A [**round trip**](glossary.md#round-trip) costs.",  # not from notebooks/
    ]
    for cell in wrong:
        assert unlinked_first_uses([cell]) == ["'Round trip' in markdown cell 0: " + cell], cell


def test_every_candidate_term_the_notebooks_use_has_an_entry() -> None:
    glossary = entries(GLOSSARY.read_text())
    missing = sorted(set(first_uses()) - set(glossary))
    assert not missing, f"docs/glossary.md lacks entries for terms the notebooks use: {missing}"


def test_candidates_are_found_and_entries_are_real() -> None:
    glossary = entries(GLOSSARY.read_text())
    used = first_uses()
    for term in ("Round trip", "Schedule", "Invariant", "Lease", "Fencing token"):
        assert term in used, f"{term!r} was not found in any notebook: is its pattern right?"
    for heading, definition in glossary.items():
        assert len(definition.split()) >= 12, f"glossary entry {heading!r} is too short"
    assert list(glossary) == sorted(glossary, key=str.lower), "entries are not alphabetical"


def test_every_link_to_the_glossary_names_an_entry() -> None:
    anchors = {anchor(h) for h in entries(GLOSSARY.read_text())}
    sources = [("docs/glossary.md", GLOSSARY.read_text())]
    sources += [(p.name, s) for p in NOTEBOOKS for _, s in prose(p)]
    broken = [(name, a) for name, text in sources for a in LINK.findall(text) if a not in anchors]
    assert not broken, f"links to glossary entries that do not exist: {broken}"


@pytest.mark.parametrize(
    "heading,expected", [("Round trip", "round-trip"), ("Check-then-act", "check-then-act")]
)
def test_anchor_matches_markdown_slugs(heading: str, expected: str) -> None:
    assert anchor(heading) == expected


if __name__ == "__main__":
    uses = first_uses()
    print(f"{'term':<24}{'first used in':<40}{'cell':>5}  linked  line")
    for use in sorted(uses.values(), key=lambda u: (u.notebook, u.cell)):
        mark = "yes" if use.linked else "no"
        print(f"{use.term:<24}{use.notebook:<40}{use.cell:>5}  {mark:<6}  {use.text}")
    unused = sorted(set(CANDIDATES) - set(uses))
    print(f"\n{len(uses)} of {len(CANDIDATES)} candidate terms used; not used: {unused or 'none'}")
    sys.exit(0)
