"""Linearise clause records into marked text, for any lexicon and either word order.

A document's ``semantics`` is a list of clause records::

    {"sep": " ", "pre": "then", "pred": "gave", "subj": REF, "args": [REF, REF], "adv": "gently",
     "mood": "question" | "answer" (optional), "focus": 1 (with mood), "speaker": "e1" (dialogues)}

``pred`` names a frame (:data:`FRAMES`: the verb's id and the markers of its arguments); a REF is
``{"id": "e3", "form": "name" | "desc" | "pron" | "new" | "repeat"}`` (a ``new`` ref also carries
the entity's definition: kind, style, noun, adj, name, pron, qty), ``{"words": [...]}`` for a
bare lexical argument, ``{"items": [REF, ...]}`` for a coordination, or ``{"form": "I" | "you"}``.
Every word is a lexicon id; the English lexicon is the identity, so ``Renderer()`` reproduces a
document's text exactly and ``Renderer(world.invented_lexicon(), "SOV")`` translates it.

Marked text is the text with ``|`` before every concept unit. A unit is a phrase: an opener, a
noun phrase (with its name), a verb, a prepositional phrase (marker + noun phrase), an item of a
list; punctuation belongs to the unit it follows and the whitespace before a unit belongs to that
unit (so a unit starts with a space or newline, except the document's first).
"""
from __future__ import annotations

MARK = "|"
FRAMES = {  # pred -> markers of its arguments; the verb's id is the pred itself
    # stories
    "lived": ("in",), "walked": ("to",), "ran": ("to",), "rode": ("to",), "slept": (), "waited": (),
    "laughed": (), "felt": ("",), "met": ("",), "greeted": ("",), "found": ("",), "made": ("",),
    "bought": ("",), "saw": ("",), "gave": ("", "to"), "showed": ("", "to"), "lost": ("",),
    "carried": ("", "to"), "was": ("in",), "visited": ("",), "sold": ("", "to"), "thanked": ("",),
    "helped": ("",), "fixed": ("",), "painted": ("",), "dropped": ("",), "danced": (), "cried": (),
    "called": ("",),
    # encyclopedia entries
    "this entry is about": ("",), "lies": ("in",), "stands": ("by",), "was founded": ("by",),
    "is ruled": ("by",), "is known": ("for",), "trades": ("", "with"), "has": ("",), "questions": (),
    "is near": ("",), "is older than": ("",), "honors": ("",), "sells": ("", "to"),
    # recipes
    "how to make": ("",), "need": ("",), "mix": ("",), "add": ("", "to"), "put": ("", "in"),
    "cut": ("",), "boil": ("", "for"), "pour": ("", "into"), "wash": ("",), "heat": ("",),
    "serve": ("",), "stir": ("",), "fry": ("", "in"), "chop": ("",), "soak": ("", "for"), "bake": ("", "for"),
    "grind": ("",), "season": ("",), "cool": ("",),
    # dialogues
    "meets": ("",), "hello": ("",), "goodbye": ("",), "left": ("", "in"), "hid": ("", "in"), "kept": ("", "in"),
    "stored": ("", "in"), "placed": ("", "in"), "buried": ("", "in"), "hung": ("", "in"), "is": ("in",),
}
LOCATIVE = frozenset({"in", "to", "into", "by"})
PRONOUNS = {("she", "subj"): "she", ("she", "obj"): "her", ("he", "subj"): "he", ("he", "obj"): "him",
            ("it", "subj"): "it", ("it", "obj"): "it"}
FUNCTION_WORDS = ("a", "an", "the", "named", "of", "and", "I", "you", "where", "what", "whom",
                  "she", "her", "he", "him", "it")


def cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def pronoun_class(ent: dict) -> str | None:
    """Which pronoun can refer to an entity: persons by their name's gender, things 'it', places none."""
    return ent.get("pron") if ent["kind"] == "person" else ("it" if ent["kind"] == "thing" else None)


def entities(records: list[dict]) -> dict[str, dict]:
    """Every entity defined by a ``new`` ref anywhere in the records (so subsets can be rendered)."""
    found = {}

    def visit(ref):
        if "items" in ref:
            for item in ref["items"]:
                visit(item)
        elif ref.get("form") == "new":
            found[ref["id"]] = ref
    for rec in records:
        for ref in ([rec["subj"]] if "subj" in rec else []) + rec.get("args", []):
            visit(ref)
    return found


class Renderer:
    """One lexicon (id -> surface; None = English) and one clause order ('SVO' or 'SOV')."""

    def __init__(self, lexicon: dict[str, str] | None = None, order: str = "SVO"):
        if order not in ("SVO", "SOV"):
            raise ValueError(f"order must be SVO or SOV, got {order!r}")
        self.word = (lambda w: w) if lexicon is None else lexicon.__getitem__
        self.order = order

    def words(self, ids) -> str:
        return " ".join(self.word(w) for w in ids)

    def article(self, next_surface: str) -> str:
        return self.word("an" if next_surface[0] in "aeiou" else "a")

    def intro(self, ent: dict) -> str:
        """The phrase that introduces an entity (also used to repeat it verbatim in answers)."""
        style = ent["style"]
        if style == "proper":
            return ent["name"]
        noun = self.word(ent["noun"])
        if style == "def":
            return f"{self.word('the')} {noun}"
        if style == "qty":
            return f"{self.words(ent['qty'])} {self.word('of')} {noun}"
        if style == "bare":
            return f"{self.word(ent['adj'])} {noun}"
        head = f"{self.word(ent['adj'])} {noun}" if ent.get("adj") else noun
        phrase = f"{self.article(head)} {head}"
        return f"{phrase} {self.word('named')} {ent['name']}" if style == "named" else phrase

    def desc(self, ent: dict) -> str:
        """The definite description: 'the baker' (unique within a document by construction)."""
        if ent["style"] == "def":
            return self.intro(ent)
        head = self.intro(ent) if ent["style"] == "bare" else self.word(ent["noun"])
        return f"{self.word('the')} {head}"

    def pronoun(self, ent: dict, case: str) -> str:
        return self.word(PRONOUNS[pronoun_class(ent), case])

    def np(self, ref: dict, ents: dict, case: str = "obj") -> str:
        if "words" in ref:
            return self.words(ref["words"])
        form = ref["form"]
        if form in ("I", "you"):
            return self.word(form)
        ent = ents[ref["id"]]
        if form == "name":
            return ent["name"]
        if form == "desc":
            return self.desc(ent)
        if form == "pron":
            return self.pronoun(ent, case)
        return self.intro(ent)

    def mark(self, marker: str, phrase: str) -> str:
        if not marker:
            return phrase
        return f"{self.word(marker)} {phrase}" if self.order == "SVO" else f"{phrase} {self.word(marker)}"

    def arg(self, marker: str, ref: dict, ents: dict) -> list[str]:
        """Units of one argument: one, or one per item of a list ('A,' 'B' 'and C')."""
        if "items" not in ref:
            return [self.mark(marker, self.np(ref, ents))]
        items = [self.np(item, ents) for item in ref["items"]]
        if len(items) > 1:
            items = [f"{item}," for item in items[:-2]] + [items[-2], f"{self.word('and')} {items[-1]}"]
        return [self.mark(marker, items[0])] + items[1:]

    def wh(self, marker: str, ref: dict, ents: dict) -> str:
        kind = ents[ref["id"]]["kind"] if "id" in ref else "thing"
        if kind == "place" and marker in LOCATIVE:
            return self.word("where")
        return self.mark(marker, self.word("whom" if kind == "person" else "what"))

    def clause(self, rec: dict, ents: dict) -> list[str]:
        """The units of one record, uncapitalised and without leading whitespace."""
        markers, args, mood = FRAMES[rec["pred"]], rec.get("args", []), rec.get("mood")
        if mood == "answer":
            units = self.arg(markers[rec["focus"]], args[rec["focus"]], ents)
        else:
            arg_units = [[self.wh(m, a, ents)] if mood == "question" and i == rec["focus"] else self.arg(m, a, ents)
                         for i, (m, a) in enumerate(zip(markers, args))]
            units = [f"{self.word(rec['pre'])},"] if "pre" in rec else []
            units += [self.np(rec["subj"], ents, "subj")] if "subj" in rec else []
            verb = [self.word(rec["pred"])]
            flat = [u for au in arg_units for u in au] + ([self.word(rec["adv"])] if "adv" in rec else [])
            units += verb + flat if self.order == "SVO" else flat + verb
        units[-1] += "?" if mood == "question" else "."
        return units

    def record(self, rec: dict, ents: dict) -> str:
        """Marked text of one record, including its separator and, in dialogues, the speaker label."""
        units = self.clause(rec, ents)
        head = f"{MARK}{rec.get('sep', '')}"
        if "speaker" in rec:
            head += f"{ents[rec['speaker']]['name']}:{MARK} "
        return head + cap(units[0]) + "".join(f"{MARK} {u}" for u in units[1:])

    def document(self, records: list[dict], ents: dict | None = None) -> str:
        """Marked text of records; ``.replace('|', '')`` gives the plain text.

        ``ents`` defaults to the entities the records define; pass ``entities(all_records)`` to
        render a subset of a document (a summary) that mentions entities defined elsewhere.
        """
        ents = entities(records) if ents is None else ents
        return "".join(self.record(rec, ents) for rec in records)
